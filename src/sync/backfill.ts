import PQueue from 'p-queue';
import type { ProjectScope, ResourceDefinition, Row } from '../core/types.js';
import { sliceWindows, type TimeWindow } from '../extract/windows.js';
import { bookOf, failedBeforeStart, probeScope } from './engine.js';
import { StreamFrame, type StreamResult } from './frame.js';
import { SchemaTracker } from '../normalize/normalize.js';
import {
  changeStreamLedger,
  keepRunning,
  ledgerBook,
  ledgerUnits,
  readLedger,
  streamLedger,
  toIso,
  withRequested,
  type LedgerUnit,
  type StreamLedger,
} from '../state/books/ledger.js';
import type { StateWriter } from '../state/store.js';
import type { EngineRun } from './context.js';
import { owedQuery } from './traces/queue.js';
import { learnTraceMode, readsByParent } from './traces/probe.js';
import { ListNotes, listFacts, type ListFact } from './list-facts.js';
import { forEachScope, type ScopeOptions } from './scopes.js';
import { endOf, walkWindow, type WalkCounts, type WalkEnd } from './walk.js';
import type { CallContext } from '../http/client.js';
import type { PartFilter } from '../extract/paginate.js';
import { runUnits, unitList } from './units.js';
import { SharedBatch } from './shared-batch.js';

/**
 * A backfill: load [from, to) once, sliced into windows, alongside (never instead of) the
 * incremental sync. Each finished window goes into the ledger (state section `backfills`), each
 * batch of a running window checkpoints its cursor there, and the sync's high-water marks are never
 * read or written. Windows of every resource and project run through one pool of `concurrency`
 * slots; every request still goes through the run's one scheduler.
 */

/** What a backfill reads: its resources in their project scopes, over [from, to) in windows. */
export interface BackfillTargets extends ScopeOptions {
  readonly fromMs: number;
  readonly toMs: number;
  /** Window length. */
  readonly windowMs: number;
  /** Every declared resource: the events table of traces read per event when the backfill does not read events. @default resources */
  readonly declared?: readonly ResourceDefinition[];
}

/** How a backfill reads, the same for every stream of the run (its flags). */
interface BackfillSettings {
  /** Windows read at once, across all resources and projects (`--concurrency`). */
  readonly concurrency: number;
  /**
   * Rows held in memory by the whole run before writes: each of the `concurrency` windows writes
   * and checkpoints every `batchRows / concurrency` rows, so memory does not grow with concurrency.
   */
  readonly batchRows: number;
  /** Text held before writes by the whole run, shared by the windows like `batchRows` (`--batch-bytes`). */
  readonly batchBytes: number;
  /** A read that answered none while its event was younger than this is not final (`--settle`), for the owed count. @default 0 */
  readonly settleMs?: number;
}

/** A backfill run's context: its services, start, id and stop (`engineRun`), and its settings. */
export interface BackfillRun extends EngineRun {
  readonly settings: BackfillSettings;
}

/** Per-event traces a backfill leaves owed: the next sync reads them (the warehouse's book says which). */
interface OwedTracesNote {
  readonly resource: string;
  /** The resource its reads are per record of, e.g. `events` (`backfill --json`'s `owed[].parent`: the output key is kept). */
  readonly parent: string;
  /** Events owed their traces, per project (absent where the warehouse keeps no book). */
  readonly byProject?: Readonly<Record<string, number>>;
  readonly total?: number;
}

/** Progress callbacks (the live display and the progress log lines). */
export interface BackfillHooks {
  /** A (resource, scope) has `total` windows, `skipped` of them already done. */
  readonly onWindows?: (resource: string, scope: string, total: number, skipped: number) => void;
  /** A unit ended: `windows` of the run's slicing (more than one where they were read in one walk). */
  readonly onWindowDone?: (resource: string, scope: string, rows: number, windows: number) => void;
  readonly onPage?: (
    resource: string,
    scope: string,
    page: { readonly records: number; readonly rowsStored: number },
  ) => void;
  /** A (resource, scope) ended, whatever the outcome. */
  readonly onStreamDone?: (result: BackfillStreamResult) => void;
}

