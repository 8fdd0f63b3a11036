import { ConfigError } from '../core/errors.js';
import type { ResourceDefinition, Row, TableSchema } from '../core/types.js';
import { tableSchema } from '../core/table-schema.js';
import { countRecords } from '../extract/count.js';
import type { TimeWindow } from '../extract/windows.js';
import { newCallStats, type CallContext, type CallStats } from '../http/client.js';
import { streamKey, type StateDocument, type StreamState } from '../state/store.js';
import type { DeletionMode } from '../core/deletions.js';
import type { ReconcileMode } from '../core/reconcile-mode.js';
import { findDifferences, RECONCILE_RECENT_MS, reconcileRange, type Difference } from './differences.js';
import { compareIds, followersOf, keptBefore, ListedIds, RECONCILE_SECTION, rememberKept } from './ids.js';
import type { RunServices, SyncRun, SyncSettings } from '../sync/context.js';
import type { SyncTargets } from '../sync/engine.js';
import { allProjectsScope, singleProjectScope } from '../sync/scopes.js';
import type { StreamResult } from '../sync/frame.js';
import { repairWindows, verifyProjects, type VerifyProject, type VerifyWindow } from './verify.js';

/**
 * The reconcile step of a sync (see `differences.ts` for what is compared and why it is cheap): every
 * checkable (resource, project) is checked, the windows that differ are re-read within this run
 * (`repair`, through the run's client: the same rate budget) up to `MAX_REPAIR_RECORDS`, checked
 * again, and every window that differed is reported with what became of it.
 */

/**
 * Records one run re-reads to repair differences, at most (the API's count of the windows, in
 * order): ~1,000 list requests, 2.5 minutes at 400 a minute. A larger loss is reported, not read
 * (it is `verify --repair`'s or a backfill's, which a scheduled sync should not become).
 */
const MAX_REPAIR_RECORDS = 100_000;

/**
 * What the reconcile step is given besides the sync's run (`SyncRun`: its services, its settings
 * — lookback, start, batch sizes, concurrency —, its start, id and stop, its capabilities book):
 * what the run read and what it did.
 */
export interface ReconcileOptions {
  readonly mode: Exclude<ReconcileMode, 'off'>;
  /**
   * What the run read: its resources (under its contract), its project scope, and every declared
   * resource (a deleted event's spans and bridge rows follow it whether or not this run reads them).
   */
  readonly targets: SyncTargets;
  /** The state as it was before the run: where each stream's windows started. */
  readonly before: StateDocument;
  /** The run's streams: a stream that failed is not checked. */
  readonly streams: readonly StreamResult[];
  /** @default MAX_REPAIR_RECORDS */
  readonly maxRepairRecords?: number;
  /** Rows found deleted at the source (`--deletions`). @default 'mark' */
  readonly deletions?: DeletionMode;
}

/** A window that differed, and what became of it. */
interface ReconciledWindow {
  readonly resource: string;
  readonly project: string;
  readonly from: string;
  readonly to: string;
  /** The API's count and the warehouse's when found. */
  readonly expected: number;
  readonly found: number;
  /** The warehouse's count after the repair (and the API's then), when repaired. */
  readonly after?: { readonly expected: number; readonly found: number };
  /**
   * `repaired`: the list and the warehouse agree after the re-read, and the count with them;
   * `deleted`: rows no longer listed were marked or deleted (`--deletions`); `kept`: such rows left
   * as they are (`--deletions keep`); `count disagrees`: the list and the warehouse agree, the count
   * does not (late or wrong: checked again next run); `differs`: the list returns rows the warehouse
   * still lacks (exit 5); `not repaired`: with `reason` (exit 5).
   */
  readonly outcome: 'repaired' | 'deleted' | 'kept' | 'count disagrees' | 'differs' | 'not repaired';
  readonly reason?: string;
  /** Records the API's list returned for the window (the repair's re-read). */
  readonly listed?: number;
  /** Records in the warehouse the list no longer returns, and what was done with them. */
  readonly deleted?: {
    readonly ids: readonly string[];
    readonly action: 'marked' | 'deleted' | 'kept';
    /** Rows of the tables that follow them (spans, bridge rows), per table (BigQuery: not reported). */
    readonly followers: Readonly<Record<string, number>>;
    /** Bytes the destination processed to mark or delete them (BigQuery). */
    readonly bytesProcessed?: number;
  };
  /** Records marked deleted that the list returns again: their mark cleared. */
  readonly restored?: number;
}

