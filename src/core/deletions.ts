/**
 * Records deleted at the source (retention, an erasure request), found by reconcile where a window's
 * ids are compared with the API's list: `mark` sets `_deleted_at` (once; cleared when the record is
 * listed again), `delete` removes the rows, `keep` leaves them and says so once per window. Here,
 * below every layer, so the configuration checks the setting without loading the pipeline.
 */
export type DeletionMode = 'mark' | 'delete' | 'keep';

/**
 * When reconcile found the row deleted at the source (`--deletions mark`); NULL while it is listed.
 * Only reconcile sets and clears it: a write of the row leaves it as it is (`SchemaTracker` does not
 * claim it), so a table gets the column the first time a row of it is marked.
 */
export const DELETED_AT_COLUMN = '_deleted_at';
