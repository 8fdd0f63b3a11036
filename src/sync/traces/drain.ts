import { DataError, FatalApiError } from '../../core/errors.js';
import type { ApiRecord, Clock, JsonValue, ProjectScope, ResourceDefinition, Row } from '../../core/types.js';
import type { ApiClient, CallContext } from '../../http/client.js';
import { ConcurrencyController } from '../concurrency.js';
import { PROJECT_COLUMN, type SchemaTracker } from '../../normalize/normalize.js';
import type { EngineRun } from '../context.js';
import { DEFAULT_TRACE_CONCURRENCY, type TraceQueue } from './queue.js';
import { StreamFrame, type StreamResult } from '../frame.js';
import type { Book } from '../../state/books/book.js';
import { runUnits, type SubWalk, type UnitSource } from '../units.js';
import type { WalkCounts } from '../walk.js';

/**
 * The drain of a per-event trace queue (`queue.ts`): chunks of pending events read at once,
 * their rows written and the chunk marked done in one commit.
 */

export interface TraceDrainOptions {
  readonly queue: TraceQueue;
  readonly tracker: SchemaTracker;
  /** After the events end, keep draining this long at most; the rest waits for later runs. */
  readonly drainAfterParentsMs: number;
  /** Events read at once (the scheduler paces them; one write + one state write per chunk). */
  readonly chunk: number;
  /** Most chunks read at once (the controller finds how many help). @default DEFAULT_TRACE_CONCURRENCY */
  readonly concurrency?: number;
  readonly onPage?: (page: { readonly records: number; readonly rowsStored: number }) => void;
}

/**
 * Drain one project's trace units: read each event's traces, write them, mark the chunk done.
 * Ends when the queue is empty after the events ended, or when the drain time after them is spent.
 */
export async function drainTraces(
  resource: ResourceDefinition,
  scope: ProjectScope,
  deps: EngineRun,
  options: TraceDrainOptions,
): Promise<StreamResult> {
  const frame = new StreamFrame(resource, scope, deps, deps.signal);
  const per = resource.perParent as NonNullable<ResourceDefinition['perParent']>;
  const project = scope.fallbackProjectId ?? scope.key;
  const { ctx } = frame;
  const totals = { rows: 0, pages: 0, windows: 0 };
  let outcome: StreamResult['outcome'] = 'ok';
  let failure: Error | undefined;
  /** Events still owed their traces when the drain ended (the summary says so). */
  let owed: number | undefined;
  // Chunks read at once: a chunk's reads wait on the network together, then its write and state
  // write; more chunks keep requests flowing meanwhile, as many as the controller finds useful.
  const controller = new ConcurrencyController({
    max: options.concurrency ?? DEFAULT_TRACE_CONCURRENCY,
    now: () => deps.clock.now(),
  });
  // The queue's book: a chunk has no cursor; it is done (moved to `done`) in the commit of its rows.
  // Units answered empty while young are asked again at settle (spans can lag their event).
  const later = new WeakMap<TraceChunk, ReadonlySet<string>>();
  const answered = new WeakMap<TraceChunk, ReadonlyMap<string, number>>();
  const book: Book<TraceChunk> = {
    checkpoint: (units, _cursor, state) =>
      options.queue.complete(project, units, later.get(units), state, answered.get(units)),
    cursorRejected: async () => undefined,
  };
  const readChunk = async (units: TraceChunk, sub: SubWalk): Promise<ChunkEnd> => {
    const chunkCtx = sub.ctx;
    const startedAt = deps.clock.now();
    const pages = await Promise.all(
      units.map((u) => readTraces(resource, per.param, u.id, scope, deps.client, chunkCtx)),
    );
    const rows: Row[] = [];
    const again = new Set<string>();
    const counts = new Map<string, number>();
    pages.forEach((records, i) => {
      const unit = units[i] as { readonly id: string; readonly at: number };
      const eventId = unit.id;
      counts.set(eventId, records.length);
      if (records.length === 0 && options.queue.recheckLater(unit)) again.add(eventId);
      if (records.length >= resource.maxPageSize) {
        // The per-event answer has no cursor: a full page may have been cut by the server.
        deps.logger.warn(
          { resource: resource.name, project: scope.key },
          `${per.param}=${eventId} returned ${records.length} records, the page size: some may be missing (no cursor to read on)`,
        );
      }
      for (const record of records) {
        const withParent: ApiRecord = record[per.param] === undefined ? { ...record, [per.param]: eventId } : record;
        rows.push(normalizeTrace(options, withParent, scope, deps.syncedAt, chunkCtx));
      }
    });
    if (again.size > 0) later.set(units, again);
    answered.set(units, counts);
    const n = Math.max(1, units.length);
    const waited = chunkCtx.stats.waitedMs / n;
    sub.record({
      waitedMs: waited,
      latencyMs: Math.max(0, deps.clock.now() - startedAt - waited),
      rateLimited: chunkCtx.stats.rateLimited > 0,
    });
    // Its reads are counted from here on, whether its write succeeds or not.
    const read = units.length;
    let stored = 0;
    try {
      if (rows.length > 0) {
        // The chunk's rows and its move to done are one commit where the warehouse keeps state.
        const written = await deps.state.withBatch(
          (state) => book.checkpoint(units, null, state),
          (state) =>
            deps.destination.write({
              table: options.tracker.schema,
              rows: dedupeByKey(rows, resource.key),
              ...(state === undefined ? {} : { state }),
            }),
        );
        for (const warning of written.warnings ?? [])
          deps.logger.warn({ resource: resource.name, project: scope.key }, warning);
        stored = written.rows;
      } else {
        await book.checkpoint(units, null, deps.state);
      }
      options.onPage?.({ records: rows.length, rowsStored: stored });
    } catch (error) {
      return { rows: stored, pages: read, failed: { error } };
    }
    deps.logger.debug(
      { resource: resource.name, project: scope.key, parents: units.length, rows: rows.length },
      'children chunk',
    );
    return { rows: stored, pages: read };
  };
  try {
    const ended = await runUnits(
      chunkUnits(options, project, deps.clock),
      { limit: controller, ctx, clock: deps.clock },
      async (units, sub) => {
        // Each chunk's counts are added when it ends, also when its write failed (its reads were sent).
        const chunk = await readChunk(units, sub);
        totals.rows += chunk.rows;
        totals.pages += chunk.pages;
        if (chunk.failed !== undefined) throw chunk.failed.error;
      },
    );
    if (ended === 'aborted') throw deps.signal?.reason ?? new Error('aborted');
    const left = await options.queue.owedCount(project);
    owed = left;
    if (left > 0) {
      deps.logger.info(
        { resource: resource.name, project: scope.key, backlog: left },
        `${left} ${per.parent} records still wait for their ${resource.name}; later runs drain them (status and plan show the backlog)`,
      );
    }
  } catch (error) {
    // A drain reads per project: no all-projects read to refuse, so a failure is only that.
    failure = error instanceof Error ? error : new Error(String(error));
    outcome = 'failed';
    frame.logFailure(failure);
    // A drain stopped (--max-run-time, a signal) or failed still says what it left owed: the
    // summary's forecast and `status --check` read it.
    owed = await options.queue.owedCount(project).catch(() => undefined);
  }
  const seconds = frame.elapsed();
  const record = frame.runRecord(outcome === 'ok' ? 'ok' : 'failed', totals, seconds, failure);
  const lastRun = owed === undefined ? record : { ...record, owed };
  await deps.state.updateStream(frame.key, (s) => ({ ...s, lastRun })).catch(() => undefined);
  return {
    resource: resource.name,
    scope: scope.key,
    outcome,
    ...totals,
    stats: ctx.stats,
    seconds,
    error: failure,
    ...(owed === undefined ? {} : { owed }),
  };
}

