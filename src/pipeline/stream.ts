import { FatalApiError, type QuerySyncError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Clock, ProjectScope, ResourceDefinition, Row } from '../core/types.js';
import { syncWindow, type TimeWindow } from '../extract/windows.js';
import { newCallStats, type ApiClient, type CallContext, type CallStats } from '../http/client.js';
import type { Destination } from '../load/destination.js';
import type { SchemaTracker } from '../normalize/normalize.js';
import { DEFAULT_BATCH_BYTES, walkWindow, type WalkOptions } from './walk.js';
import { streamKey, type Lateness, type SplitWindow, type StateStore, type StreamState } from '../state/store.js';
import { DEFAULT_SPLIT_CONCURRENCY, newSplit, planSplit, resplit, walkParts, withoutPartCursor, withPartCheckpoint, withPartReplaced, type FirstPage, type SplitPlan } from './split.js';
import type { Page } from '../extract/paginate.js';
import { ConcurrencyController } from '../http/concurrency.js';

export interface StreamDeps {
  readonly client: ApiClient;
  readonly destination: Destination;
  readonly state: StateStore;
  readonly clock: Clock;
  readonly logger: Logger;
}

export interface StreamOptions {
  /** End of every window this run reads (exclusive): the run's start. */
  readonly runStartMs: number;
  /** How far before the mark each sync re-reads, for late-indexed records. */
  readonly lookbackMs: number;
  /** Oldest instant a first sync reads. @default 0 (all history) */
  readonly startMs?: number;
  /** Rows buffered before a write + checkpoint. */
  readonly batchRows: number;
  /** Text buffered before a write (see `WalkOptions.batchBytes`). */
  readonly batchBytes?: number;
  /** Stop once this many rows are written (a dry run's sample). */
  readonly sampleRows?: number;
  /** `_synced_at` of this run. */
  readonly syncedAt: string;
  readonly signal?: AbortSignal;
  /** Called with project slugs found in `project_id` of all-projects reads. */
  readonly onProjects?: (slugs: ReadonlySet<string>) => void;
  /** Called after each page (progress display). */
  readonly onPage?: WalkOptions['onPage'];
  /**
   * Re-read each window of a resource that `settles` once it is this old (late enrichment); 0 turns
   * the settle pass off. @default 0
   */
  readonly settleMs?: number;
  /** Called with each stored batch before its checkpoint (per-parent children enqueue from it). */
  readonly onStored?: WalkOptions['onStored'];
  /**
   * Most sub-windows of one large window walked at once (split walks, `split.ts`); the controller
   * finds how many help at the latency seen. 1 reads every window in one walk. @default 16
   */
  readonly concurrency?: number;
}

/**
 * Late enrichment: the SDK says enriched fields "may be absent for very recent events", with no
 * figure. Two hours covers the enrichment delays the emulator models and keeps the re-read cheap
 * (one extra read of each window, two hours after it).
 */
export const DEFAULT_SETTLE_MS = 2 * 3_600_000;

export interface StreamResult {
  readonly resource: string;
  readonly scope: string;
  readonly outcome: 'ok' | 'failed' | 'scope-rejected';
  readonly rows: number;
  readonly pages: number;
  readonly windows: number;
  readonly stats: CallStats;
  readonly seconds: number;
  readonly error?: QuerySyncError | Error;
}

/**
 * Sync one (resource, project scope): read each window [mark − lookback, run start), walk every
 * page, write in batches, and checkpoint after each write: the cursor of the next page while the
 * window is open, the new mark when it is done. State never moves past rows that were not stored.
 */