/** A stream's result (`windows`: those this run read, to the end or not), plus the windows skipped. */
export interface BackfillStreamResult extends StreamResult {
  /** Windows skipped because the ledger has them done. */
  readonly skipped: number;
}

export interface BackfillSummary {
  readonly startedAt: string;
  readonly from: string;
  readonly to: string;
  readonly seconds: number;
  readonly streams: readonly BackfillStreamResult[];
  readonly ok: boolean;
  /** Traces read one event at a time on this server: not walked by window, left owed to the next sync. */
  readonly owed?: readonly OwedTracesNote[];
}

/** Rows each of `concurrency` windows buffers, so that together they hold about `batchRows`. */
export function perWindowBatch(batchRows: number, concurrency: number): number {
  return Math.max(1, Math.ceil(batchRows / Math.max(1, concurrency)));
}

/** Backfill every resource × project scope (`forEachScope`, as `sync` does). */
export async function runBackfill(
  targets: BackfillTargets,
  run: BackfillRun,
  hooks: BackfillHooks = {},
): Promise<BackfillSummary> {
  const { runStartMs, settings } = run;
  const windows = sliceWindows(targets.fromMs, targets.toMs, targets.windowMs);
  const concurrency = settings.concurrency;
  const slots = new PQueue({ concurrency });
  // Traces this server reads one event at a time have no windows to backfill: learned as a sync
  // learns it (the probe), they are left owed, and the next sync reads them from the warehouse's book.
  const resources: ResourceDefinition[] = [];
  const perParent: ResourceDefinition[] = [];
  for (const r of targets.resources) {
    let byParent = r.perParent === undefined ? false : readsByParent(run.state.document, r);
    if (byParent === undefined)
      byParent = await learnTraceMode(r, probeScope(targets, run.state.document.projects), run, run.signal).catch(
        () => undefined,
      );
    if (byParent === true) perParent.push(r);
    else resources.push(r);
  }
  const trackers = new Map<string, SchemaTracker>();
  for (const resource of resources) {
    trackers.set(resource.name, new SchemaTracker(resource, await run.destination.describe(resource.name), run.runId));
  }
  const streams = await forEachScope(
    { ...targets, resources },
    run,
    (resource, scope, scopeHooks) =>
      backfillStream(
        {
          resource,
          scope,
          tracker: trackers.get(resource.name) as SchemaTracker,
          windows,
          slots,
          concurrency,
          force: false,
          batchRows: perWindowBatch(settings.batchRows, concurrency),
          batchBytes: perWindowBatch(settings.batchBytes, concurrency),
          onProjects: scopeHooks.onProjects,
          hooks,
        },
        run,
      ).then((result) => {
        hooks.onStreamDone?.(result);
        return result;
      }),
    (resource, error): BackfillStreamResult => ({ ...failedBeforeStart(resource, error), skipped: 0 }),
  );
  const owed = await owedAfterBackfill(perParent, targets, run);
  return {
    startedAt: new Date(runStartMs).toISOString(),
    ...(owed.length === 0 ? {} : { owed }),
    from: new Date(targets.fromMs).toISOString(),
    to: new Date(targets.toMs).toISOString(),
    seconds: (run.clock.now() - runStartMs) / 1000,
    streams,
    ok: streams.every((s) => s.outcome === 'ok'),
  };
}

/** What the skipped per-event traces owe once the backfill's events are stored, said once per resource. */
async function owedAfterBackfill(
  perEvent: readonly ResourceDefinition[],
  targets: BackfillTargets,
  deps: BackfillRun,
): Promise<OwedTracesNote[]> {
  const notes: OwedTracesNote[] = [];
  const book = bookOf(deps);
  for (const traces of perEvent) {
    const eventName = traces.perParent?.parent ?? 'parent';
    const events = [...targets.resources, ...(targets.declared ?? [])].find((r) => r.name === eventName);
    let byProject: Readonly<Record<string, number>> | undefined;
    if (book !== undefined && events !== undefined) {
      const query = owedQuery(
        traces,
        events,
        { selection: 'all', settleMs: deps.settings.settleMs ?? 0 },
        deps.clock.now(),
      );
      byProject = await book.countOwedTraces(query).catch(() => undefined);
    }
    const total = byProject === undefined ? undefined : Object.values(byProject).reduce((a, b) => a + b, 0);
    deps.logger.warn(
      { resource: traces.name, owed: total },
      `${traces.name} are read one ${eventName} record at a time on this server: backfill does not read them; ` +
        (total === undefined
          ? 'sync reads them'
          : `${total} ${eventName} records of the warehouse owe their ${traces.name}, the next sync reads them (newest first)`),
    );
    notes.push({
      resource: traces.name,
      parent: eventName,
      ...(byProject === undefined ? {} : { byProject, total }),
    });
  }
  return notes;
}