/** What a chunk read (`pages`: one request per event) and stored, and the error its write failed with. */
interface ChunkEnd extends WalkCounts {
  readonly failed?: { readonly error: unknown };
}

/** A work unit of the traces: a chunk of events (id, event instant) whose traces are due. */
type TraceChunk = readonly { readonly id: string; readonly at: number }[];

/**
 * The queue's producer: chunks of owed events (newest first in the warehouse's book, oldest first in the state queue; none twice at once); waits for
 * events while they are still walked, ends when none is left after them or the drain time is spent.
 */
function chunkUnits(options: TraceDrainOptions, project: string, clock: Clock): UnitSource<TraceChunk> {
  const inFlight = new Set<string>();
  return {
    take: () => {
      const doneAt = options.queue.parentsDoneAt();
      if (doneAt !== undefined && clock.now() - doneAt >= options.drainAfterParentsMs) return 'end';
      const units = options.queue.next(project, options.chunk, inFlight);
      if (units === 'wait') return 'wait';
      if (units.length === 0) return doneAt === undefined ? 'wait' : undefined;
      for (const u of units) inFlight.add(u.id);
      return units;
    },
    changed: () => options.queue.changed(),
    release: (units) => {
      for (const u of units) inFlight.delete(u.id);
    },
  };
}

/** The traces of one event: `{ data: [...] }` (a `meta`, if any, is ignored: there is no cursor). 404 means none. */
async function readTraces(
  resource: ResourceDefinition,
  param: string,
  eventId: string,
  scope: ProjectScope,
  client: ApiClient,
  ctx: CallContext,
): Promise<readonly ApiRecord[]> {
  let body: JsonValue;
  try {
    body = await client.getJson(
      {
        endpoint: resource.path,
        path: resource.path,
        query: { [param]: eventId, [resource.pageSizeParam ?? 'limit']: String(resource.maxPageSize) },
        project: scope.header,
      },
      ctx,
    );
  } catch (error) {
    if (error instanceof FatalApiError && error.status === 404) return [];
    throw error;
  }
  const data =
    body !== null && typeof body === 'object' && !Array.isArray(body)
      ? (body as { readonly [k: string]: JsonValue }).data
      : undefined;
  if (!Array.isArray(data) || data.some((r) => r === null || typeof r !== 'object' || Array.isArray(r))) {
    throw new DataError(
      `expected {"data": [spans...]} for ${param}=${eventId}, got ${typeof body === 'object' ? 'another shape' : typeof body}`,
      { context: ctx },
    );
  }
  return data as readonly ApiRecord[];
}

function normalizeTrace(
  options: TraceDrainOptions,
  record: ApiRecord,
  scope: ProjectScope,
  syncedAt: string,
  ctx: CallContext,
): Row {
  try {
    return options.tracker.normalize(record, scope.fallbackProjectId, syncedAt);
  } catch (error) {
    if (error instanceof DataError) throw new DataError(error.message, { cause: error, context: ctx });
    throw error;
  }
}

function dedupeByKey(rows: readonly Row[], key: string): Row[] {
  const byKey = new Map<string, Row>();
  for (const row of rows) byKey.set(`${String(row[PROJECT_COLUMN])}\u0000${String(row[key])}`, row);
  return [...byKey.values()];
}
