import { DataError, FatalApiError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Clock, ProjectScope, ResourceDefinition } from '../core/types.js';
import { countRecords } from '../extract/count.js';
import { splitByCounts, suffixCounts, type TimeWindow } from '../extract/windows.js';
import { DEFAULT_RATE_LIMITS } from '../http/budget.js';
import { ConcurrencyController } from '../http/concurrency.js';
import { newCallStats, type ApiClient, type CallContext, type CallStats } from '../http/client.js';
import type { PendingWindow, SplitWindow, StreamState } from '../state/store.js';

/**
 * Split walks: one large window of a stream read as sub-windows at once.
 *
 * A walk is sequential (each page's cursor comes from the previous one), so at a real server's
 * latency one walk cannot use the budget. A window that holds many pages is cut into sub-windows
 * balanced by the resource's count endpoint; they are walked concurrently, as many at a time as the
 * `ConcurrencyController` finds useful (up to `--concurrency`). Each sub-window is closed-open and
 * keeps its own checkpoint in the stream's state (`split.parts`), so a killed run resumes each where
 * it was; the mark moves only in the write that finishes the last one.
 */

/** Least pages a sub-window should hold: fewer would spend more on partial last pages than they win. */
export const MIN_PAGES_PER_PART = 10;

/** Sub-walks of one stream at once, at most, when the caller gives no bound. */
export const DEFAULT_SPLIT_CONCURRENCY = 16;

/** Client time per page (parse, normalize, write) added to the latency when sizing a split. */
const CLIENT_MS_PER_PAGE = 25;

/**
 * Sub-windows worth cutting at `latencyMs` a request: twice the walks that fill the combined
 * per-second budget (so the controller has room, and the last sub-windows to finish overlap), and
 * at least two.
 */
export function partsForLatency(latencyMs: number, maxRps = DEFAULT_RATE_LIMITS.maxRps): number {
  return Math.max(2, 2 * Math.ceil((maxRps * (latencyMs + CLIENT_MS_PER_PAGE)) / 1000));
}

/**
 * The sub-windows to read `window` in, or `undefined` to read it in one walk: when the resource has
 * no count endpoint or time filters, when the count is small, or when counting fails (a split is an
 * optimisation; its failure must not fail the sync).
 */
export async function planSplit(
  resource: ResourceDefinition,
  scope: ProjectScope,
  window: TimeWindow,
  maxParts: number,
  deps: { readonly client: ApiClient; readonly logger: Logger; readonly clock: Clock },
  ctx: CallContext,
): Promise<TimeWindow[] | undefined> {
  if (maxParts < 2 || resource.countPath === undefined || resource.filterGte === undefined || resource.filterLt === undefined) {
    return undefined;
  }
  const count = (w: TimeWindow): Promise<number> => countRecords(deps.client, resource, scope, w, ctx);
  try {
    const startedAt = deps.clock.now();
    const waitedBefore = ctx.stats.waitedMs;
    const total = await count(window);
    // The count's own answer time says how many walks the budget could use: each sub-window
    // beyond that only adds a partial last page.
    const latencyMs = Math.max(0, deps.clock.now() - startedAt - (ctx.stats.waitedMs - waitedBefore));
    const parts = Math.min(maxParts, Math.floor(total / resource.maxPageSize / MIN_PAGES_PER_PART), partsForLatency(latencyMs));
    if (parts < 2) return undefined;
    const subs = splitByCounts(window, parts, await suffixCounts(window, total, count));
    return subs.length >= 2 ? subs : undefined;
  } catch (error) {
    // Only a count endpoint the server does not serve as documented is worked around; anything
    // else (a refused key or project, retries exhausted, an abort) would fail the walk too: say it once.
    if (!(error instanceof DataError) && !(error instanceof FatalApiError)) throw error;
    deps.logger.warn(
      { resource: resource.name, project: scope.key, err: (error as Error).message },
      `counting ${resource.countPath} to split the window failed; reading it in one walk`,
    );
    return undefined;
  }
}