export async function syncStream(
  resource: ResourceDefinition,
  scope: ProjectScope,
  tracker: SchemaTracker,
  deps: StreamDeps,
  options: StreamOptions,
): Promise<StreamResult> {
  const started = deps.clock.now();
  const key = streamKey(resource.name, scope.key);
  const ctx = streamCallContext(resource, scope, options.signal);
  const totals = { rows: 0, pages: 0, windows: 0 };
  const finish = async (outcome: StreamResult['outcome'], error?: Error): Promise<StreamResult> => {
    const seconds = (deps.clock.now() - started) / 1000;
    if (outcome !== 'scope-rejected') {
      await deps.state.updateStream(key, (s) => ({
        ...s,
        lastRun: {
          at: new Date(started).toISOString(),
          outcome,
          rows: totals.rows,
          pages: totals.pages,
          requests: ctx.stats.requests,
          seconds,
          // Errors from the client are redacted already; this covers messages built elsewhere.
          ...(error ? { error: deps.client.redact(error.message) } : {}),
        },
      }));
    }
    return { resource: resource.name, scope: scope.key, outcome, ...totals, stats: ctx.stats, seconds, error };
  };

  const maxParts = options.concurrency ?? DEFAULT_SPLIT_CONCURRENCY;
  /** The split this run planned (a resumed one has none: its sub-windows are not cut again). */
  let planned: SplitPlan | undefined;
  const controller = new ConcurrencyController({ max: maxParts, now: () => deps.clock.now() });

  const lateness = resource.arrivalField === undefined ? undefined : new LatenessHistogram(resource);
  const onStored =
    lateness === undefined && options.onStored === undefined
      ? undefined
      : async (rows: readonly Row[]): Promise<void> => {
          lateness?.add(rows);
          await options.onStored?.(rows);
        };
  const walk = (
    window: TimeWindow | undefined,
    startCursor: string | undefined,
    settleTo?: number,
    onFirstPage?: (page: Page) => Promise<boolean>,
  ): Promise<'done' | 'abandoned'> => {
    totals.windows += 1;
    return walkWindow(
      {
        resource,
        scope,
        tracker,
        window,
        startCursor,
        onFirstPage,
        batchRows: options.batchRows,
        batchBytes: options.batchBytes,
        sampleRows: options.sampleRows,
        syncedAt: options.syncedAt,
        ctx,
        onProjects: options.onProjects,
        onPage: options.onPage,
        onStored,
        checkpoint: (nextCursor) => (settleTo === undefined ? checkpoint(window, nextCursor) : settleCheckpoint(window, nextCursor, settleTo)),
        onCursorRejected: () =>
          deps.state.updateStream(key, (s) =>
            settleTo === undefined
              ? { ...s, pending: s.pending ? { from: s.pending.from, to: s.pending.to } : undefined }
              : { ...s, settlePending: s.settlePending ? { from: s.settlePending.from, to: s.settlePending.to } : undefined },
          ),
      },
      deps,
      totals,
    );
  };

  try {
    if (resource.mode === 'full') {
      await walk(undefined, undefined);
    } else {
      const markBefore = deps.state.stream(key).mark;
      let readFromMs: number | undefined;
      for (;;) {
        // A stopped run reads no more windows (a split walk returns quietly once stopped: without
        // this the loop would spin on the split it left, starving every timer).
        options.signal?.throwIfAborted();
        const st = deps.state.stream(key);
        if (st.split !== undefined) {
          readFromMs = Math.min(readFromMs ?? Date.parse(st.split.from), Date.parse(st.split.from));
          await walkSplit(st.split);
          continue;
        }
        const next = nextWindow(st, options);
        if (next === undefined || (options.sampleRows !== undefined && totals.rows >= options.sampleRows)) break;
        readFromMs = Math.min(readFromMs ?? next.window.fromMs, next.window.fromMs);
        // A fresh window's first page says whether it is large enough to read split (then the walk
        // is abandoned before storing anything, and the split planned). A dry run reads a sample:
        // one walk, never a split.
        const fresh = next.cursor === undefined && st.pending === undefined && options.sampleRows === undefined;
        const splits = fresh && resource.split !== undefined && maxParts >= 2;
        // A first sync is large but for the smallest accounts: its plan needs no first page (which
        // would be read twice), where counts exist.
        const direct = splits && st.mark === undefined && (resource.split?.exact === true || resource.split?.count !== undefined);
        if (direct) {
          const plan = await planSplit(resource, scope, next.window, undefined, maxParts, deps, ctx);
          logSplit(plan, undefined);
          if (plan !== undefined) {
            await deps.state.updateStream(key, (s) => ({ ...s, split: newSplit(next.window, plan.parts) }));
            planned = plan;
            continue;
          }
        }
        const sized = splits && !direct ? firstPageHook(ctx, async (first) => {
          const plan = await planSplit(resource, scope, next.window, first, maxParts, deps, ctx);
          logSplit(plan, first);
          if (plan === undefined) return false;
          // The sub-windows are durable before any is read: a kill resumes the same split.
          await deps.state.updateStream(key, (s) => ({ ...s, split: newSplit(next.window, plan.parts) }));
          planned = plan;
          return true;
        }) : undefined;
        await walk(next.window, next.cursor, undefined, sized);
      }
      if (resource.settles === true && (options.settleMs ?? 0) > 0 && options.sampleRows === undefined) {
        // Work units of the settle pass: a re-read a killed run left, then this run's own.
        const resumed = deps.state.stream(key).settlePending;
        if (resumed !== undefined) {
          const to = Date.parse(resumed.to);
          await walk({ fromMs: Date.parse(resumed.from), toMs: to }, resumed.cursor, to);
        }
        const next = settleWindow(deps.state.stream(key), { ...options, settleMs: options.settleMs ?? 0 }, markBefore, readFromMs);
        if (next.window !== undefined) await walk(next.window, undefined, next.settledTo);
        else await deps.state.updateStream(key, (s) => ({ ...s, settled: maxIso(s.settled, new Date(next.settledTo).toISOString()) }));
      }
    }
    const measured = lateness?.summary(deps.clock.now());
    if (measured !== undefined) await deps.state.updateStream(key, (s) => ({ ...s, lateness: measured }));
    return await finish('ok');
  } catch (error) {
    const scopeRejected = error instanceof FatalApiError && error.status === 400 && scope.header === '*' && totals.pages === 0;
    if (scopeRejected) return finish('scope-rejected', error);
    const err = error instanceof Error ? error : new Error(String(error));
    deps.logger.error({ resource: resource.name, project: scope.key, code: (err as QuerySyncError).code }, err.message);
    return finish('failed', err);
  }

  function logSplit(plan: SplitPlan | undefined, first: FirstPage | undefined): void {
    deps.logger.debug(
      { resource: resource.name, project: scope.key, latencyMs: first?.latencyMs, parts: plan?.parts.length ?? 1, pagesPerPart: plan?.pagesPerPart },
      plan === undefined ? 'window read in one walk' : 'window read split',
    );
  }

  /** The first-page hook of a walk: measures the page's answer time (budget queueing excluded). */
  function firstPageHook(walkCtx: CallContext, decide: (first: FirstPage) => Promise<boolean>): (page: Page) => Promise<boolean> {
    const startedAt = deps.clock.now();
    const waitedBefore = walkCtx.stats.waitedMs;
    return (page) => decide({ ...page, latencyMs: Math.max(0, deps.clock.now() - startedAt - (walkCtx.stats.waitedMs - waitedBefore)) });
  }

  /** Walk the sub-windows of a split concurrently, each checkpointing its own cursor. */
  async function walkSplit(split: SplitWindow): Promise<void> {
    totals.windows += 1;
    // Rows held by all sub-walks together stay about `batchRows`, as in a backfill.
    const batchRows = Math.max(1, Math.ceil(options.batchRows / maxParts));
    const batchBytes = Math.max(1, Math.ceil((options.batchBytes ?? DEFAULT_BATCH_BYTES) / maxParts));
    const splitWindow: TimeWindow = { fromMs: Date.parse(split.from), toMs: Date.parse(split.to) };
    const onField = resource.split?.partGte !== undefined && resource.split.partLt !== undefined;
    await walkParts(split.parts, controller, ctx, deps.clock, async (part, sub) => {
      const partWindow: TimeWindow = { fromMs: Date.parse(part.from), toMs: Date.parse(part.to) };
      let replaced: TimeWindow[] | undefined;
      // A fresh sub-window (on the cursor field, balanced by a proxy) whose first page shows it far
      // larger than its share is cut again.
      const plan = planned;
      const onFirstPage =
        part.cursor !== undefined || onField || plan === undefined || resource.split?.exact !== false
          ? undefined
          : firstPageHook(sub.ctx, async (first) => {
              replaced = resplit(resource, partWindow, first, plan, maxParts);
              if (replaced === undefined) return false;
              const subs = replaced;
              await deps.state.updateStream(key, (s) => withPartReplaced(s, part, subs));
              return true;
            });
      const ended = await walkWindow(
        {
          resource,
          scope,
          tracker,
          window: onField ? splitWindow : partWindow,
          partFilter: onField ? { gte: resource.split?.partGte as string, lt: resource.split?.partLt as string, window: partWindow } : undefined,
          startCursor: part.cursor,
          onFirstPage,
          batchRows,
          batchBytes,
          sampleRows: options.sampleRows,
          syncedAt: options.syncedAt,
          ctx: sub.ctx,
          onProjects: options.onProjects,
          onPage: (page) => {
            sub.onPage();
            options.onPage?.(page);
          },
          onStored,
          checkpoint: (nextCursor) => deps.state.updateStream(key, (s) => withPartCheckpoint(s, part, nextCursor)),
          onCursorRejected: () => deps.state.updateStream(key, (s) => withoutPartCursor(s, part)),
        },
        deps,
        totals,
      );
      const iso = (ms: number): string => new Date(ms).toISOString();
      return ended === 'abandoned' && replaced !== undefined ? replaced.map((w) => ({ from: iso(w.fromMs), to: iso(w.toMs) })) : undefined;
    });
    deps.logger.debug({ resource: resource.name, project: scope.key, parts: split.parts.length, peak: controller.peak, limit: controller.limit }, 'split walked');
  }

  async function checkpoint(window: TimeWindow | undefined, nextCursor: string | null): Promise<void> {
    if (window === undefined) return;
    const from = new Date(window.fromMs).toISOString();
    const to = new Date(window.toMs).toISOString();
    await deps.state.updateStream(key, (s) =>
      nextCursor === null
        ? { ...s, mark: maxIso(s.mark, to), pending: undefined }
        : { ...s, pending: { from, to, cursor: nextCursor } },
    );
  }

  async function settleCheckpoint(window: TimeWindow | undefined, nextCursor: string | null, settledTo: number): Promise<void> {
    if (window === undefined) return;
    const from = new Date(window.fromMs).toISOString();
    const to = new Date(window.toMs).toISOString();
    await deps.state.updateStream(key, (s) =>
      nextCursor === null
        ? { ...s, settled: maxIso(s.settled, new Date(settledTo).toISOString()), settlePending: undefined }
        : { ...s, settlePending: { from, to, cursor: nextCursor } },
    );
  }
}