/** One backfill stream's own parameters (its run's are in the run's context, `EngineRun`). */
export interface BackfillStreamParams {
  readonly resource: ResourceDefinition;
  readonly scope: ProjectScope;
  readonly tracker: SchemaTracker;
  /** The windows to load (ignored for full-refresh resources, which are read once). */
  readonly windows: readonly TimeWindow[];
  /** The run's pool of window slots, shared by every stream. */
  readonly slots: PQueue;
  /** Windows of this stream read at once (at most; the pool decides). */
  readonly concurrency: number;
  /** Read windows even when the ledger has them done (`verify --repair`). */
  readonly force: boolean;
  /** Rows and text each window holds before a write (its share of the run's, `perWindowBatch`). */
  readonly batchRows: number;
  readonly batchBytes: number;
  readonly onProjects?: (slugs: ReadonlySet<string>) => void;
  /** Each batch's rows once durable (reconcile's repair collects the ids the list returned). */
  readonly onStored?: (rows: readonly Row[]) => void;
  readonly hooks?: BackfillHooks;
}

/**
 * Load the windows of one (resource, project scope): skip those the ledger has done, resume a
 * window a crashed run left mid-way from its checkpoint cursor, checkpoint after every batch, and
 * move each window to `done` when its last page is stored. The first failing window stops the
 * stream from starting more (windows in flight finish); its checkpoint stays for the next run.
 */
