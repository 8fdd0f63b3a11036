import { DataError, FatalApiError, type QuerySyncError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { ApiRecord, ChildSelection, Clock, JsonValue, ProjectScope, ResourceDefinition, Row } from '../core/types.js';
import type { ApiClient, CallContext } from '../http/client.js';
import { ConcurrencyController } from '../http/concurrency.js';
import type { Destination } from '../load/destination.js';
import { PROJECT_COLUMN, type SchemaTracker } from '../normalize/normalize.js';
import { streamKey, type StateDocument, type StateStore } from '../state/store.js';
import { streamCallContext, type StreamResult } from './stream.js';
import { runUnits, type SubWalk, type UnitBook, type UnitSource } from './units.js';

/**
 * Per-parent children (traces read one event at a time, where the server cannot list them by time).
 *
 * Work units: one per parent record whose children are due. They live in a state section
 * `children:<resource>` as `{ [project]: { pending: {id: parentMs}, done: {id: parentMs} } }`:
 * - a parent walk enqueues the batch it just stored (before its own checkpoint, so a crash re-reads
 *   the batch and enqueues again, never loses it);
 * - the child drain reads a chunk of pending units, writes their rows, then moves the chunk to
 *   `done` in one state write (a crash between the two re-reads at most one chunk);
 * - `done` keeps only units a later sync could enqueue again (parents at or after the oldest instant
 *   any parent stream will re-read: its settle mark or its mark − lookback), so the section stays
 *   bounded by the re-read horizon plus the backlog itself.
 */

export type { ChildSelection };

/** Chunks of per-parent reads at once, at most, when the caller gives no bound. */
export const DEFAULT_CHILD_CONCURRENCY = 8;

/** Settings section holding what was learned about the server (once, then kept). */
export const SERVER_SECTION = 'server';

export interface ServerFacts {
  /** Per child resource: whether the server reads it only per parent record. */
  readonly perParent?: Readonly<Record<string, { readonly byParent: boolean; readonly learnedAt: string; readonly evidence: string }>>;
}

interface ProjectUnits {
  readonly pending: Readonly<Record<string, number>>;
  readonly done: Readonly<Record<string, number>>;
}

type ChildSection = Readonly<Record<string, ProjectUnits>>;

export const childSectionName = (resource: ResourceDefinition): string => `children:${resource.name}`;

/** The backlog of one child resource as read from a state document (for `status` and `plan`). */
export function childBacklog(doc: StateDocument, resource: ResourceDefinition): { readonly pending: Readonly<Record<string, number>>; readonly done: number } {
  const section = (doc.sections[childSectionName(resource)] ?? {}) as ChildSection;
  const pending: Record<string, number> = {};
  let done = 0;
  for (const [project, units] of Object.entries(section)) {
    pending[project] = Object.keys(units.pending).length;
    done += Object.keys(units.done).length;
  }
  return { pending, done };
}

export function serverFacts(doc: StateDocument): ServerFacts {
  return (doc.sections[SERVER_SECTION] ?? {}) as ServerFacts;
}

/** Whether the child resource is read per parent on this server, as learned and kept in state. */
export function readsByParent(doc: StateDocument, resource: ResourceDefinition): boolean | undefined {
  return serverFacts(doc).perParent?.[resource.name]?.byParent;
}

/**
 * Find out once whether `resource` can be listed by time: ask its list for one record with no
 * parent named. A 400 that names the per-parent parameter (`details.field`, or the message) means "per
 * parent only"; a page means "by time". Anything else leaves it unknown (the list walk then fails
 * with its own message). What was learned is kept in state and logged once.
 */
export async function learnChildMode(
  resource: ResourceDefinition,
  scope: ProjectScope,
  deps: { readonly client: ApiClient; readonly state: StateStore; readonly clock: Clock; readonly logger: Logger },
  signal: AbortSignal | undefined,
): Promise<boolean | undefined> {
  const per = resource.perParent;
  if (per === undefined) return false;
  const known = readsByParent(deps.state.document, resource);
  if (known !== undefined) return known;
  const ctx = streamCallContext(resource, scope, signal);
  const now = deps.clock.now();
  let byParent: boolean;
  let evidence: string;
  try {
    // Only the page size: a parameter the real service does not know could be refused first.
    const query: Record<string, string> = { [resource.pageSizeParam ?? 'limit']: '1' };
    await deps.client.getJson({ endpoint: resource.path, path: resource.path, query, project: scope.header }, ctx);
    byParent = false;
    evidence = `GET ${resource.path} without ${per.param} answered a page`;
  } catch (error) {
    const names = error instanceof FatalApiError && error.status === 400 && (error.field === per.param || error.message.includes(per.param));
    if (!names) return undefined;
    byParent = true;
    evidence = `GET ${resource.path} without ${per.param} was refused (400 naming ${per.param})`;
  }
  await deps.state.updateSection<ServerFacts>(SERVER_SECTION, (facts) => ({
    ...facts,
    perParent: { ...facts?.perParent, [resource.name]: { byParent, learnedAt: new Date(now).toISOString(), evidence } },
  }));
  deps.logger.info(
    { resource: resource.name },
    byParent
      ? `${evidence}: this server reads ${resource.name} one ${per.parent} record at a time; kept in state`
      : `${evidence}: this server lists ${resource.name} by time; kept in state`,
  );
  return byParent;
}

/** Whether a parent row shows children, by the declared fields (JSON text `[]`/`{}`/`null` is empty). */
export function showsChildren(row: Row, fields: readonly string[]): boolean {
  return fields.some((f) => {
    const v = row[f];
    if (v === null || v === undefined || v === '' || v === false) return false;
    if (typeof v === 'string') return !['[]', '{}', 'null'].includes(v.trim());
    return true;
  });
}

export interface ChildQueueOptions {
  readonly child: ResourceDefinition;
  /** The parent resource (its key and time field); absent when this run reads no parents. */
  readonly parent?: ResourceDefinition;
  readonly selection: Exclude<ChildSelection, 'none'>;
  readonly lookbackMs: number;
  /** Called with the units pending across projects after each change (the progress ETA of the backlog). */
  readonly onBacklog?: (pending: number) => void;
}

/**
 * The durable queue of one child resource for one run: parents enqueue, child drains wait on it.
 * All changes go through `StateStore.updateSection`, applied to the state as last committed (the
 * warehouse's, or the file re-read under its write lock),
 * so concurrent parent walks and drains compose.
 */
export class ChildQueue {
  private parentsRunning = 0;
  /** When the last parent walk ended; the queue's creation when none has run (yet). */
  private parentsDoneAtMs: number;
  private waiters: (() => void)[] = [];
  private readonly section: string;

  constructor(
    private readonly options: ChildQueueOptions,
    private readonly state: StateStore,
    private readonly clock: Clock,
  ) {
    this.section = childSectionName(options.child);
    this.parentsDoneAtMs = clock.now();
  }

  parentStarted(): void {
    this.parentsRunning += 1;
  }

  parentDone(): void {
    this.parentsRunning -= 1;
    if (this.parentsRunning === 0) this.parentsDoneAtMs = this.clock.now();
    this.wake();
  }

  /** When every parent walk of the run has ended (`undefined` while one runs). */
  parentsDoneAt(): number | undefined {
    return this.parentsRunning > 0 ? undefined : this.parentsDoneAtMs;
  }

  /** Enqueue the children of a stored batch of parent rows (those selected and not yet queued or done). */
  async enqueue(rows: readonly Row[]): Promise<void> {
    const parent = this.options.parent;
    if (parent === undefined) return;
    const fresh = new Map<string, Map<string, number>>();
    const current = this.units();
    for (const row of rows) {
      if (this.options.selection === 'traced' && !showsChildren(row, this.options.child.perParent?.shownBy ?? [])) continue;
      const project = String(row[PROJECT_COLUMN]);
      const id = String(row[parent.key]);
      const known = current[project];
      if (known !== undefined && (id in known.pending || id in known.done)) continue;
      const at = Date.parse(String(row[parent.cursorField ?? '']));
      let forProject = fresh.get(project);
      if (forProject === undefined) fresh.set(project, (forProject = new Map()));
      forProject.set(id, Number.isNaN(at) ? 0 : at);
    }
    if (fresh.size === 0) return;
    await this.state.updateSection<ChildSection>(this.section, (section = {}) => {
      const next: Record<string, ProjectUnits> = { ...section };
      for (const [project, ids] of fresh) {
        const units = next[project] ?? { pending: {}, done: {} };
        const pending = { ...units.pending };
        for (const [id, at] of ids) if (!(id in units.done)) pending[id] = at;
        next[project] = { pending, done: units.done };
      }
      return next;
    });
    // Inside a batch's commit the units exist once it is durable: wake the drains then.
    this.state.whenCommitted(() => {
      this.reportBacklog();
      this.wake();
    });
  }

  /** Units pending across projects, to `onBacklog`. */
  private reportBacklog(): void {
    const report = this.options.onBacklog;
    if (report === undefined) return;
    let pending = 0;
    for (const units of Object.values(this.units())) pending += Object.keys(units.pending).length;
    report(pending);
  }

  /** Up to `n` pending units of a project, oldest parent first, skipping those in flight. */
  take(project: string, n: number, inFlight: ReadonlySet<string>): { readonly id: string; readonly at: number }[] {
    const pending = this.units()[project]?.pending ?? {};
    return Object.entries(pending)
      .filter(([id]) => !inFlight.has(id))
      .sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : 1))
      .slice(0, n)
      .map(([id, at]) => ({ id, at }));
  }

  pendingCount(project: string): number {
    return Object.keys(this.units()[project]?.pending ?? {}).length;
  }

  /** Mark units done (their rows are stored), pruning done units no later sync can enqueue again. */
  async complete(project: string, units: readonly { readonly id: string; readonly at: number }[]): Promise<void> {
    const horizonMs = this.horizonMs();
    await this.state.updateSection<ChildSection>(this.section, (section = {}) => {
      const prev = section[project] ?? { pending: {}, done: {} };
      const pending = { ...prev.pending };
      const done: Record<string, number> = {};
      for (const [id, at] of Object.entries(prev.done)) if (at >= horizonMs) done[id] = at;
      for (const u of units) {
        delete pending[u.id];
        if (u.at >= horizonMs) done[u.id] = u.at;
      }
      return { ...section, [project]: { pending, done } };
    });
    // Inside a batch's commit the units are done once it is durable: count them then.
    this.state.whenCommitted(() => this.reportBacklog());
  }

  /** Resolves at the next enqueue or parent end. */
  changed(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  private units(): ChildSection {
    return (this.state.document.sections[this.section] ?? {}) as ChildSection;
  }

  /** The oldest parent instant any parent stream re-reads: its settle mark, or its mark − lookback. */
  private horizonMs(): number {
    let horizon = Number.POSITIVE_INFINITY;
    const prefix = `${this.options.child.perParent?.parent ?? ''}:`;
    for (const [key, st] of Object.entries(this.state.document.streams)) {
      if (!key.startsWith(prefix)) continue;
      if (st.mark === undefined) return Number.NEGATIVE_INFINITY; // a first sync is under way: keep all
      const reread = Date.parse(st.mark) - this.options.lookbackMs;
      const settled = st.settled === undefined ? reread : Date.parse(st.settled);
      horizon = Math.min(horizon, reread, settled);
    }
    return horizon === Number.POSITIVE_INFINITY ? Number.NEGATIVE_INFINITY : horizon;
  }
}