/** Windows that differ for good: exit 5. */
export const isRemaining = (w: ReconciledWindow): boolean => w.outcome === 'differs' || w.outcome === 'not repaired';

export interface ReconcileReport {
  readonly mode: Exclude<ReconcileMode, 'off'>;
  /** Requests the check, the re-reads and the checks after them made. */
  readonly requests: number;
  readonly checked: readonly {
    readonly resource: string;
    readonly project: string;
    readonly from: string;
    readonly to: string;
    readonly by: 'timeseries' | 'count';
  }[];
  readonly windows: readonly ReconciledWindow[];
  readonly notChecked: readonly { readonly resource: string; readonly project?: string; readonly reason: string }[];
  /** Windows that still differ (repair not asked, not possible, or not enough). */
  readonly remaining: number;
  /** Records found deleted at the source this run, by what became of them. */
  readonly deletions: {
    readonly mode: DeletionMode;
    readonly found: number;
    readonly marked: number;
    readonly deleted: number;
    readonly kept: number;
    readonly restored: number;
    /** Windows `--deletions keep` said on an earlier run, unchanged since: not said nor read again. */
    readonly keptBefore: number;
  };
}

/** Why a resource cannot be reconciled by counts; `undefined` when it can. */
export function notReconcilable(resource: ResourceDefinition): string | undefined {
  if (resource.mode !== 'incremental' || resource.cursorField === undefined)
    return 'read whole each run (full refresh): nothing to reconcile';
  if (resource.perParent !== undefined) return 'read per event: the API counts no traces';
  if (resource.countPath === undefined && resource.split?.count !== undefined) {
    // users, conversations: the only counts are distinct ids among *events* in a window (count_by).
    return (
      `the API counts them only as distinct ${resource.split.count.value} among events in a window (${resource.split.count.path}?${resource.split.count.param}=${resource.split.count.value}), ` +
      `while rows are kept by ${resource.cursorField}, which moves with each new event: no count of rows by ${resource.cursorField} exists, so not checked`
    );
  }
  if (resource.countPath === undefined) return `no count endpoint is documented for ${resource.path}: not checked`;
  if ((resource.cursorFormat ?? 'iso') !== 'iso') return `${resource.cursorField} is not an ISO instant: not checked`;
  return undefined;
}