/**
 * The settle re-read of this run: records in [settled, now − settle) were last read while fresh,
 * except those this run's windows just read (from `readFromMs` on), which are read settled already.
 * So each record is read once more at most, and only the part no window of this run covered. A
 * first sync reads nothing here: everything older than `now − settle` it read settled. A window
 * shorter than the lookback (runs back to back) is left for a later run.
 */
export function settleWindow(
  st: StreamState,
  options: Pick<StreamOptions, 'runStartMs' | 'lookbackMs' | 'startMs'> & { readonly settleMs: number },
  markBefore: string | undefined,
  readFromMs: number | undefined,
): { readonly window?: TimeWindow; readonly settledTo: number } {
  const settledTo = Math.max(options.startMs ?? 0, options.runStartMs - options.settleMs);
  let fromMs: number;
  if (st.settled !== undefined) fromMs = Date.parse(st.settled);
  else if (markBefore !== undefined) fromMs = Date.parse(markBefore) - options.lookbackMs - options.settleMs; // state from before the settle pass
  else fromMs = settledTo; // first sync
  fromMs = Math.max(options.startMs ?? 0, fromMs);
  const toMs = Math.min(settledTo, readFromMs ?? settledTo);
  if (fromMs >= toMs) return { settledTo };
  // A sliver (runs back to back) waits until it is worth a request: the settle mark stays put.
  if (toMs - fromMs < Math.min(options.lookbackMs, options.settleMs)) return { settledTo: fromMs };
  return { window: { fromMs, toMs }, settledTo };
}

