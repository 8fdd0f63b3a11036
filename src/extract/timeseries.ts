import { DataError, FatalApiError, trimBody } from '../core/errors.js';
import { stringifyJson } from '../core/json.js';
import type { JsonValue, ProjectScope, SplitDeclaration } from '../core/types.js';
import type { CallContext } from '../http/client.js';
import type { TimeWindow, WindowCount } from './windows.js';
import type { JsonReader } from './memo.js';

/**
 * Where records lie in time, from a timeseries endpoint (`/v1/events/timeseries`, the SDK's shape
 * `{ "data": { "buckets": [{ "timestamp", "count" }], "total" } }`): the input of split walks.
 * One request per interval; a window that starts long before its data (a first sync reads from the
 * epoch) is asked again, finer, from the first bucket holding records.
 */

export const INTERVALS = ['minute', 'hour', 'day', 'week', 'month'] as const;
export type Interval = (typeof INTERVALS)[number];

/** Most buckets asked for in one request (the service states no cap; a month of hours is 744). */
const MAX_BUCKETS = 1500;

const LENGTH_MS: Record<Interval, number> = {
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
  week: 7 * 86_400_000,
  month: 31 * 86_400_000,
};

/**
 * The finest of `allowed` giving at most `maxBuckets` buckets over `window` (the coarsest allowed
 * when none does: the bucket cap is ours, the service states none).
 */
export function intervalFor(
  window: TimeWindow,
  maxBuckets = MAX_BUCKETS,
  allowed: readonly Interval[] = INTERVALS,
): Interval {
  const length = Math.max(1, window.toMs - window.fromMs);
  const usable = INTERVALS.filter((i) => allowed.includes(i));
  return usable.find((i) => length / LENGTH_MS[i] <= maxBuckets - 2) ?? usable.at(-1) ?? 'month';
}

/** A timeseries refused one interval (400 naming `interval`, the SDK's error shape): the others may serve. */
export class IntervalRefused extends FatalApiError {
  readonly interval: Interval;
  constructor(interval: Interval, cause: FatalApiError) {
    // The message already names the resource and project (no context again: it would repeat them).
    super(cause.message, cause.status, { cause, field: 'interval' });
    this.interval = interval;
  }
}

/** Start of the UTC bucket after the one starting at `startMs` (weeks start on Monday). */
export function bucketEnd(startMs: number, interval: Interval): number {
  if (interval === 'month') {
    const d = new Date(startMs);
    return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
  }
  return startMs + LENGTH_MS[interval];
}

export interface RecordsOverTime {
  /** Consecutive-or-gapped buckets clipped to the window, records each (empty buckets may be absent). */
  readonly buckets: readonly WindowCount[];
  readonly total: number;
  /** Requests made. */
  readonly requests: number;
  /** Round trips they took (requests sent at once count once). */
  readonly rounds: number;
  /** The interval of the buckets. */
  readonly interval: Interval;
}

/** One timeseries request over `window` at `interval`. */
export async function timeseries(
  client: JsonReader,
  decl: SplitDeclaration,
  scope: ProjectScope,
  window: TimeWindow,
  interval: Interval,
  ctx: CallContext,
): Promise<{ readonly buckets: WindowCount[]; readonly total: number }> {
  const path = decl.timeseriesPath;
  const query: Record<string, string | undefined> = {
    interval,
    [decl.timeseriesGte]: new Date(window.fromMs).toISOString(),
    [decl.timeseriesLt]: new Date(window.toMs).toISOString(),
  };
  if (scope.projectIds !== undefined && scope.projectIds.length > 0) query.project_ids = scope.projectIds.join(',');
  let body: JsonValue;
  try {
    body = await client.getJson({ endpoint: path, path, query, project: scope.header }, ctx);
  } catch (error) {
    if (error instanceof FatalApiError && error.status === 400 && error.field === 'interval')
      throw new IntervalRefused(interval, error);
    throw error;
  }
  const bad = (): DataError =>
    new DataError(
      `expected {"data": {"buckets": [{"timestamp", "count"}], "total"}} from GET ${path}, got: ${trimBody(stringifyJson(body), 160)}`,
      { context: ctx },
    );
  const data = field(body, 'data');
  const raw = field(data, 'buckets');
  if (!Array.isArray(raw)) throw bad();
  const buckets: WindowCount[] = [];
  let sum = 0;
  for (const b of raw as readonly JsonValue[]) {
    const at = field(b, 'timestamp');
    const count = Number(field(b, 'count'));
    const startMs = typeof at === 'string' ? Date.parse(at) : typeof at === 'number' ? at : Number.NaN;
    if (Number.isNaN(startMs) || !Number.isFinite(count) || count < 0) throw bad();
    const fromMs = Math.max(window.fromMs, startMs);
    const toMs = Math.min(window.toMs, bucketEnd(startMs, interval));
    if (toMs <= fromMs || count === 0) continue;
    buckets.push({ window: { fromMs, toMs }, count });
    sum += count;
  }
  const total = field(data, 'total');
  return {
    buckets,
    total: typeof total === 'number' || typeof total === 'bigint' ? Math.max(sum, Number(total)) : sum,
  };
}