export async function backfillStream(options: BackfillStreamParams, deps: EngineRun): Promise<BackfillStreamResult> {
  const { resource, scope, hooks = {} } = options;
  const frame = new StreamFrame(resource, scope, deps, deps.signal);
  const { key, ctx } = frame;
  const totals = { rows: 0, pages: 0, windows: 0, skipped: 0 };
  const ledger = (state: StateWriter, change: (current: StreamLedger) => StreamLedger): Promise<void> =>
    changeStreamLedger(state, key, change);
  let failure: Error | undefined;
  // What the list's records proved of its order, shared by the stream's windows: once one window's
  // walk proved conversations newest first, the others stop at their window's start (a daily
  // window holds too few records to prove it alone, and would read to the end of the list).
  const notes = new ListNotes(resource.name);
  let fact: ListFact = listFacts(deps.state.document)[resource.name] ?? {};
  const lists = {
    notes,
    get fact(): ListFact {
      return fact;
    },
    learned: (): void => {
      const order = notes.observation.order;
      if (order !== undefined && order !== fact.order) fact = { ...fact, order };
    },
  };
  // A window read whole in one batch shares its write with the stream's other small windows.
  const shared = new SharedBatch({
    tracker: options.tracker,
    batchRows: options.batchRows,
    batchBytes: options.batchBytes,
    deps,
    resource: resource.name,
    scope: scope.key,
  });
  const stream: LedgerStream = { key, ctx, ledger, lists, shared };

  let units: LedgerUnit[];
  if (resource.mode === 'full') {
    // No time filter: the backfill reads the whole resource once.
    hooks.onWindows?.(resource.name, scope.key, 1, 0);
    units = [{ window: undefined }];
  } else {
    const requested = options.windows;
    const joined = joinsWindows(resource, fact);
    units = ledgerUnits(
      withRequested(streamLedger(readLedger(deps.state.document), key), requested),
      requested,
      options.force,
      joined,
    ).filter((u) => !u.done);
    const open = units.map((u) => u.window as TimeWindow);
    await ledger(deps.state, (s) => {
      const asked = withRequested(s, requested);
      // A crashed run's windows this run will not resume (sliced or joined differently): restart cleanly.
      return options.force ? asked : keepRunning(asked, open);
    });
    totals.skipped = requested.length - units.reduce((n, u) => n + (u.windows ?? 1), 0);
    if (joined && units.length > 0)
      deps.logger.info(
        {
          resource: resource.name,
          project: scope.key,
          windows: requested.length - totals.skipped,
          walks: units.length,
        },
        `${resource.name}: the list's order by ${resource.cursorField ?? '?'} is not known, so no walk can stop at a window's start: ` +
          `each run of windows left to read is one walk (${units.length}), not one walk per window, each of which would read the whole list`,
      );
    hooks.onWindows?.(resource.name, scope.key, requested.length, totals.skipped);
  }
  // The windows of every stream share the run's slots; this stream takes at most `concurrency` of them.
  try {
    const ended = await runUnits(
      unitList(units),
      { limit: Math.max(1, options.concurrency), ctx, clock: deps.clock, slots: options.slots },
      async (unit) => {
        totals.windows += unit.windows ?? 1;
        const walked = await readLedgerUnit(unit, options, deps, stream);
        // The stream counts each window's last attempt (a restart re-reads what the one before stored).
        totals.rows += walked.attempt.rows;
        totals.pages += walked.attempt.pages;
        endOf(walked);
      },
    );
    // (A full read already under way fails on its own when stopped.)
    if (ended === 'aborted' && (resource.mode !== 'full' || totals.windows === 0)) failure = new Error('aborted');
  } catch (error) {
    failure = error instanceof Error ? error : new Error(String(error));
  }
  // The windows read to the end are stored, however the others ended (failed, stopped).
  try {
    await shared.flush();
  } catch (error) {
    failure ??= error instanceof Error ? error : new Error(String(error));
  }

  const seconds = frame.elapsed();
  const result = (outcome: BackfillStreamResult['outcome']): BackfillStreamResult => ({
    resource: resource.name,
    scope: scope.key,
    outcome,
    rows: totals.rows,
    pages: totals.pages,
    windows: totals.windows,
    skipped: totals.skipped,
    stats: ctx.stats,
    seconds,
    error: failure,
  });
  if (failure !== undefined && frame.failure(failure, totals.pages).outcome === 'scope-rejected')
    return result('scope-rejected');
  const first = options.windows[0];
  const last = options.windows[options.windows.length - 1];
  const span =
    resource.mode === 'full' || first === undefined || last === undefined
      ? {}
      : { from: new Date(first.fromMs).toISOString(), to: new Date(last.toMs).toISOString() };
  const lastRun = frame.runRecord(failure === undefined ? 'ok' : 'failed', totals, seconds, failure, {
    ...span,
    windows: totals.windows,
    skipped: totals.skipped,
  });
  await ledger(deps.state, (s) => ({ ...s, lastRun }));
  return result(failure === undefined ? 'ok' : 'failed');
}

/** What the units of one backfill stream share: its ledger, what its walks learned of the list, its shared write. */
interface LedgerStream {
  readonly key: string;
  readonly ctx: CallContext;
  /** Change the stream's ledger through `state` (the store, or the batch the change commits with). */
  readonly ledger: (state: StateWriter, change: (current: StreamLedger) => StreamLedger) => Promise<void>;
  /** What the stream's walks learned of the list (its order), passed to each walk. */
  readonly lists: { readonly notes: ListNotes; readonly fact: ListFact; readonly learned: () => void };
  /** The write the stream's small windows share. */
  readonly shared: SharedBatch;
}

/**
 * A list with no filter on its cursor field but one on a field never later than it (conversations:
 * `started_at`, windows on `last_message_at`) is asked for what started before the window's end:
 * nothing after that can be in the window, and without it each window's walk, newest first, paged
 * through everything after the window before reaching it (a two-year backfill in daily windows read
 * ~15 pages a conversations window where one holds its rows).
 */
