import type { ReconcileReport } from '../pipeline/reconcile-run.js';
import type { ReconcilePlan } from '../pipeline/plan-reconcile.js';
import { EXIT_CODES } from '../core/exit-codes.js';

/**
 * The reconcile part of a sync's text summary: what was checked and at what cost, each window that
 * differed with what became of it, what could not be checked, and which windows still differ.
 */
export function formatReconcile(report: ReconcileReport): string[] {
  const lines: string[] = [];
  const scopes = new Set(report.checked.map((c) => `${c.resource} ${c.project}`));
  const differed = report.windows.length;
  lines.push(
    `reconcile (${report.mode}): ${scopes.size} resource-project range${scopes.size === 1 ? '' : 's'} checked with ${report.requests} request${report.requests === 1 ? '' : 's'}; ` +
      (differed === 0
        ? 'API and warehouse agree'
        : `${differed} window${differed === 1 ? '' : 's'} differed, ${differed - report.remaining} repaired`),
  );
  for (const w of report.windows) {
    const head = `reconcile: ${w.resource} ${w.project} [${w.from}, ${w.to}) expected ${w.expected}, found ${w.found}`;
    if (w.outcome === 'repaired') lines.push(`${head}: repaired (${w.after?.found ?? w.expected} after the re-read)`);
    else if (w.outcome === 'differs')
      lines.push(
        `${head}: STILL DIFFERS after the re-read (expected ${w.after?.expected ?? '?'}, found ${w.after?.found ?? '?'}): ${w.reason ?? ''}`,
      );
    else lines.push(`${head}: NOT repaired (${w.reason ?? ''})`);
  }
  const skipped = [...new Set(report.notChecked.filter((n) => n.project === undefined).map((n) => n.resource))];
  if (skipped.length > 0)
    lines.push(
      `reconcile: not checked: ${skipped.join(', ')} (no count of their rows: see docs/reconcile.md; --json gives the reasons)`,
    );
  for (const n of report.notChecked.filter((x) => x.project !== undefined))
    lines.push(`reconcile: ${n.resource} ${n.project ?? ''} not checked: ${n.reason}`);
  if (report.remaining > 0) {
    const names = report.windows
      .filter((w) => w.outcome !== 'repaired')
      .map((w) => `${w.resource} ${w.project} [${w.from}, ${w.to})`);
    lines.push(
      `reconcile: ${report.remaining} window${report.remaining === 1 ? '' : 's'} still differ${report.remaining === 1 ? 's' : ''}: ${names.join('; ')} (exit ${EXIT_CODES.mismatch})`,
    );
  }
  return lines;
}

/** `plan`'s line for the next sync's reconcile step: its requests when nothing differs. */
export function formatReconcilePlan(plan: ReconcilePlan): string[] {
  if (plan.mode === 'off') return ['reconcile: off (no requests)'];
  const per = plan.scopes.map((s) => `${s.resource} ${s.project} ${s.requests}`).join(', ');
  return [
    `reconcile (${plan.mode}): ${plan.requestsPerRun} request${plan.requestsPerRun === 1 ? '' : 's'} per run when API and warehouse agree` +
      (per === '' ? '' : ` (${per})`) +
      '; a difference adds its narrowing and the re-read of the hours that differ',
  ];
}
