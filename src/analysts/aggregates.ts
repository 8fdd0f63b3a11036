import type { ProjectScope, Row, TableSchema } from '../core/types.js';
import { SYNC_METADATA_COLUMNS, tableSchema } from '../core/table-schema.js';
import {
  bucketStart,
  FACET_FIELDS,
  FACETS_PATH,
  INTERVAL_MS,
  readFacets,
  readTimeseries,
  TIMESERIES_PATH,
  type Interval,
} from '../extract/analytics.js';
import { Capabilities, routeCapability, valueCapability } from '../sync/capabilities.js';
import { optionalRoute } from '../sync/optional.js';
import { newCallStats, type CallContext } from '../http/client.js';
import type { StateWriter } from '../state/store.js';
import { searchScopes } from './searches.js';
import type { RunHooks } from '../sync/engine.js';
import type { RunServices } from '../sync/context.js';
import { StreamFrame, type StreamResult } from '../sync/frame.js';

/**
 * Aggregates the API computes, kept beside the rows (`--aggregates`): `event_counts` from
 * `/v1/events/timeseries` and `event_facets` from `/v1/events/facets`, per project. Each costs one
 * request per project (facets: one per field) on those endpoints' own budgets.
 */

export const EVENT_COUNTS_TABLE = 'event_counts';
export const EVENT_FACETS_TABLE = 'event_facets';
/**
 * How far back each sync refreshes counts and facets: late-indexed events and a day's last hours
 * change recent buckets; older ones are final. A first sync counts the whole range (`--start`, else
 * all history) in one request.
 */
export const AGGREGATE_HORIZON_MS = 7 * 86_400_000;
/** State section: per project, when its counts were last refreshed (absent: never, count everything). */
export const AGGREGATES_SECTION = 'aggregates';

/**
 * A project's entry in the aggregates section: the project itself for daily counts (as written
 * before hourly counts existed), `project|hour` for hourly ones, so each interval has its own refresh.
 */
export function aggregatesKey(project: string, interval: Interval): string {
  return interval === 'day' ? project : `${project}|${interval}`;
}

const EVENT_COUNTS_SCHEMA: TableSchema = tableSchema(EVENT_COUNTS_TABLE, ['project_id', 'interval', 'bucket_start'], {
  project_id: 'string',
  interval: 'string',
  bucket_start: 'timestamp',
  event_count: 'int64',
  as_of: 'timestamp',
  ...SYNC_METADATA_COLUMNS,
});

const EVENT_FACETS_SCHEMA: TableSchema = tableSchema(
  EVENT_FACETS_TABLE,
  ['project_id', 'snapshot_date', 'field', 'value'],
  {
    project_id: 'string',
    snapshot_date: 'timestamp',
    field: 'string',
    value: 'string',
    event_count: 'int64',
    window_from: 'timestamp',
    window_to: 'timestamp',
    as_of: 'timestamp',
    ...SYNC_METADATA_COLUMNS,
  },
);

type AggregatesSection = Readonly<Record<string, string>>;

export interface AggregateOptions {
  readonly project: string | undefined;
  readonly projectIds?: readonly string[];
  readonly runStartMs: number;
  /** The oldest data a first sync reads (`--start`); all history when absent. */
  readonly startMs?: number;
  readonly runId: string;
  /** @default 'day' */
  readonly interval?: Interval;
  readonly signal?: AbortSignal;
}

export interface AggregateDeps extends RunServices {
  /** The run's progress callbacks: each table and project is a stream of the display. */
  readonly hooks?: RunHooks;
  /** What this server offers (`sync/capabilities.ts`); one over `state` when absent. */
  readonly capabilities?: Capabilities;
}

/** Told after each request of a refresh: the records it answered and the rows then stored. */
type PageDone = (records: number, rowsStored: number) => void;

/** Refresh `event_counts` and `event_facets` for every project; one result per table and project. */
export async function refreshAggregates(options: AggregateOptions, deps: AggregateDeps): Promise<StreamResult[]> {
  const scopes = searchScopes(options.project, options.projectIds, deps.state.document.projects);
  // A server without the timeseries (or the interval) or facets: those tables are skipped, not failed.
  const caps = deps.capabilities ?? new Capabilities(deps);
  const interval = options.interval ?? 'day';
  const counts = { name: valueCapability(TIMESERIES_PATH, 'interval', interval), param: 'interval' };
  const results = await Promise.all(
    scopes.flatMap((scope) => {
      const project = scope.fallbackProjectId ?? 'default';
      return [
        optionalRoute(
          routeCapability(TIMESERIES_PATH),
          counts,
          caps,
          { resource: EVENT_COUNTS_TABLE, scope: project },
          () => refreshCounts(scope, options, deps),
        ),
        optionalRoute(
          routeCapability(FACETS_PATH),
          undefined,
          caps,
          { resource: EVENT_FACETS_TABLE, scope: project },
          () => refreshFacets(scope, options, deps),
        ),
      ];
    }),
  );
  return results;
}

/** The range a project's counts are refreshed over this run. */
export function countsRange(
  lastRefresh: string | undefined,
  runStartMs: number,
  startMs: number | undefined,
  interval: Interval,
): { fromMs: number; toMs: number; fillZeros: boolean } {
  if (lastRefresh === undefined) return { fromMs: startMs ?? 0, toMs: runStartMs, fillZeros: false };
  // From the start of the bucket the horizon falls in (or of the last refresh's, if that is older: a
  // schedule paused for a while), so every bucket touched since is counted again whole.
  const since = Math.min(runStartMs - AGGREGATE_HORIZON_MS, Date.parse(lastRefresh) - INTERVAL_MS[interval]);
  return { fromMs: bucketStart(Math.max(startMs ?? 0, since), interval), toMs: runStartMs, fillZeros: true };
}

