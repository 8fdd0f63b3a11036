import type { Logger } from '../core/log.js';
import type { ResourceDefinition } from '../core/types.js';
import { countRecords } from '../extract/count.js';
import { timeseries } from '../extract/timeseries.js';
import { routeCapability, valueCapability, type Capabilities } from '../sync/capabilities.js';
import type { TimeWindow } from '../extract/windows.js';
import { newCallStats, type ApiClient, type CallContext, type CallStats } from '../http/client.js';
import type { Destination } from '../load/destination.js';
import { singleProjectScope } from '../sync/scopes.js';
import type { VerifyProject } from './verify.js';

const HOUR_MS = 3_600_000;
/** The rolling recent range checked every run, in hourly buckets (issue 21: "hourly for the last two days"). */
export const RECONCILE_RECENT_MS = 48 * HOUR_MS;
/**
 * Count requests one (resource, project) may spend narrowing a difference the timeseries could not
 * place (older ranges, or a server whose timeseries is unusable): ~2 per halving, so a year of
 * hours (13 halvings) narrows one difference to its hour with room to spare.
 */
const MAX_NARROWING_COUNTS = 32;

/**
 * The range one (resource, project) is checked over, or `undefined` when there is none yet.
 *
 * The open edge: rows newer than `mark − lookback` may still be indexed late, and the next sync's
 * window re-reads them, so a difference there is not (yet) a loss; and the hour holding that instant
 * is partly outside it. So the range ends on the hour at or before `min(mark, run start) − lookback`:
 * every hour checked is closed and was read by a window of this run or an earlier one. Settle
 * re-reads change enriched fields, not counts, so the settle horizon does not move the edge.
 * The start: the earlier of what this run read (`touchedFromMs`) and the recent two days, never
 * before `--start` (rows before it were never asked for).
 */
export function reconcileRange(options: {
  readonly runStartMs: number;
  readonly markMs: number;
  readonly lookbackMs: number;
  readonly startMs: number | undefined;
  readonly touchedFromMs: number;
}): { readonly recent?: TimeWindow; readonly older?: TimeWindow } | undefined {
  const edge = Math.floor((Math.min(options.runStartMs, options.markMs) - options.lookbackMs) / HOUR_MS) * HOUR_MS;
  const floor = options.startMs ?? 0;
  const fromMs = Math.max(floor, Math.min(options.touchedFromMs, edge - RECONCILE_RECENT_MS));
  if (fromMs >= edge) return undefined;
  const recentFrom = Math.max(fromMs, edge - RECONCILE_RECENT_MS);
  return {
    recent: { fromMs: recentFrom, toMs: edge },
    ...(fromMs < recentFrom ? { older: { fromMs, toMs: recentFrom } } : {}),
  };
}

/** Requests one (resource, project) spends when nothing differs: one per part of its range. */
export function reconcileRequests(range: ReturnType<typeof reconcileRange>): number {
  return range === undefined ? 0 : (range.recent === undefined ? 0 : 1) + (range.older === undefined ? 0 : 1);
}

/** A window where the API and the warehouse disagree. */
export interface Difference {
  readonly window: TimeWindow;
  readonly api: number;
  readonly warehouse: number;
}

export interface FindDeps {
  readonly client: ApiClient;
  readonly destination: Destination;
  readonly logger: Logger;
  readonly signal?: AbortSignal | undefined;
  /** What the server offers (the run's book): a timeseries it is known not to serve is not asked. */
  readonly capabilities?: Pick<Capabilities, 'usable'>;
}

/** What one (resource, project) check found, and what it cost. */
export interface ScopeCheck {
  readonly differences: readonly Difference[];
  readonly stats: CallStats;
  /** How the API counted: one timeseries, or counts (the timeseries failed or is not exact). */
  readonly by: 'timeseries' | 'count';
}

/**
 * The windows of `range` where the API's count and the warehouse's differ, for one project (its
 * own header: a `*` sync is checked project by project, rows by their `project_id`).
 */