export interface ChildDrainOptions {
  readonly queue: ChildQueue;
  readonly tracker: SchemaTracker;
  readonly syncedAt: string;
  /** After the parents end, keep draining this long at most; the rest waits for later runs. */
  readonly drainAfterParentsMs: number;
  /** Parent records read at once (the scheduler paces them; one write + one state write per chunk). */
  readonly chunk: number;
  /** Most chunks read at once (the controller finds how many help). @default DEFAULT_CHILD_CONCURRENCY */
  readonly concurrency?: number;
  readonly signal?: AbortSignal;
  readonly onPage?: (page: { readonly records: number; readonly rowsStored: number }) => void;
}

/**
 * Drain one project's child units: read each parent's children, write them, mark the chunk done.
 * Ends when the queue is empty after the parents ended, or when the drain time after them is spent.
 */
export async function drainChildren(
  resource: ResourceDefinition,
  scope: ProjectScope,
  deps: { readonly client: ApiClient; readonly destination: Destination; readonly state: StateStore; readonly clock: Clock; readonly logger: Logger },
  options: ChildDrainOptions,
): Promise<StreamResult> {
  const started = deps.clock.now();
  const per = resource.perParent as NonNullable<ResourceDefinition['perParent']>;
  const project = scope.fallbackProjectId ?? scope.key;
  const ctx = streamCallContext(resource, scope, options.signal);
  const totals = { rows: 0, pages: 0, windows: 0 };
  let outcome: StreamResult['outcome'] = 'ok';
  let failure: Error | undefined;
  // Chunks read at once: a chunk's reads wait on the network together, then its write and state
  // write; more chunks keep requests flowing meanwhile, as many as the controller finds useful.
  const controller = new ConcurrencyController({ max: options.concurrency ?? DEFAULT_CHILD_CONCURRENCY, now: () => deps.clock.now() });
  // The queue's book: a chunk has no cursor; it is done (moved to `done`) in the commit of its rows.
  const book: UnitBook<ChildChunk> = { checkpoint: (units) => options.queue.complete(project, units), cursorRejected: async () => undefined };
  const readChunk = async (units: ChildChunk, sub: SubWalk): Promise<void> => {
    const chunkCtx = sub.ctx;
    const startedAt = deps.clock.now();
    const pages = await Promise.all(units.map((u) => readChildren(resource, per.param, u.id, scope, deps.client, chunkCtx)));
    const rows: Row[] = [];
    pages.forEach((records, i) => {
      const parentId = (units[i] as { id: string }).id;
      if (records.length >= resource.maxPageSize) {
        // The per-event answer has no cursor: a full page may have been cut by the server.
        deps.logger.warn({ resource: resource.name, project: scope.key }, `${per.param}=${parentId} returned ${records.length} records, the page size: some may be missing (no cursor to read on)`);
      }
      for (const record of records) {
        const withParent: ApiRecord = record[per.param] === undefined ? { ...record, [per.param]: parentId } : record;
        rows.push(normalizeChild(options, withParent, scope, chunkCtx));
      }
    });
    const n = Math.max(1, units.length);
    const waited = chunkCtx.stats.waitedMs / n;
    sub.record({ waitedMs: waited, latencyMs: Math.max(0, deps.clock.now() - startedAt - waited), rateLimited: chunkCtx.stats.rateLimited > 0 });
    totals.pages += units.length;
    let stored = 0;
    if (rows.length > 0) {
      // The chunk's rows and its move to done are one commit where the warehouse keeps state.
      const written = await deps.state.withBatch(
        () => book.checkpoint(units, null),
        (state) => deps.destination.write({ table: options.tracker.schema, rows: dedupeByKey(rows, resource.key), ...(state === undefined ? {} : { state }) }),
      );
      for (const warning of written.warnings ?? []) deps.logger.warn({ resource: resource.name, project: scope.key }, warning);
      stored = written.rows;
      totals.rows += written.rows;
    } else {
      await book.checkpoint(units, null);
    }
    options.onPage?.({ records: rows.length, rowsStored: stored });
    deps.logger.debug({ resource: resource.name, project: scope.key, parents: units.length, rows: rows.length }, 'children chunk');
  };
  try {
    const ended = await runUnits(chunkUnits(options, project, deps.clock), { limit: controller, ctx, clock: deps.clock }, readChunk);
    if (ended === 'aborted') throw options.signal?.reason ?? new Error('aborted');
    const left = options.queue.pendingCount(project);
    if (left > 0) {
      deps.logger.info(
        { resource: resource.name, project: scope.key, backlog: left },
        `${left} ${per.parent} records still wait for their ${resource.name}; later runs drain them (status and plan show the backlog)`,
      );
    }
  } catch (error) {
    failure = error instanceof Error ? error : new Error(String(error));
    outcome = 'failed';
    deps.logger.error({ resource: resource.name, project: scope.key, code: (failure as QuerySyncError).code }, failure.message);
  }
  const seconds = (deps.clock.now() - started) / 1000;
  await deps.state
    .updateStream(streamKey(resource.name, scope.key), (s) => ({
      ...s,
      lastRun: {
        at: new Date(started).toISOString(),
        outcome: outcome === 'ok' ? 'ok' : 'failed',
        rows: totals.rows,
        pages: totals.pages,
        requests: ctx.stats.requests,
        seconds,
        ...(failure ? { error: failure.message } : {}),
      },
    }))
    .catch(() => undefined);
  return { resource: resource.name, scope: scope.key, outcome, ...totals, stats: ctx.stats, seconds, error: failure };
}

