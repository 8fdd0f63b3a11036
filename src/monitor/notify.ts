import type { RunFigures } from './figures.js';
import { evaluateFreshness } from '../reports/freshness.js';

/**
 * Notifications (`--notify-url`, `--notify-on`): one JSON POST `{"text": …}` per event, the shape
 * Slack's and Mattermost's incoming webhooks, Discord's `/slack` endpoint and Microsoft Teams
 * workflows accept. Each names the resource and project, what happened and the command that fixes
 * it; at most one per kind and stream per run. Built from the run's figures only: nothing in them
 * is secret but error messages, which are redacted before they get here (`monitor.ts`).
 */

export type NotifyKind = 'failure' | 'difference' | 'schema-change' | 'stale';

export interface Notification {
  readonly kind: NotifyKind;
  readonly resource: string;
  readonly project: string;
  readonly text: string;
}

export interface NotifyContext {
  readonly command: string;
  /** The warehouse's name (`MonitorConfig.name`). */
  readonly name: string;
  readonly on: readonly NotifyKind[];
  readonly maxLagMs?: number;
}

const MAX_ERROR_CHARS = 300;

/** The run's notifications, one per kind and stream, in the order kinds are listed. */
export function notifications(f: RunFigures, ctx: NotifyContext): Notification[] {
  const head = `query-sync ${ctx.command} (${ctx.name})`;
  const out: Notification[] = [];
  const seen = new Set<string>();
  const add = (n: Notification): void => {
    const key = `${n.kind}|${n.resource}|${n.project}`;
    if (!ctx.on.includes(n.kind) || seen.has(key)) return;
    seen.add(key);
    out.push(n);
  };
  const again = (resource: string, project: string): string =>
    ctx.command === 'backfill'
      ? `run the same backfill again (it skips the windows done): \`query-sync backfill --resources ${resource} ${projectFlag(project)} --from … --to …\``
      : `run it again (it resumes where it stopped): \`query-sync sync --resources ${resource} ${projectFlag(project)}\``;

  // A stopped run (--max-run-time, SIGTERM) saved its progress and continues at the next: its
  // streams ended by the stop are no failure to act on.
  for (const [stream, error] of f.status === 'stopped' ? [] : Object.entries(f.streamErrors)) {
    const [resource = stream, project = ''] = stream.split(' ');
    add({
      kind: 'failure',
      resource,
      project,
      text: `${head} FAILED: ${resource} ${project}: ${error.code}: ${trim(error.message)}. Fix: ${fixFor(error.code, again(resource, project))}`,
    });
  }
  if (f.runError !== undefined && Object.keys(f.streamErrors).length === 0 && f.status === 'failed') {
    add({
      kind: 'failure',
      resource: 'all',
      project: 'all',
      text: `${head} FAILED before its streams: ${f.runError.code}: ${trim(f.runError.message)}. Fix: ${fixFor(f.runError.code, `run it again: \`query-sync ${ctx.command}\` with the same settings`)}`,
    });
  }
  for (const r of f.reconcile) {
    if (r.stillDiffering === 0) continue;
    const from = r.windows.map((w) => w.from).sort()[0] ?? '';
    const to =
      r.windows
        .map((w) => w.to)
        .sort()
        .at(-1) ?? '';
    const windows = r.windows.map((w) => `[${w.from}, ${w.to})`).join(', ');
    add({
      kind: 'difference',
      resource: r.resource,
      project: r.project,
      text:
        `${head}: ${r.resource} ${r.project} still differs from the API in ${r.stillDiffering} window${r.stillDiffering === 1 ? '' : 's'} after the run's reconcile (${windows}). ` +
        `Fix: \`query-sync verify --resources ${r.resource} ${projectFlag(r.project)} --from ${from} --to ${to} --repair\` (docs/reconcile.md)`,
    });
  }
  const changed = new Map<string, string[]>();
  for (const c of f.schemaChanges) {
    // A table a run creates (every first sync) is no change to anyone's queries.
    if (c.change === 'new table') continue;
    changed.set(c.table, [...(changed.get(c.table) ?? []), `${c.change} ${c.column} (${c.type})`]);
  }
  for (const [table, what] of changed) {
    add({
      kind: 'schema-change',
      resource: table,
      project: 'all',
      text:
        `${head}: schema change in ${table}: ${what.join(', ')}. ` +
        'Fix: nothing, with --schema-contract evolve (the default); to refuse new columns: --schema-contract freeze-columns (docs/warehouse.md)',
    });
  }
  // The same rule as `status --check` (reports/freshness.ts), over the marks this run left.
  const maxLagMs = ctx.command === 'sync' ? ctx.maxLagMs : undefined;
  const streams = f.marks.map((m) => ({
    resource: m.resource,
    project: m.project,
    asOf: new Date(m.markMs).toISOString(),
  }));
  for (const b of evaluateFreshness(
    { nowMs: f.nowMs, streams, backlogs: [] },
    maxLagMs === undefined ? {} : { maxLagMs },
  )) {
    add({
      kind: 'stale',
      resource: b.resource,
      project: b.project,
      text: `${head}: ${b.line}`,
    });
  }
  return out;
}

/** The command that fixes a failure, by its error's code (src/core/errors.ts). */
function fixFor(code: string, again: string): string {
  switch (code) {
    case 'E_AUTH':
      return `check the API key (QUERY_API_KEY) and its access to the project, then ${again}`;
    case 'E_CONFIG':
      return 'correct the setting the message names (`query-sync <command> --help`, docs/configuration.md)';
    case 'E_STATE':
    case 'E_WAREHOUSE_BUSY':
      return `another run holds the warehouse, or the state is unreadable: \`query-sync status\` says which (docs/state-and-recovery.md); then ${again}`;
    default:
      return again;
  }
}

function projectFlag(project: string): string {
  if (project.startsWith('*[')) return `--project '*' --project-ids ${project.slice(2, -1)}`;
  return project.startsWith('*') ? "--project '*'" : `--project ${project}`;
}

function trim(message: string): string {
  const line = message.replace(/\s+/g, ' ').trim();
  return line.length <= MAX_ERROR_CHARS ? line : `${line.slice(0, MAX_ERROR_CHARS)}…`;
}