async function refreshCounts(
  scope: ProjectScope,
  options: AggregateOptions,
  deps: AggregateDeps,
): Promise<StreamResult> {
  const interval = options.interval ?? 'day';
  const project = scope.fallbackProjectId ?? 'default';
  return measured(EVENT_COUNTS_TABLE, scope, project, options, deps, async (ctx, pageDone) => {
    const section = (deps.state.document.sections[AGGREGATES_SECTION] ?? {}) as AggregatesSection;
    const range = countsRange(section[aggregatesKey(project, interval)], options.runStartMs, options.startMs, interval);
    const { buckets } = await readTimeseries(deps.client, scope, range, interval, ctx);
    const asOf = new Date(options.runStartMs).toISOString();
    const counts = new Map<number, number>();
    // A bucket the answer leaves out holds no events: within the recent range (a row may exist from
    // an earlier run) it is written as 0; a first sync's long range writes only the buckets it got.
    if (range.fillZeros)
      for (let t = bucketStart(range.fromMs, interval); t < range.toMs; t += INTERVAL_MS[interval]) counts.set(t, 0);
    for (const b of buckets)
      if (b.startMs >= bucketStart(range.fromMs, interval) && b.startMs < range.toMs)
        counts.set(b.startMs, (counts.get(b.startMs) ?? 0) + b.count);
    const rows: Row[] = [...counts].map(([startMs, count]) => ({
      project_id: project,
      interval,
      bucket_start: new Date(startMs).toISOString(),
      event_count: BigInt(count),
      as_of: asOf,
      _synced_at: asOf,
      _run_id: options.runId,
    }));
    // The counts and how far they reach: one commit (the mark alone when there are no counts).
    const reach = (state: StateWriter): Promise<void> =>
      state.updateSection<AggregatesSection>(AGGREGATES_SECTION, (current) => ({
        ...(current ?? {}),
        [aggregatesKey(project, interval)]: asOf,
      }));
    const written =
      rows.length === 0
        ? await reach(deps.state).then(() => 0)
        : await deps.state.withBatch(
            reach,
            async (state) =>
              (
                await deps.destination.write({
                  table: EVENT_COUNTS_SCHEMA,
                  rows,
                  ...(state === undefined ? {} : { state }),
                })
              ).rows,
          );
    pageDone(buckets.length, written);
    return written;
  });
}

async function refreshFacets(
  scope: ProjectScope,
  options: AggregateOptions,
  deps: AggregateDeps,
): Promise<StreamResult> {
  const project = scope.fallbackProjectId ?? 'default';
  return measured(EVENT_FACETS_TABLE, scope, project, options, deps, async (ctx, pageDone) => {
    const window = { fromMs: options.runStartMs - AGGREGATE_HORIZON_MS, toMs: options.runStartMs };
    const asOf = new Date(options.runStartMs).toISOString();
    const snapshotDate = new Date(bucketStart(options.runStartMs, 'day')).toISOString();
    const rows: Row[] = [];
    let lastRecords = 0;
    for (const [i, fieldName] of FACET_FIELDS.entries()) {
      const facets = await readFacets(deps.client, scope, fieldName, window, ctx);
      // One page per field's request; the rows are stored together after the last one.
      if (i < FACET_FIELDS.length - 1) pageDone(facets.length, 0);
      else lastRecords = facets.length;
      for (const facet of facets) {
        rows.push({
          project_id: project,
          snapshot_date: snapshotDate,
          field: fieldName,
          value: facet.value,
          event_count: BigInt(facet.count),
          window_from: new Date(window.fromMs).toISOString(),
          window_to: asOf,
          as_of: asOf,
          _synced_at: asOf,
          _run_id: options.runId,
        });
      }
    }
    const written = rows.length === 0 ? 0 : (await deps.destination.write({ table: EVENT_FACETS_SCHEMA, rows })).rows;
    pageDone(lastRecords, written);
    return written;
  });
}

/** Run one refresh as a stream of the run summary (failures reported, not thrown). */
async function measured(
  table: string,
  scope: ProjectScope,
  project: string,
  options: AggregateOptions,
  deps: AggregateDeps,
  work: (ctx: CallContext, pageDone: PageDone) => Promise<number>,
): Promise<StreamResult> {
  const result = await refresh(table, scope, project, options, deps, work);
  deps.hooks?.onStreamDone?.(result);
  return result;
}

async function refresh(
  table: string,
  scope: ProjectScope,
  project: string,
  options: AggregateOptions,
  deps: AggregateDeps,
  work: (ctx: CallContext, pageDone: PageDone) => Promise<number>,
): Promise<StreamResult> {
  const frame = new StreamFrame({ name: table }, scope, deps, options.signal, {
    ctx: { resource: table, project, lane: `${table}|${project}`, stats: newCallStats(), signal: options.signal },
    failureLog: (error) => ({
      fields: { table, project, err: error.message },
      message: `${table} (${project}) failed: ${error.message}`,
    }),
  });
  const { ctx } = frame;
  deps.hooks?.onStreamStart?.(table, project);
  try {
    const rows = await work(ctx, (records, rowsStored) =>
      deps.hooks?.onPage?.(table, project, { records, rowsStored }),
    );
    return {
      resource: table,
      scope: project,
      outcome: 'ok',
      rows,
      pages: ctx.stats.requests,
      windows: 1,
      stats: ctx.stats,
      seconds: frame.elapsed(),
    };
  } catch (error) {
    const { error: err } = frame.failure(error);
    return {
      resource: table,
      scope: project,
      outcome: 'failed',
      rows: 0,
      pages: 0,
      windows: 0,
      stats: ctx.stats,
      seconds: frame.elapsed(),
      error: err,
    };
  }
}