/** The split state of a window about to be read in `parts`. */
export function newSplit(window: TimeWindow, parts: readonly TimeWindow[]): SplitWindow {
  const iso = (ms: number): string => new Date(ms).toISOString();
  return { from: iso(window.fromMs), to: iso(window.toMs), parts: parts.map((p) => ({ from: iso(p.fromMs), to: iso(p.toMs) })) };
}

/**
 * A sub-window's checkpoint: its next cursor, or (`null`) it is stored to the end and leaves the
 * split; when none is left, the mark moves to the end of the window, in the same write.
 */
export function withPartCheckpoint(s: StreamState, part: PendingWindow, nextCursor: string | null): StreamState {
  const split = s.split;
  if (split === undefined) return s;
  const same = (p: PendingWindow): boolean => p.from === part.from && p.to === part.to;
  if (nextCursor !== null) {
    return { ...s, split: { ...split, parts: split.parts.map((p) => (same(p) ? { from: p.from, to: p.to, cursor: nextCursor } : p)) } };
  }
  const left = split.parts.filter((p) => !same(p));
  if (left.length > 0) return { ...s, split: { ...split, parts: left } };
  const { split: _done, ...rest } = s;
  return { ...rest, mark: maxIso(s.mark, split.to) };
}

/** The server refused a sub-window's checkpoint cursor: that sub-window restarts from its first page. */
export function withoutPartCursor(s: StreamState, part: PendingWindow): StreamState {
  const split = s.split;
  if (split === undefined) return s;
  return {
    ...s,
    split: { ...split, parts: split.parts.map((p) => (p.from === part.from && p.to === part.to ? { from: p.from, to: p.to } : p)) },
  };
}

export interface SubWalk {
  /** The sub-walk's own call context (same lane as the stream, its own counters). */
  readonly ctx: CallContext;
  /** Call after each page: feeds the controller and adds the counters to the stream's. */
  readonly onPage: () => void;
}

/**
 * Walk `parts` at most `controller.limit` at a time (the limit is read again after every page and
 * every finished part). The first failure stops new parts from starting; those running finish (their
 * checkpoints are kept) and the failure is thrown.
 */
export async function walkParts<P>(
  parts: readonly P[],
  controller: ConcurrencyController,
  streamCtx: CallContext,
  clock: Clock,
  walkPart: (part: P, sub: SubWalk) => Promise<void>,
): Promise<void> {
  const todo = [...parts];
  let running = 0;
  let failure: unknown;
  let failed = false;
  return new Promise<void>((resolve, reject) => {
    const settle = (): void => {
      if (running > 0) return;
      if (failed) reject(failure);
      else if (todo.length === 0 || streamCtx.signal?.aborted === true) resolve();
    };
    const fill = (): void => {
      while (!failed && streamCtx.signal?.aborted !== true && running < controller.limit) {
        const part = todo.shift();
        if (part === undefined) break;
        running += 1;
        const sub = subWalk(streamCtx, controller, clock, fill);
        walkPart(part, sub)
          .catch((error: unknown) => {
            if (!failed) {
              failed = true;
              failure = error;
            }
          })
          .finally(() => {
            sub.onPage();
            running -= 1;
            fill();
            settle();
          });
      }
      settle();
    };
    fill();
  });
}

function subWalk(streamCtx: CallContext, controller: ConcurrencyController, clock: Clock, fill: () => void): SubWalk {
  const stats = newCallStats();
  const ctx: CallContext = { ...streamCtx, stats };
  const folded: CallStats = newCallStats();
  let lastAt = clock.now();
  return {
    ctx,
    onPage: () => {
      const now = clock.now();
      const waitedMs = stats.waitedMs - folded.waitedMs;
      const rateLimited = stats.rateLimited - folded.rateLimited;
      if (stats.requests > folded.requests) {
        controller.record({ waitedMs, latencyMs: Math.max(0, now - lastAt - waitedMs), rateLimited: rateLimited > 0 });
      }
      lastAt = now;
      for (const k of ['requests', 'retries', 'rateLimited', 'backoffMs', 'waitedMs'] as const) {
        streamCtx.stats[k] += stats[k] - folded[k];
        folded[k] = stats[k];
      }
      fill();
    },
  };
}

function maxIso(a: string | undefined, b: string): string {
  return a !== undefined && Date.parse(a) > Date.parse(b) ? a : b;
}