/** A work unit of the children: a chunk of parent records (id, parent instant) whose children are due. */
type ChildChunk = readonly { readonly id: string; readonly at: number }[];

/**
 * The queue's producer: chunks of pending parents (oldest first, none twice at once); waits for
 * parents while they are still walked, ends when none is left after them or the drain time is spent.
 */
function chunkUnits(options: ChildDrainOptions, project: string, clock: Clock): UnitSource<ChildChunk> {
  const inFlight = new Set<string>();
  return {
    take: () => {
      const doneAt = options.queue.parentsDoneAt();
      if (doneAt !== undefined && clock.now() - doneAt >= options.drainAfterParentsMs) return 'end';
      const units = options.queue.take(project, options.chunk, inFlight);
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

/** The children of one parent: `{ data: [...] }` (a `meta`, if any, is ignored: there is no cursor). 404 means none. */
async function readChildren(
  resource: ResourceDefinition,
  param: string,
  parentId: string,
  scope: ProjectScope,
  client: ApiClient,
  ctx: CallContext,
): Promise<readonly ApiRecord[]> {
  let body: JsonValue;
  try {
    body = await client.getJson(
      { endpoint: resource.path, path: resource.path, query: { [param]: parentId, [resource.pageSizeParam ?? 'limit']: String(resource.maxPageSize) }, project: scope.header },
      ctx,
    );
  } catch (error) {
    if (error instanceof FatalApiError && error.status === 404) return [];
    throw error;
  }
  const data = body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as { readonly [k: string]: JsonValue }).data : undefined;
  if (!Array.isArray(data) || data.some((r) => r === null || typeof r !== 'object' || Array.isArray(r))) {
    throw new DataError(`expected {"data": [spans...]} for ${param}=${parentId}, got ${typeof body === 'object' ? 'another shape' : typeof body}`, { context: ctx });
  }
  return data as readonly ApiRecord[];
}

function normalizeChild(options: ChildDrainOptions, record: ApiRecord, scope: ProjectScope, ctx: CallContext): Row {
  try {
    return options.tracker.normalize(record, scope.fallbackProjectId, options.syncedAt);
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