/** Reconcile the run's resources, project by project; repair what differs when asked. */
export async function reconcileRun(options: ReconcileOptions, run: SyncRun): Promise<ReconcileReport> {
  const { targets } = options;
  const deps: RunServices = run;
  const stats: CallStats[] = [];
  const checked: ReconcileReport['checked'][number][] = [];
  const notChecked: ReconcileReport['notChecked'][number][] = [];
  const found: { resource: ResourceDefinition; project: VerifyProject; difference: Difference }[] = [];
  const allKey = allProjectsScope(targets.projectIds).key;
  let projects: VerifyProject[];
  try {
    projects = verifyProjects({
      project: targets.project,
      projectIds: targets.projectIds,
      knownProjects: deps.state.document.projects,
    });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    projects = [];
    notChecked.push({ resource: '*', reason: 'no project is known yet (a `*` sync records them as it reads)' });
  }
  const jobs: Promise<void>[] = [];
  if (deps.destination.can.windows === undefined) {
    notChecked.push({ resource: '*', reason: `the ${deps.destination.kind} destination cannot count rows per window` });
    projects = [];
  }
  for (const resource of targets.resources) {
    const reason = notReconcilable(resource);
    if (reason !== undefined) {
      notChecked.push({ resource: resource.name, reason });
      continue;
    }
    for (const project of projects) {
      // A `*` sync keeps one stream for all projects, or one per project where `*` was refused.
      const keys = [streamKey(resource.name, project.slug), streamKey(resource.name, allKey)];
      const key = keys.find((k) => deps.state.document.streams[k] !== undefined);
      const result = options.streams.find(
        (s) => s.resource === resource.name && (s.scope === project.slug || s.scope === allKey),
      );
      const markIso = key === undefined ? undefined : deps.state.stream(key).mark;
      if (result !== undefined && result.outcome === 'failed') {
        notChecked.push({ resource: resource.name, project: project.slug, reason: 'its stream failed this run' });
        continue;
      }
      if (markIso === undefined) {
        notChecked.push({ resource: resource.name, project: project.slug, reason: 'no window is finished yet' });
        continue;
      }
      const range = reconcileRange({
        runStartMs: run.runStartMs,
        markMs: Date.parse(markIso),
        lookbackMs: run.settings.lookbackMs,
        startMs: run.settings.startMs,
        touchedFromMs: touchedFrom(key === undefined ? undefined : options.before.streams[key], run.settings),
      });
      if (range === undefined) continue;
      jobs.push(
        findDifferences(resource, project, range, run).then(
          (check) => {
            stats.push(check.stats);
            for (const part of [range.older, range.recent]) {
              if (part !== undefined)
                checked.push({
                  resource: resource.name,
                  project: project.slug,
                  from: iso(part.fromMs),
                  to: iso(part.toMs),
                  by: part === range.recent ? check.by : 'count',
                });
            }
            for (const difference of check.differences) found.push({ resource, project, difference });
          },
          (error: unknown) => {
            // One project's count failing (a 403, retries exhausted) leaves the others checked; said, not hidden.
            const message = (error as Error).message;
            deps.logger.warn(
              { resource: resource.name, project: project.slug, err: message },
              `reconcile: could not count ${resource.name} of ${project.slug}`,
            );
            notChecked.push({ resource: resource.name, project: project.slug, reason: `the count failed: ${message}` });
          },
        ),
      );
    }
  }
  await Promise.all(jobs);
  found.sort((a, b) => a.difference.window.fromMs - b.difference.window.fromMs);

  const windows: ReconciledWindow[] = [];
  const budget = options.maxRepairRecords ?? MAX_REPAIR_RECORDS;
  const mode = options.deletions ?? 'mark';
  let planned = 0;
  let keptEarlier = 0;
  const toRepair: typeof found = [];
  for (const f of found) {
    const base = windowBase(f);
    // The re-read lists about as many records as the larger count: a count that lags says 0.
    const cost = Math.max(f.difference.api, f.difference.warehouse);
    if (options.mode === 'check') windows.push({ ...base, outcome: 'not repaired', reason: '--reconcile check' });
    else if (keptBefore(deps.state.document.sections, mode, base)) keptEarlier += 1;
    else if (deps.destination.can.deletions === undefined && f.difference.warehouse > f.difference.api) {
      windows.push({
        ...base,
        outcome: 'not repaired',
        reason: `the warehouse has rows the API no longer counts, and the ${deps.destination.kind} destination cannot compare their ids`,
      });
    } else if (planned + cost > budget) {
      windows.push({
        ...base,
        outcome: 'not repaired',
        reason: `over this run's repair budget (${budget} records): query-sync verify --from ${base.from} --to ${base.to} --repair re-reads it`,
      });
    } else {
      planned += cost;
      toRepair.push(f);
    }
  }
  if (toRepair.length > 0) windows.push(...(await repair(toRepair, options, run, stats)));
  windows.sort(
    (a, b) =>
      a.from.localeCompare(b.from) || a.resource.localeCompare(b.resource) || a.project.localeCompare(b.project),
  );
  const kept = windows.filter((w) => w.deleted?.action === 'kept');
  if (kept.length > 0 || keptEarlier > 0 || deps.state.document.sections[RECONCILE_SECTION] !== undefined)
    await rememberKept(
      deps.state,
      kept.map((w) => ({
        ...w,
        expected: w.expected,
        found: w.after?.found ?? w.found,
        ids: w.deleted?.ids.length ?? 0,
      })),
      run.runStartMs - RECONCILE_RECENT_MS - DAY_MS,
    );
  const deleted = (action: 'marked' | 'deleted' | 'kept'): number =>
    windows.reduce((n, w) => n + (w.deleted?.action === action ? w.deleted.ids.length : 0), 0);
  return {
    mode: options.mode,
    requests: stats.reduce((n, s) => n + s.requests, 0),
    checked,
    windows,
    notChecked,
    remaining: windows.filter(isRemaining).length,
    deletions: {
      mode,
      found: deleted('marked') + deleted('deleted') + deleted('kept'),
      marked: deleted('marked'),
      deleted: deleted('deleted'),
      kept: deleted('kept'),
      restored: windows.reduce((n, w) => n + (w.restored ?? 0), 0),
      keptBefore: keptEarlier,
    },
  };
}

