/**
 * Reconcile after each sync: `off`, `check` (report only) or `repair` (re-read what differs). Here,
 * below every layer, so the configuration checks the setting without loading the pipeline.
 */
export type ReconcileMode = 'off' | 'check' | 'repair';
