import { isRemaining, type ReconcileReport } from '../reconcile/step.js';
import type { ReconcilePlan } from './plan-reconcile.js';
import { EXIT_CODES } from '../core/exit-codes.js';

/**
 * The reconcile part of a sync's text summary: what was checked and at what cost, each window that
 * differed with what became of it, what could not be checked, and which windows still differ.
 */
export function formatReconcile(report: ReconcileReport): string[] {
  const lines: string[] = [];
  const scopes = new Set(report.checked.map((c) => `${c.resource} ${c.project}`));
  const differed = report.windows.length;
  const by = (outcome: string): number => report.windows.filter((w) => w.outcome === outcome).length;
  const parts = [
    `${by('repaired')} repaired`,
    ...(by('deleted') + by('kept') === 0
      ? []
      : [
          `${by('deleted') + by('kept')} with records deleted at the source (${report.deletions.found} found: ${report.deletions.marked} marked, ${report.deletions.deleted} deleted, ${report.deletions.kept} kept)`,
        ]),
    ...(by('count disagrees') === 0 ? [] : [`${by('count disagrees')} where the count disagrees with the list`]),
  ];
  lines.push(
    `reconcile (${report.mode}): ${scopes.size} resource-project range${scopes.size === 1 ? '' : 's'} checked with ${report.requests} request${report.requests === 1 ? '' : 's'}; ` +
      (differed === 0
        ? 'API and warehouse agree'
        : `${differed} window${differed === 1 ? '' : 's'} differed, ${parts.join(', ')}`),
  );
  for (const w of report.windows) {
    const head = `reconcile: ${w.resource} ${w.project} [${w.from}, ${w.to}) expected ${w.expected}, found ${w.found}`;
    const restored = w.restored === undefined ? '' : `; ${w.restored} listed again, their deletion mark cleared`;
    const followers = Object.entries(w.deleted?.followers ?? {})
      .map(([t, n]) => `${n} ${t} row${n === 1 ? '' : 's'}`)
      .join(', ');
    if (w.outcome === 'repaired')
      lines.push(`${head}: repaired (${w.after?.found ?? w.expected} after the re-read${restored})`);
    else if (w.outcome === 'deleted' || w.outcome === 'kept') {
      const n = w.deleted?.ids.length ?? 0;
      const what =
        w.deleted?.action === 'marked'
          ? `marked _deleted_at${followers === '' ? '' : ` with ${followers}`}`
          : w.deleted?.action === 'deleted'
            ? `deleted from the warehouse${followers === '' ? '' : ` with ${followers}`}`
            : 'kept as they are (--deletions keep; said once for this window)';
      const bytes = w.deleted?.bytesProcessed === undefined ? '' : `; ${w.deleted.bytesProcessed} bytes processed`;
      lines.push(
        `${head}: ${n} record${n === 1 ? '' : 's'} no longer listed (deleted at the source), ${what}; ${w.listed ?? '?'} listed${restored}${bytes}`,
      );
    } else if (w.outcome === 'count disagrees')
      lines.push(
        `${head}: count disagrees with the list (${w.listed ?? '?'} listed, all in the warehouse): not a loss, checked again by the next run${restored}`,
      );
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
    const names = report.windows.filter(isRemaining).map((w) => `${w.resource} ${w.project} [${w.from}, ${w.to})`);
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