/**
 * Re-read the windows (the backfill's forced window walk), collecting the ids the list returns; then
 * compare them with the warehouse's (`ids.ts`) and apply `--deletions` to the rows no
 * longer listed, with the rows that follow them. A destination that cannot give ids is counted again.
 */
async function repair(
  found: readonly { resource: ResourceDefinition; project: VerifyProject; difference: Difference }[],
  options: ReconcileOptions,
  run: SyncRun,
  stats: CallStats[],
): Promise<ReconciledWindow[]> {
  const deps: RunServices = run;
  const { resources, declared } = options.targets;
  // Adjacent windows of one (resource, project) are read as one walk (a count that lags makes every
  // hour differ: one walk of the run of hours, not one walk and one ledger write per hour); each is
  // still compared on its own, by the instants of the ids listed.
  const asVerify: VerifyWindow[] = [];
  for (const f of [...found].sort(
    (a, b) =>
      a.resource.name.localeCompare(b.resource.name) ||
      a.project.slug.localeCompare(b.project.slug) ||
      a.difference.window.fromMs - b.difference.window.fromMs,
  )) {
    const last = asVerify.at(-1);
    const from = iso(f.difference.window.fromMs);
    if (last !== undefined && last.resource === f.resource.name && last.project === f.project.slug && last.to === from)
      asVerify[asVerify.length - 1] = { ...last, to: iso(f.difference.window.toMs) };
    else
      asVerify.push({
        resource: f.resource.name,
        project: f.project.slug,
        header: f.project.header,
        from,
        to: iso(f.difference.window.toMs),
        api: f.difference.api,
        warehouse: f.difference.warehouse,
        match: false,
      });
  }
  const listed = new ListedIds(resources);
  const streams = await repairWindows(
    asVerify,
    {
      resources,
      concurrency: run.settings.concurrency,
      batchRows: run.settings.batchRows,
      batchBytes: run.settings.batchBytes,
      signal: run.signal,
      runId: run.runId,
      onStored: (resource, project, rows) => listed.add(resource, project, rows),
    },
    deps,
  );
  for (const s of streams) stats.push(s.stats);
  const tracks = deps.destination.can.deletions;
  const mode = options.deletions ?? 'mark';
  const atIso = new Date(deps.clock.now()).toISOString();
  // One window at a time: each applies its deletions in a transaction of its own.
  const out: ReconciledWindow[] = [];
  for (const f of found) {
    const base = windowBase(f);
    const failed = streams.find(
      (s) =>
        s.resource === f.resource.name && s.scope === singleProjectScope(f.project.header).key && s.outcome !== 'ok',
    );
    if (tracks === undefined || failed !== undefined) {
      const after = await countAgain(f.resource, f.project, f.difference.window, deps, run.signal, stats);
      if (after.expected === after.found) {
        out.push({ ...base, after, outcome: 'repaired' });
        continue;
      }
      out.push({
        ...base,
        after,
        outcome: 'differs',
        reason:
          failed?.error === undefined
            ? 'the API still counts other records than its list returns'
            : `the re-read failed: ${failed.error.message}`,
      });
      continue;
    }
    const window = {
      projectId: f.project.slug,
      column: f.resource.cursorField as string,
      fromIso: base.from,
      toIso: base.to,
    };
    const ids = listed.inWindow(f.resource.name, f.project.slug, f.difference.window.fromMs, f.difference.window.toMs);
    const keys = await tracks.keysInWindow(f.resource.name, { ...window, key: f.resource.key });
    const { lost, gone, restored } = compareIds(ids, keys);
    const change = (action: 'mark' | 'delete' | 'unmark', of: readonly string[]) =>
      tracks.applyDeletions({
        action,
        projectId: f.project.slug,
        ids: of,
        parent: { ...window, table: f.resource.name, key: f.resource.key },
        followers: followersOf(f.resource, declared ?? resources),
        atIso,
        runId: run.runId,
      });
    if (restored.length > 0) await change('unmark', restored);
    let deleted: ReconciledWindow['deleted'];
    if (gone.length > 0 && lost.length === 0) {
      if (mode === 'keep') deleted = { ids: gone, action: 'kept', followers: {} };
      else {
        const result = await change(mode === 'mark' ? 'mark' : 'delete', gone);
        const followers = Object.fromEntries(Object.entries(result.rows).filter(([t]) => t !== f.resource.name));
        deleted = {
          ids: gone,
          action: mode === 'mark' ? 'marked' : 'deleted',
          followers,
          ...(result.bytesProcessed === undefined ? {} : { bytesProcessed: result.bytesProcessed }),
        };
      }
    }
    const live =
      keys.live.length + restored.length - (deleted !== undefined && deleted.action !== 'kept' ? gone.length : 0);
    const after = { expected: f.difference.api, found: live };
    const common = {
      ...base,
      after,
      listed: ids.size,
      ...(deleted === undefined ? {} : { deleted }),
      ...(restored.length === 0 ? {} : { restored: restored.length }),
    };
    const countNote =
      ids.size === f.difference.api
        ? ''
        : `; the count disagrees with the list (the API counts ${f.difference.api}, its list returns ${ids.size})`;
    if (lost.length > 0)
      out.push({
        ...common,
        outcome: 'differs',
        reason: `the list returns ${lost.length} record${lost.length === 1 ? '' : 's'} the warehouse does not hold after the re-read (${lost.slice(0, 3).join(', ')}${lost.length > 3 ? ', …' : ''})`,
      });
    else if (deleted !== undefined)
      out.push({
        ...common,
        outcome: deleted.action === 'kept' ? 'kept' : 'deleted',
        reason: `${gone.length} record${gone.length === 1 ? '' : 's'} no longer listed: deleted at the source${countNote}`,
      });
    else if (ids.size === f.difference.api)
      out.push({
        ...common,
        outcome: 'repaired',
        ...(restored.length === 0
          ? {}
          : {
              reason: `${restored.length} record${restored.length === 1 ? '' : 's'} listed again: deletion mark cleared`,
            }),
      });
    else
      out.push({
        ...common,
        outcome: 'count disagrees',
        reason: `count disagrees with the list: the API counts ${f.difference.api}, its list returns ${ids.size}, all in the warehouse (a count that lags or is wrong: checked again by the next run)`,
      });
  }
  return out;
}