/**
 * Where the records of `window` lie: one timeseries at the finest interval the window allows, then,
 * while the records start well after the window does (a first sync from the epoch), again from the
 * first bucket holding records, finer (at most `maxRequests` in all).
 *
 * A window longer than the hours one request can hold also asks its last `MAX_BUCKETS` hours at
 * once, beside the coarse request: when the coarse answer shows every record inside them (an
 * account younger than two months), that answer is the finer one, a round trip sooner (a first
 * sync's walks start one latency earlier, for one request of the timeseries endpoint's budget).
 */
export async function recordsOverTime(
  client: JsonReader,
  decl: SplitDeclaration,
  scope: ProjectScope,
  window: TimeWindow,
  ctx: CallContext,
  maxRequests = 3,
  allowed: readonly Interval[] = INTERVALS,
): Promise<RecordsOverTime> {
  let asked = window;
  let interval = intervalFor(asked, MAX_BUCKETS, allowed);
  const recent: TimeWindow = {
    fromMs: Math.max(window.fromMs, window.toMs - (MAX_BUCKETS - 2) * LENGTH_MS.hour),
    toMs: window.toMs,
  };
  const guess =
    maxRequests >= 2 &&
    allowed.includes('hour') &&
    INTERVALS.indexOf(interval) > INTERVALS.indexOf('hour') &&
    intervalFor(recent) === 'hour'
      ? timeseries(client, decl, scope, recent, 'hour', ctx)
      : undefined;
  guess?.catch(() => undefined);
  let result = await timeseries(client, decl, scope, asked, interval, ctx);
  let requests = 1;
  if (guess !== undefined) {
    requests += 1;
    const first = result.buckets[0];
    if (first === undefined || first.window.fromMs >= recent.fromMs) {
      const finer = await guess;
      return {
        buckets: finer.buckets,
        total: Math.max(finer.total, result.total),
        requests,
        rounds: 1,
        interval: 'hour',
      };
    }
  }
  let rounds = 1;
  for (; requests < maxRequests; requests += 1) {
    const first = result.buckets[0];
    if (first === undefined) break;
    const narrowed: TimeWindow = { fromMs: first.window.fromMs, toMs: window.toMs };
    const finer = intervalFor(narrowed, MAX_BUCKETS, allowed);
    if (INTERVALS.indexOf(finer) >= INTERVALS.indexOf(interval)) break;
    asked = narrowed;
    interval = finer;
    const again = await timeseries(client, decl, scope, asked, interval, ctx);
    rounds += 1;
    // Nothing lies before the narrowed window (the coarser answer said so): say it, so buckets cover the window.
    result = again;
  }
  return { buckets: result.buckets, total: result.total, requests, rounds, interval };
}