function endedBy(resource: ResourceDefinition, window: TimeWindow): PartFilter | undefined {
  const split = resource.split;
  if (resource.stopPastWindow !== true || split?.partGte === undefined || split.partLt === undefined) return undefined;
  return { gte: split.partGte, lt: split.partLt, window: { fromMs: 0, toMs: window.toMs } };
}

/**
 * Whether a backfill reads each run of consecutive windows in one walk rather than each window in
 * its own: a list with no filter on its cursor field (conversations: windows on `last_message_at`,
 * filters on `started_at` only) can stop at a window's start only where its newest-first order is
 * known (proven by an earlier run, kept in state). Unknown, each window's walk reads every record
 * that started before the window's end, and daily windows over two years read the list's pages
 * about windows² / 2 times; one walk over the run of windows reads them once, on any server: it
 * keeps the rows of the whole run (the client-side cut), and stops at the run's start only once its
 * own records prove the order. Known, the windows run in parallel, each stopping at its start.
 */
function joinsWindows(resource: ResourceDefinition, fact: ListFact): boolean {
  return resource.stopPastWindow === true && fact.order !== `-${resource.cursorField ?? ''}`;
}

/** Read one ledger unit (a window, or the whole resource once), its progress in the ledger; how its walk ended, with its counts. */
async function readLedgerUnit(
  { window, resumed, windows = 1 }: LedgerUnit,
  options: BackfillStreamParams,
  deps: EngineRun,
  { key: frameKey, ctx, ledger, lists, shared }: LedgerStream,
): Promise<WalkEnd> {
  const { resource, scope, hooks = {} } = options;
  const onPage =
    hooks.onPage === undefined
      ? undefined
      : (page: { readonly records: number; readonly rowsStored: number }) =>
          hooks.onPage?.(resource.name, scope.key, page);
  const iso = window === undefined ? undefined : toIso(window);
  const since = resumed?.since ?? new Date(deps.clock.now()).toISOString();
  /** What the ledger counted of the window before this attempt of the walk: a resumed window's, none once restarted. */
  let before: WalkCounts = { rows: resumed?.rows ?? 0, pages: resumed?.pages ?? 0 };
  /** What the walk's attempt had stored at its last checkpoint. */
  let attempt: WalkCounts = { rows: 0, pages: 0 };
  // The ledger's book (state/books/ledger.ts): a running window's cursor, then the window done.
  const book = ledgerBook({
    store: deps.state,
    key: frameKey,
    now: () => deps.clock.now(),
    counts: () => ({ rows: before.rows + attempt.rows, pages: before.pages + attempt.pages }),
    since,
    ...(windows === 1 ? {} : { windows }),
    onRestart: () => {
      before = { rows: 0, pages: 0 };
    },
  });
  const walked = await walkWindow(
    {
      resource,
      scope,
      tracker: options.tracker,
      window,
      partFilter: window === undefined ? undefined : endedBy(resource, window),
      startCursor: resumed?.cursor,
      batchRows: options.batchRows,
      batchBytes: options.batchBytes,
      ctx,
      onProjects: options.onProjects,
      ...(options.onStored === undefined ? {} : { onStored: async (rows: readonly Row[]) => options.onStored?.(rows) }),
      onPage,
      checkpoint: (nextCursor, state, stored) => {
        attempt = stored;
        return book.checkpoint(iso, nextCursor, state);
      },
      onCursorRejected: () => book.cursorRejected(iso),
      lists,
      ...(window === undefined ? {} : { shareLastBatch: (rows, changes) => shared.add(rows, changes) }),
    },
    deps,
  );
  if (walked.ended === 'failed') return walked;
  try {
    lists.learned();
    if (iso === undefined) {
      const at = new Date(deps.clock.now()).toISOString();
      const read = { rows: before.rows + walked.attempt.rows, pages: before.pages + walked.attempt.pages };
      await ledger(deps.state, (s) => ({ ...s, fullRead: { at, ...read } }));
    }
    hooks.onWindowDone?.(resource.name, scope.key, walked.attempt.rows, windows);
  } catch (error) {
    return { ...walked, ended: 'failed', error };
  }
  return walked;
}