/**
 * Receipt delay of the records a run stored (`arrivalField` − cursor field), in log-spaced buckets
 * (10 % wide): bounded memory whatever the run's size, quantiles within a bucket's width.
 */
class LatenessHistogram {
  private readonly buckets = new Map<number, number>();
  private count = 0;
  private maxMs = 0;

  constructor(private readonly resource: ResourceDefinition) {}

  add(rows: readonly Row[]): void {
    for (const row of rows) {
      const received = Date.parse(String(row[this.resource.arrivalField ?? '']));
      const at = Date.parse(String(row[this.resource.cursorField ?? '']));
      if (Number.isNaN(received) || Number.isNaN(at)) continue;
      const ms = Math.max(0, received - at);
      const bucket = ms < 1 ? 0 : Math.ceil(Math.log(ms) / Math.log(1.1));
      this.buckets.set(bucket, (this.buckets.get(bucket) ?? 0) + 1);
      this.count += 1;
      this.maxMs = Math.max(this.maxMs, ms);
    }
  }

  summary(nowMs: number): Lateness | undefined {
    if (this.count === 0) return undefined;
    const sorted = [...this.buckets.entries()].sort((a, b) => a[0] - b[0]);
    const quantile = (q: number): number => {
      let seen = 0;
      for (const [bucket, n] of sorted) {
        seen += n;
        if (seen >= q * this.count) return bucket === 0 ? 0 : Math.min(this.maxMs, Math.round(1.1 ** bucket));
      }
      return this.maxMs;
    };
    return { at: new Date(nowMs).toISOString(), records: this.count, p50Ms: quantile(0.5), p99Ms: quantile(0.99), maxMs: this.maxMs };
  }
}