export async function findDifferences(
  resource: ResourceDefinition,
  project: VerifyProject,
  range: { readonly recent?: TimeWindow; readonly older?: TimeWindow },
  deps: FindDeps,
): Promise<ScopeCheck> {
  const windows = deps.destination.can.windows;
  const column = resource.cursorField;
  if (windows === undefined || column === undefined) return { differences: [], stats: newCallStats(), by: 'count' };
  const scope = singleProjectScope(project.header);
  const ctx: CallContext = {
    resource: resource.name,
    project: project.slug,
    lane: `reconcile|${resource.name}|${project.slug}`,
    stats: newCallStats(),
    signal: deps.signal,
  };
  const warehouse = (w: TimeWindow): Promise<number> =>
    windows.countWindow(resource.name, {
      projectId: project.slug,
      column,
      fromIso: new Date(w.fromMs).toISOString(),
      toIso: new Date(w.toMs).toISOString(),
    });
  let counts = MAX_NARROWING_COUNTS;
  const byCount = async (w: TimeWindow): Promise<number | undefined> => {
    if (counts <= 0) return undefined;
    counts -= 1;
    return countRecords(deps.client, resource, scope, w, ctx);
  };

  const differences: Difference[] = [];
  let by: ScopeCheck['by'] = 'count';
  if (range.recent !== undefined) {
    const buckets = await hourBuckets(deps, resource, scope, range.recent, ctx);
    if (buckets !== undefined) {
      by = 'timeseries';
      // Any window's count is the sum of its hours: narrowing costs warehouse queries only.
      const api = async (w: TimeWindow): Promise<number> =>
        buckets.filter((b) => b.fromMs >= w.fromMs && b.fromMs < w.toMs).reduce((n, b) => n + b.count, 0);
      differences.push(...(await narrow(range.recent, api, warehouse)));
    } else if (resource.countPath !== undefined) {
      differences.push(...(await narrow(range.recent, byCount, warehouse)));
    }
  }
  if (range.older !== undefined && resource.countPath !== undefined)
    differences.push(...(await narrow(range.older, byCount, warehouse)));
  return { differences: differences.sort((a, b) => a.window.fromMs - b.window.fromMs), stats: ctx.stats, by };
}

/**
 * The hour buckets of `window` from one timeseries request, where the resource declares one that
 * counts exactly its list's records; `undefined` (logged) where it is not declared or fails.
 */
async function hourBuckets(
  { client, logger, capabilities }: FindDeps,
  resource: ResourceDefinition,
  scope: ReturnType<typeof singleProjectScope>,
  window: TimeWindow,
  ctx: CallContext,
): Promise<{ readonly fromMs: number; readonly count: number }[] | undefined> {
  const decl = resource.split;
  if (decl === undefined || !decl.exact) return undefined;
  // Known not served, or not by the hour (the walks learned it, kept in state): counted with the count endpoint instead.
  const path = decl.timeseriesPath;
  if (
    capabilities !== undefined &&
    !(capabilities.usable(routeCapability(path)) && capabilities.usable(valueCapability(path, 'interval', 'hour')))
  )
    return undefined;
  try {
    const { buckets } = await timeseries(client, decl, scope, window, 'hour', ctx);
    // Narrowing sums buckets by UTC hour (the emulator's and the SDK's buckets): a server bucketing in
    // another time zone would place counts in the wrong halves, so its series is not used.
    const offHour = buckets.find((b) => b.window.fromMs !== window.fromMs && b.window.fromMs % HOUR_MS !== 0);
    if (offHour !== undefined)
      throw new Error(`a bucket starts at ${new Date(offHour.window.fromMs).toISOString()}, not on a UTC hour`);
    return buckets.map((b) => ({ fromMs: b.window.fromMs, count: b.count }));
  } catch (error) {
    logger.warn(
      { resource: resource.name, project: ctx.project, err: (error as Error).message },
      `reconcile: ${decl.timeseriesPath} failed; counting with ${resource.countPath ?? 'no count endpoint'} instead`,
    );
    return undefined;
  }
}

/**
 * `window` compared whole, then, where the counts differ, halved on an hour boundary until each
 * difference is one hour (or the API counter has no budget left: the window is reported as it is).
 * Halves are compared at once.
 */
async function narrow(
  window: TimeWindow,
  api: (w: TimeWindow) => Promise<number | undefined>,
  warehouse: (w: TimeWindow) => Promise<number>,
): Promise<Difference[]> {
  const [a, w] = await Promise.all([api(window), warehouse(window)]);
  if (a === undefined || a === w) return [];
  const mid = hourInside(window);
  if (mid === undefined) return [{ window, api: a, warehouse: w }];
  const halves = await Promise.all([
    narrow({ fromMs: window.fromMs, toMs: mid }, api, warehouse),
    narrow({ fromMs: mid, toMs: window.toMs }, api, warehouse),
  ]);
  const found = halves.flat();
  // The halves' counters ran out, or the halves agree while the whole does not (records came or went
  // between the requests): the whole window is the difference.
  return found.length > 0 ? found : [{ window, api: a, warehouse: w }];
}

/** An hour boundary strictly inside `window`, nearest its middle; `undefined` when it spans none. */
function hourInside(window: TimeWindow): number | undefined {
  const first = Math.floor(window.fromMs / HOUR_MS) * HOUR_MS + HOUR_MS;
  if (first >= window.toMs) return undefined;
  const mid = Math.floor((window.fromMs + window.toMs) / 2 / HOUR_MS) * HOUR_MS;
  return mid > window.fromMs ? mid : first;
}
