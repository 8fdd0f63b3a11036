import { DataError, trimBody } from '../core/errors.js';
import { stringifyJson } from '../core/json.js';
import type { JsonValue, ProjectScope } from '../core/types.js';
import type { ApiClient, CallContext } from '../http/client.js';

/** `/v1/events/timeseries` (SDK `events-timeseries`): `{ data: { buckets: [{timestamp, count}], total } }`. */
export const TIMESERIES_PATH = '/v1/events/timeseries';
/** `/v1/events/facets` (SDK `events-facets`): `{ data: [{value, count}] }`; its window is `timestamp.gte`/`timestamp.lt` (dots). */
export const FACETS_PATH = '/v1/events/facets';
/** The facet fields the SDK lists. */
export const FACET_FIELDS = ['event_name', 'user_id', 'signal'] as const;
/** Facet values asked for per field (the SDK's default is 20; lists allow 100). */
const FACET_LIMIT = 100;

export type Interval = 'hour' | 'day';
export const INTERVAL_MS: Readonly<Record<Interval, number>> = { hour: 3_600_000, day: 86_400_000 };

export interface Bucket {
  /** Start of the UTC bucket (epoch ms). */
  readonly startMs: number;
  readonly count: number;
}

/** Start of the UTC hour or day holding `ms`. */
export function bucketStart(ms: number, interval: Interval): number {
  return Math.floor(ms / INTERVAL_MS[interval]) * INTERVAL_MS[interval];
}

/**
 * Events per UTC bucket in [fromMs, toMs) for one project, in one request (buckets with no events
 * are absent). Unfiltered, like the count endpoint.
 */
export async function readTimeseries(
  client: ApiClient,
  scope: ProjectScope,
  window: { readonly fromMs: number; readonly toMs: number },
  interval: Interval,
  ctx: CallContext,
  path: string = TIMESERIES_PATH,
): Promise<{ buckets: Bucket[]; total: number }> {
  const query = {
    'timestamp[gte]': new Date(window.fromMs).toISOString(),
    'timestamp[lt]': new Date(window.toMs).toISOString(),
    interval,
  };
  const body = await client.getJson({ endpoint: path, path, query, project: scope.header }, ctx);
  const fail = (what: string): never => {
    throw new DataError(
      `expected {"data": {"buckets": [{"timestamp", "count"}], "total"}} from GET ${path}, ${what}: ${trimBody(stringifyJson(body), 160)}`,
      { context: ctx },
    );
  };
  const data = field(body, 'data');
  const raw = field(data, 'buckets');
  if (!Array.isArray(raw)) return fail('"data.buckets" is not a list');
  const buckets: Bucket[] = [];
  for (const b of raw as readonly JsonValue[]) {
    const ts = field(b, 'timestamp');
    const count = whole(field(b, 'count'));
    const startMs = typeof ts === 'string' ? Date.parse(ts) : Number.NaN;
    if (Number.isNaN(startMs) || count === undefined)
      return fail('a bucket without an ISO "timestamp" and a whole "count"');
    if (startMs !== bucketStart(startMs, interval))
      return fail(`a bucket that does not start on a UTC ${interval} (${String(ts)})`);
    buckets.push({ startMs, count });
  }
  const total = whole(field(data, 'total')) ?? buckets.reduce((n, b) => n + b.count, 0);
  return { buckets, total };
}

/** The top values of one field in [fromMs, toMs) for one project: `[{value, count}]`, one request. */
export async function readFacets(
  client: ApiClient,
  scope: ProjectScope,
  fieldName: (typeof FACET_FIELDS)[number],
  window: { readonly fromMs: number; readonly toMs: number },
  ctx: CallContext,
): Promise<{ value: string; count: number }[]> {
  const query = {
    field: fieldName,
    limit: String(FACET_LIMIT),
    'timestamp.gte': new Date(window.fromMs).toISOString(),
    'timestamp.lt': new Date(window.toMs).toISOString(),
  };
  const body = await client.getJson({ endpoint: FACETS_PATH, path: FACETS_PATH, query, project: scope.header }, ctx);
  const data = field(body, 'data');
  if (!Array.isArray(data)) {
    throw new DataError(
      `expected {"data": [{"value", "count"}]} from GET ${FACETS_PATH}, got: ${trimBody(stringifyJson(body), 160)}`,
      { context: ctx },
    );
  }
  return (data as readonly JsonValue[]).map((entry) => {
    const value = field(entry, 'value');
    const count = whole(field(entry, 'count'));
    if (value === undefined || value === null || typeof value === 'object' || count === undefined) {
      throw new DataError(
        `expected each facet of ${fieldName} to be {"value", "count"}, got ${trimBody(stringifyJson(entry), 160)}`,
        { context: ctx },
      );
    }
    return { value: String(value), count };
  });
}

function field(value: JsonValue | undefined, name: string): JsonValue | undefined {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as { readonly [k: string]: JsonValue })[name]
    : undefined;
}

function whole(value: JsonValue | undefined): number | undefined {
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value;
  if (typeof value === 'bigint' && value >= 0n) return Number(value);
  return undefined;
}