/**
 * `buckets` with the stretches around each of `targets` (records counted from the window's start,
 * every bucket holding records within ± `slack` of the target, as far as one finer request can
 * cover: a day of minutes) asked again at a finer interval, one request each, at once: where a
 * split must cut on a whole page, hour buckets of ~100 records rarely end on one; minute buckets
 * often do, but not always (records that share a minute, or a timestamp, hide the counts between
 * them: several whole pages in a row can be hidden), so a stretch covers all the slack, not only
 * the buckets that end inside it. Stretches the coarse answer cannot refine (already the finest
 * interval) are left as they are; overlapping stretches are asked once when one request still
 * covers them, else the later one starts where the earlier ends.
 */
export async function refineAround(
  client: JsonReader,
  decl: SplitDeclaration,
  scope: ProjectScope,
  coarse: RecordsOverTime,
  targets: readonly number[],
  slack: number,
  ctx: CallContext,
  allowed: readonly Interval[] = INTERVALS,
): Promise<{ readonly buckets: readonly WindowCount[]; readonly requests: number }> {
  const sorted = [...coarse.buckets].sort((a, b) => a.window.fromMs - b.window.fromMs);
  const finerThanCoarse = (w: TimeWindow): boolean =>
    INTERVALS.indexOf(intervalFor(w, MAX_BUCKETS, allowed)) < INTERVALS.indexOf(coarse.interval);
  const spans: TimeWindow[] = [];
  for (const target of targets) {
    // The bucket the target falls in, then its neighbours, nearest first, while they hold records
    // within `slack` of the target and one finer request can cover the stretch (a day of minutes).
    let before = 0;
    let at = -1;
    const starts: number[] = [];
    for (let i = 0; i < sorted.length; i += 1) {
      starts.push(before);
      before += (sorted[i] as WindowCount).count;
      if (at < 0 && before > target) at = i;
    }
    if (at < 0) continue;
    let lo = at;
    let hi = at;
    const span = (): TimeWindow => ({
      fromMs: (sorted[lo] as WindowCount).window.fromMs,
      toMs: (sorted[hi] as WindowCount).window.toMs,
    });
    if (!finerThanCoarse(span())) continue;
    for (let grown = true; grown; ) {
      grown = false;
      for (const side of [-1, 1]) {
        const next = side < 0 ? lo - 1 : hi + 1;
        if (next < 0 || next >= sorted.length) continue;
        // The bucket's records nearest the target: its last one on the left, its first on the right.
        const inner =
          side < 0 ? (starts[next] as number) + (sorted[next] as WindowCount).count : (starts[next] as number);
        if (Math.abs(inner - target) > slack) continue;
        const [oldLo, oldHi] = [lo, hi];
        if (side < 0) lo = next;
        else hi = next;
        if (finerThanCoarse(span())) grown = true;
        else [lo, hi] = [oldLo, oldHi];
      }
    }
    const { fromMs, toMs } = span();
    const last = spans.at(-1);
    const merged = last === undefined ? undefined : { fromMs: last.fromMs, toMs: Math.max(last.toMs, toMs) };
    // Merged only while one finer request covers both: a stretch too long for it would refine neither.
    if (last !== undefined && merged !== undefined && fromMs <= last.toMs && finerThanCoarse(merged))
      spans[spans.length - 1] = merged;
    else if (last !== undefined && fromMs < last.toMs) {
      if (toMs > last.toMs) spans.push({ fromMs: last.toMs, toMs });
    } else spans.push({ fromMs, toMs });
  }
  const finer = spans.filter(finerThanCoarse);
  const answers = await Promise.all(
    finer.map((w) => timeseries(client, decl, scope, w, intervalFor(w, MAX_BUCKETS, allowed), ctx)),
  );
  const inside = (b: WindowCount): boolean => finer.some((w) => b.window.fromMs >= w.fromMs && b.window.toMs <= w.toMs);
  const buckets = [...sorted.filter((b) => !inside(b)), ...answers.flatMap((a) => a.buckets)].sort(
    (a, b) => a.window.fromMs - b.window.fromMs,
  );
  return { buckets, requests: answers.length };
}

function field(value: JsonValue | undefined, name: string): JsonValue | undefined {
  return value !== null && value !== undefined && typeof value === 'object' && !Array.isArray(value)
    ? (value as { readonly [k: string]: JsonValue })[name]
    : undefined;
}
