import type { ProjectScope } from '../core/types.js';
import type { ApiClient, CallContext } from '../http/client.js';
import { readTotal } from './count.js';
import type { TimeWindow, WindowCount } from './windows.js';

/**
 * Where records lie in time from a count endpoint alone (`/v1/events/count` over time ranges), for
 * a server whose timeseries is absent, refuses, or answers in another shape: split walks stay
 * parallel without it. Two rounds, each sent at once (so two round trips whatever the window):
 *
 * 1. Ranges ending at the window's end, each `GROWTH` times the last (from an hour, or the first
 *    page's span, to the whole window): where records start, and how they thin out with age.
 * 2. Each range between two of those that holds more than half a part's records, cut into equal
 *    stretches counted again. Cuts placed by `splitByCounts` (records spread evenly inside a
 *    stretch) then hold their share within ~1.5 % (80,000 events in 16 parts: 4,947 to 5,064;
 *    quarter-part stretches, 76 requests, gave ±1 %; part-sized ones, 28 requests, ±2.5 %).
 *
 * About 15 requests for a first sync from the epoch, then about twice the parts, on the count
 * endpoint's own per-minute budget. Records are taken as spread evenly inside a stretch, as with
 * timeseries buckets; what that misjudges, the walks' work stealing evens out.
 */

/** Each first-round range is this many times the one before. */
const GROWTH = 4;
/** The shortest first-round range when the first page does not say: an hour. */
const DEFAULT_FIRST_RANGE_MS = 3_600_000;
/** At most this many stretches per range in the second round (a bound on its requests). */
const MAX_STRETCHES = 64;

export interface CountFilters {
  readonly path: string;
  /** The count's time filters (inclusive lower, exclusive upper). */
  readonly gte: string;
  readonly lt: string;
}

export interface CountedOverTime {
  readonly buckets: readonly WindowCount[];
  readonly total: number;
  readonly requests: number;
  readonly rounds: number;
}

export async function countsOverTime(
  client: ApiClient,
  filters: CountFilters,
  scope: ProjectScope,
  window: TimeWindow,
  parts: number,
  ctx: CallContext,
  firstRangeMs = DEFAULT_FIRST_RANGE_MS,
): Promise<CountedOverTime> {
  const count = (w: TimeWindow): Promise<number> => countIn(client, filters, scope, w, ctx);
  const length = window.toMs - window.fromMs;
  const widths: number[] = [];
  for (let w = Math.max(1000, Math.min(firstRangeMs, length)); w < length; w *= GROWTH) widths.push(w);
  widths.push(length);
  const cumulative = await Promise.all(widths.map((w) => count({ fromMs: window.toMs - w, toMs: window.toMs })));
  let requests = widths.length;
  // Records that arrived between two answers can make a longer range count fewer: never less than a shorter one.
  for (let i = 1; i < cumulative.length; i += 1)
    cumulative[i] = Math.max(cumulative[i] as number, cumulative[i - 1] as number);
  const ranges: WindowCount[] = widths.map((w, i) => ({
    window: { fromMs: window.toMs - w, toMs: i === 0 ? window.toMs : window.toMs - (widths[i - 1] as number) },
    count: (cumulative[i] as number) - (i === 0 ? 0 : (cumulative[i - 1] as number)),
  }));
  const total = cumulative.at(-1) ?? 0;
  const half = total / Math.max(1, parts) / 2;
  if (parts < 2 || total === 0)
    return { buckets: ranges.filter((r) => r.count > 0).reverse(), total, requests, rounds: 1 };

  const refined = await Promise.all(
    ranges.map(async (range): Promise<WindowCount[]> => {
      const span = range.window.toMs - range.window.fromMs;
      const stretches = Math.min(MAX_STRETCHES, Math.ceil(range.count / half), Math.floor(span / 1000));
      if (range.count <= half || stretches < 2) return range.count > 0 ? [range] : [];
      const edges = Array.from({ length: stretches + 1 }, (_, i) =>
        i === stretches ? range.window.toMs : range.window.fromMs + Math.floor((span * i) / stretches),
      );
      const cuts = edges.slice(0, -1).map((fromMs, i) => ({ fromMs, toMs: edges[i + 1] as number }));
      // The last stretch is the range less the others: one request fewer.
      const counted = await Promise.all(cuts.slice(0, -1).map((w) => count(w)));
      requests += counted.length;
      const rest = Math.max(0, range.count - counted.reduce((a, b) => a + b, 0));
      return cuts
        .map((w, i) => ({ window: w, count: i < counted.length ? (counted[i] as number) : rest }))
        .filter((b) => b.count > 0);
    }),
  );
  const buckets = refined.flat().sort((a, b) => a.window.fromMs - b.window.fromMs);
  return {
    buckets,
    total: Math.max(
      total,
      buckets.reduce((n, b) => n + b.count, 0),
    ),
    requests,
    rounds: requests > widths.length ? 2 : 1,
  };
}

async function countIn(
  client: ApiClient,
  filters: CountFilters,
  scope: ProjectScope,
  window: TimeWindow,
  ctx: CallContext,
): Promise<number> {
  const query: Record<string, string | undefined> = {
    [filters.gte]: new Date(window.fromMs).toISOString(),
    [filters.lt]: new Date(window.toMs).toISOString(),
  };
  if (scope.projectIds !== undefined && scope.projectIds.length > 0) query.project_ids = scope.projectIds.join(',');
  const body = await client.getJson({ endpoint: filters.path, path: filters.path, query, project: scope.header }, ctx);
  return readTotal(body, filters.path, ctx);
}