/** The call context of one (resource, scope) walk: its fairness lane and its own counters. */
export function streamCallContext(resource: ResourceDefinition, scope: ProjectScope, signal: AbortSignal | undefined): CallContext {
  return { resource: resource.name, project: scope.key, lane: `${resource.name}|${scope.key}`, stats: newCallStats(), signal };
}

/** One summary line of a stream; `extra` fields (e.g. a backfill's windows) come after the scope. */
export function formatStreamLine(s: StreamResult, extra: readonly string[] = []): string {
  return [
    `${s.resource.padEnd(13)} ${s.scope.padEnd(12)}`,
    ...extra,
    `rows=${s.rows}`,
    `pages=${s.pages}`,
    `requests=${s.stats.requests}`,
    `retries=${s.stats.retries}`,
    `429s=${s.stats.rateLimited}`,
    `waited=${(s.stats.waitedMs / 1000).toFixed(1)}s`,
    `backoff=${(s.stats.backoffMs / 1000).toFixed(1)}s`,
    `seconds=${s.seconds.toFixed(1)}`,
    s.outcome === 'ok' ? 'ok' : `FAILED: ${s.error?.message ?? 'unknown error'}`,
  ].join(' ');
}

/** The next window to read, resuming a checkpoint first; `undefined` when caught up. */
export function nextWindow(
  st: StreamState,
  options: Pick<StreamOptions, 'runStartMs' | 'lookbackMs' | 'startMs'>,
): { window: TimeWindow; cursor: string | undefined } | undefined {
  if (st.pending !== undefined) {
    return { window: { fromMs: Date.parse(st.pending.from), toMs: Date.parse(st.pending.to) }, cursor: st.pending.cursor };
  }
  const window = syncWindow(st.mark === undefined ? undefined : Date.parse(st.mark), options);
  return window === undefined ? undefined : { window, cursor: undefined };
}

function maxIso(a: string | undefined, b: string): string {
  return a !== undefined && Date.parse(a) > Date.parse(b) ? a : b;
}