async function countAgain(
  resource: ResourceDefinition,
  project: VerifyProject,
  window: TimeWindow,
  deps: RunServices,
  signal: AbortSignal | undefined,
  stats: CallStats[],
): Promise<{ expected: number; found: number }> {
  const ctx: CallContext = {
    resource: resource.name,
    project: project.slug,
    lane: `reconcile|${resource.name}|${project.slug}`,
    stats: newCallStats(),
    signal,
  };
  stats.push(ctx.stats);
  const [expected, found] = await Promise.all([
    countRecords(deps.client, resource, singleProjectScope(project.header), window, ctx),
    deps.destination.can.windows?.countWindow(resource.name, {
      projectId: project.slug,
      column: resource.cursorField as string,
      fromIso: iso(window.fromMs),
      toIso: iso(window.toMs),
    }) ?? Promise.resolve(0),
  ]);
  return { expected, found };
}

/** The earliest instant the run may have written: its window's start, a pending or split window, the settle re-read. */
export function touchedFrom(
  before: StreamState | undefined,
  settings: Pick<SyncSettings, 'lookbackMs' | 'startMs'>,
): number {
  if (before?.mark === undefined) return settings.startMs ?? 0;
  const starts = [Date.parse(before.mark) - settings.lookbackMs];
  for (const at of [before.pending?.from, before.split?.from, before.settled, before.settlePending?.from])
    if (at !== undefined) starts.push(Date.parse(at));
  return Math.min(...starts);
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** What every outcome of a window that differed says of it: where, and the two counts when found. */
function windowBase(f: {
  readonly resource: ResourceDefinition;
  readonly project: VerifyProject;
  readonly difference: Difference;
}): Pick<ReconciledWindow, 'resource' | 'project' | 'from' | 'to' | 'expected' | 'found'> {
  return {
    resource: f.resource.name,
    project: f.project.slug,
    from: iso(f.difference.window.fromMs),
    to: iso(f.difference.window.toMs),
    expected: f.difference.api,
    found: f.difference.warehouse,
  };
}
const DAY_MS = 86_400_000;

/** One row per window that differed, per run: a detail table of `_query_sync_runs`, keyed by the run. */
export const RECONCILE_TABLE = '_query_sync_reconcile';
export const RECONCILE_SCHEMA: TableSchema = tableSchema(
  RECONCILE_TABLE,
  ['run_id', 'resource', 'project_id', 'window_from'],
  {
    run_id: 'string',
    checked_at: 'timestamp',
    resource: 'string',
    project_id: 'string',
    window_from: 'timestamp',
    window_to: 'timestamp',
    expected: 'int64',
    found: 'int64',
    expected_after: 'int64',
    found_after: 'int64',
    outcome: 'string',
    reason: 'string',
    listed: 'int64',
    deleted: 'int64',
    deleted_ids: 'json',
    deletion: 'string',
    restored: 'int64',
  },
);

/**
 * The run history's brief of a reconcile (`_query_sync_runs.reconcile`): a run whose tables could
 * not all be proven says so in the warehouse, not only in its summary line.
 */
export function reconcileBrief(report: ReconcileReport): Readonly<Record<string, unknown>> {
  return {
    mode: report.mode,
    requests: report.requests,
    checked: report.checked.length,
    differed: report.windows.length,
    remaining: report.remaining,
    deletions: report.deletions,
    not_checked: report.notChecked,
  };
}

export function reconcileRows(runId: string, checkedAt: string, report: ReconcileReport): Row[] {
  return report.windows.map((w) => ({
    run_id: runId,
    checked_at: checkedAt,
    resource: w.resource,
    project_id: w.project,
    window_from: w.from,
    window_to: w.to,
    expected: BigInt(w.expected),
    found: BigInt(w.found),
    expected_after: w.after === undefined ? null : BigInt(w.after.expected),
    found_after: w.after === undefined ? null : BigInt(w.after.found),
    outcome: w.outcome,
    reason: w.reason ?? null,
    listed: w.listed === undefined ? null : BigInt(w.listed),
    deleted: w.deleted === undefined ? null : BigInt(w.deleted.ids.length),
    deleted_ids: w.deleted === undefined ? null : JSON.stringify(w.deleted.ids),
    deletion: w.deleted?.action ?? null,
    restored: w.restored === undefined ? null : BigInt(w.restored),
  }));
}
