import type { TraceRead, OwedMark } from '../../core/state-table.js';
import type { TraceSelection, Clock, ResourceDefinition, Row } from '../../core/types.js';
import { OWED_FULL_EVERY_MS, type KeepsTraceBook, type OwedTraces } from '../../load/destination-capabilities.js';
import { PROJECT_COLUMN } from '../../normalize/normalize.js';
import type { StateDocument, StateStore, StateWriter } from '../../state/store.js';
import {
  traceSection,
  traceSectionName,
  owedMarkSectionName,
  type OwedMarks,
  withCompleted,
  withQueued,
  type TraceSection,
} from '../../state/books/traces.js';
import { addToLoad, traceLoadSection, type LoadSection } from './load.js';

/**
 * Per-event traces (traces read one event at a time, where the server cannot list them by time).
 *
 * Which events still owe their traces: where the destination keeps the trace book
 * (`can.traceBook`, `_query_sync_children` in DuckDB and BigQuery: `load/duckdb/trace-book.ts`,
 * `load/bigquery/trace-book.ts`), the warehouse decides: every event in the table without a final
 * read is owed (`owedQuery` below), whoever wrote the event. The drain lists them once per project
 * and run, then only within the instants of each events batch stored since (on BigQuery a listing
 * is billed by the events table's size from `--start` on; a batch's, by its days).
 * Where the state is not committed with the rows (a dry run: in memory, writing nothing) the older
 * queue below is used; nothing else does.
 *
 * The older queue: one work unit per event whose traces are due, in a state section
 * `children:<resource>` (persisted name) as `{ [project]: { pending: {id: eventMs}, done: {id: eventMs} } }`:
 * - an events walk enqueues the batch it just stored (before its own checkpoint, so a crash re-reads
 *   the batch and enqueues again, never loses it);
 * - the trace drain reads a chunk of pending units, writes their rows, then moves the chunk to
 *   `done` in one state write (a crash between the two re-reads at most one chunk);
 * - `done` keeps only units a later sync could enqueue again (events at or after the oldest instant
 *   any events stream will re-read: its settle mark or its mark − lookback), so the section stays
 *   bounded by the re-read horizon plus the backlog itself;
 * - `recheck` holds units whose answer was empty (or 404) while their event was younger than
 *   `--settle`: spans can lag their event (a tracer and a logger write apart), so such a unit is
 *   asked again once its event is `settle` old, by whichever run comes then, and is done after that.
 */

/** The backlog of one per-event resource as read from a state document (for `status` and `plan`). */
export function traceBacklog(
  doc: StateDocument,
  resource: ResourceDefinition,
): { readonly pending: Readonly<Record<string, number>>; readonly done: number; readonly recheck: number } {
  const section = traceSection(doc, traceSectionName(resource));
  const pending: Record<string, number> = {};
  let done = 0;
  let recheck = 0;
  for (const [project, units] of Object.entries(section)) {
    pending[project] = Object.keys(units.pending).length;
    done += Object.keys(units.done).length;
    recheck += Object.keys(units.recheck ?? {}).length;
  }
  return { pending, done, recheck };
}

/** Whether an event row shows traces, by the declared fields (JSON text `[]`/`{}`/`null` is empty). */
export function showsTraces(row: Row, fields: readonly string[]): boolean {
  return fields.some((f) => {
    const v = row[f];
    if (v === null || v === undefined || v === '' || v === false) return false;
    if (typeof v === 'string') return !['[]', '{}', 'null'].includes(v.trim());
    return true;
  });
}

export interface TraceQueueOptions {
  readonly traces: ResourceDefinition;
  /** The event resource (its key and time field); absent when this run reads no events. */
  readonly events?: ResourceDefinition;
  readonly selection: Exclude<TraceSelection, 'none'>;
  readonly lookbackMs: number;
  /** A unit answered empty while its event is younger than this is asked again once it is this old; 0: never. @default 0 */
  readonly settleMs?: number;
  /** Called with the units pending across projects after each change (the progress ETA of the backlog). */
  readonly onBacklog?: (pending: number) => void;
  /**
   * The warehouse's trace book: where it is kept, the owed events are derived from the
   * warehouse (`owedTraces`), not from the units this run queued; absent, the state section is
   * the queue (a destination without the book).
   */
  readonly book?: KeepsTraceBook;
  /** Events before this instant are not owed (`--start`). @default every event in the table */
  readonly startMs?: number;
}

/** Owed events read from the warehouse at once (the drain's buffer; read again when it runs out). */
const OWED_PAGE = 2000;

/** A unit of the traces: an event (id, event instant) whose traces are due. */
export interface TraceUnit {
  readonly id: string;
  readonly at: number;
}

/** The query of the owed events of a per-event resource, as the book answers it (`KeepsTraceBook`). */
export function owedQuery(
  traces: ResourceDefinition,
  events: ResourceDefinition,
  options: {
    readonly selection: Exclude<TraceSelection, 'none'>;
    readonly settleMs: number;
    readonly startMs?: number;
  },
  nowMs: number,
): OwedTraces {
  return {
    resource: traces.name,
    eventTable: events.name,
    eventKey: events.key,
    eventTime: events.cursorField ?? 'timestamp',
    nowMs,
    settleMs: options.settleMs,
    ...(options.startMs === undefined ? {} : { fromIso: new Date(options.startMs).toISOString() }),
    ...(options.selection === 'traced' ? { shownBy: traces.perParent?.shownBy ?? [] } : {}),
  };
}

/**
 * The durable queue of one per-event resource for one run: events enqueue, trace drains wait on it.
 * All changes go through `StateStore.updateSection`, applied to the state as last committed (the
 * warehouse's, or the file re-read under its write lock),
 * so concurrent events walks and drains compose.
 */
export class TraceQueue {
  private parentsRunning = 0;
  /** When the last events walk ended; the queue's creation when none has run (yet). */
  private parentsDoneAtMs: number;
  private waiters: (() => void)[] = [];
  private readonly section: string;
  /** Book mode: owed events read from the warehouse and not yet taken, per project. */
  private readonly buffer = new Map<string, Map<string, number>>();
  /** Book mode: projects whose owed events must be read (again) from the warehouse. */
  private readonly stale = new Set<string>();
  /**
   * Book mode: per project listed already, the span of event instants stored since (a batch's
   * rows): the owed events there are read into the buffer, not the whole table again (on BigQuery
   * a read of the table from `--start` on is billed by its size; this one, by the batch's days).
   */
  private readonly storedSpans = new Map<string, { fromMs: number; toMs: number }>();
  /** Book mode: projects whose owed events were read at least once this run. */
  private readonly listed = new Set<string>();
  private readonly refilling = new Map<string, Promise<void>>();
  /** Book mode: the warehouse could not say what is owed; the drain fails with it. */
  private failure: unknown;
  /** Book mode: units taken and not yet completed, per project (the progress's backlog counts them). */
  private readonly taken = new Map<string, number>();
  /**
   * Book mode: projects whose owed events the buffer holds in full (a listing shorter than its
   * page, and the batches stored since read into it): what is still owed is the buffer and the
   * units taken, without counting the table again.
   */
  private readonly listedInFull = new Set<string>();
  /**
   * Book mode: the mark of the project's last listing that held every owed event (its start), kept
   * in state (`owed-listed:<resource>`) once the drain ends with none left (`owedCount`).
   */
  private readonly listing = new Map<string, OwedMark>();
  /**
   * Book mode: events read and booked by this run, per project: a listing that began before their
   * read committed still names them, and they are not read twice.
   */
  private readonly booked = new Map<string, Set<string>>();
  /** The earliest mark of the event's streams when the run began: events stored before it were counted then. */
  private readonly countedBeforeMs: number;

  constructor(
    private readonly options: TraceQueueOptions,
    private readonly state: StateStore,
    private readonly clock: Clock,
  ) {
    this.section = traceSectionName(options.traces);
    this.parentsDoneAtMs = clock.now();
    this.countedBeforeMs = this.firstMarkMs();
  }

  /** Whether the owed events are derived from the warehouse's book (else: the state section's queue). */
  get usesBook(): boolean {
    return this.options.book !== undefined && this.options.events !== undefined;
  }

  parentStarted(): void {
    this.parentsRunning += 1;
  }

  parentDone(): void {
    this.parentsRunning -= 1;
    if (this.parentsRunning === 0) this.parentsDoneAtMs = this.clock.now();
    this.wake();
  }

  /** When every events walk of the run has ended (`undefined` while one runs). */
  parentsDoneAt(): number | undefined {
    return this.parentsRunning > 0 ? undefined : this.parentsDoneAtMs;
  }

  /**
   * Enqueue the traces of a stored batch of event rows (those selected and not yet queued or
   * done), written through `state`: the batch the rows commit with, or the store.
   */
  async enqueue(rows: readonly Row[], state: StateWriter = this.state): Promise<void> {
    const events = this.options.events;
    if (events === undefined) return;
    if (this.usesBook) return this.enqueueBooked(rows, events, state);
    const fresh = new Map<string, Map<string, number>>();
    const current = this.units();
    const shownAts: number[] = [];
    for (const row of rows) {
      const shown = showsTraces(row, this.options.traces.perParent?.shownBy ?? []);
      if (this.options.selection === 'traced' && !shown) continue;
      const project = String(row[PROJECT_COLUMN]);
      const id = String(row[events.key]);
      const known = current[project];
      if (known !== undefined && (id in known.pending || id in known.done || id in (known.recheck ?? {}))) continue;
      const at = Date.parse(String(row[events.cursorField ?? '']));
      const forProject = fresh.get(project) ?? new Map<string, number>();
      fresh.set(project, forProject);
      forProject.set(id, Number.isNaN(at) ? 0 : at);
      if (shown && !Number.isNaN(at)) shownAts.push(at);
    }
    if (fresh.size === 0) return;
    // Counted per event day: whether per-event reads can keep up, and what `traced` would save (load.ts).
    const ats = [...fresh.values()].flatMap((ids) => [...ids.values()]);
    const nowMs = this.clock.now();
    await state.updateSection<LoadSection>(traceLoadSection(this.options.traces), (load) =>
      addToLoad(load, ats, shownAts, nowMs),
    );
    await state.updateSection<TraceSection>(this.section, (section = {}) => withQueued(section, fresh));
    // Inside a batch's commit the units exist once it is durable: wake the drains then.
    state.whenCommitted(() => {
      this.reportBacklog();
      this.wake();
    });
  }

  /**
   * Book mode: the stored events are in the warehouse, so they are owed there; the drains of their
   * projects list the owed events again once the batch is durable. Only the load is counted here
   * (events at or after the stream's mark when the run began: those are new to the warehouse).
   */
  private async enqueueBooked(rows: readonly Row[], events: ResourceDefinition, state: StateWriter): Promise<void> {
    const ats: number[] = [];
    const shownAts: number[] = [];
    const projects = new Set<string>();
    const spans = new Map<string, { fromMs: number; toMs: number }>();
    for (const row of rows) {
      const shown = showsTraces(row, this.options.traces.perParent?.shownBy ?? []);
      if (this.options.selection === 'traced' && !shown) continue;
      const project = String(row[PROJECT_COLUMN]);
      projects.add(project);
      const at = Date.parse(String(row[events.cursorField ?? '']));
      if (Number.isNaN(at)) spans.set(project, { fromMs: Number.NEGATIVE_INFINITY, toMs: Number.POSITIVE_INFINITY });
      else {
        const span = spans.get(project);
        spans.set(project, { fromMs: Math.min(span?.fromMs ?? at, at), toMs: Math.max(span?.toMs ?? at, at) });
      }
      if (Number.isNaN(at) || at < this.countedBeforeMs) continue;
      ats.push(at);
      if (shown) shownAts.push(at);
    }
    if (projects.size === 0) return;
    if (ats.length > 0) {
      const nowMs = this.clock.now();
      await state.updateSection<LoadSection>(traceLoadSection(this.options.traces), (load) =>
        addToLoad(load, ats, shownAts, nowMs),
      );
    }
    state.whenCommitted(() => {
      for (const project of projects) {
        const span = spans.get(project);
        const known = this.storedSpans.get(project);
        // Not listed yet (its first listing reads them), or no instant to bound them by: list it all.
        if (!this.listed.has(project) || span === undefined || !Number.isFinite(span.fromMs)) this.stale.add(project);
        else
          this.storedSpans.set(project, {
            fromMs: Math.min(known?.fromMs ?? span.fromMs, span.fromMs),
            toMs: Math.max(known?.toMs ?? span.toMs, span.toMs),
          });
      }
      this.wake();
    });
  }

  /**
   * The drain's next units of a project: up to `n`, newest event first, none in flight; `'wait'`
   * while the owed events are being read from the warehouse (book mode), `[]` when none is owed now.
   */
  next(project: string, n: number, inFlight: ReadonlySet<string>): TraceUnit[] | 'wait' {
    if (!this.usesBook) return this.take(project, n, inFlight);
    if (this.failure !== undefined) throw this.failure;
    const buffered = this.buffer.get(project);
    const due = !this.listed.has(project) || this.stale.has(project);
    if (due && !this.refilling.has(project)) this.refill(project, inFlight);
    else if (this.storedSpans.has(project) && !this.refilling.has(project)) this.refill(project, inFlight, true);
    const units = [...(buffered ?? new Map<string, number>()).entries()]
      .filter(([id]) => !inFlight.has(id))
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? 1 : -1))
      .slice(0, n)
      .map(([id, at]) => ({ id, at }));
    if (units.length === 0) return this.refilling.has(project) ? 'wait' : [];
    for (const u of units) buffered?.delete(u.id);
    this.taken.set(project, (this.taken.get(project) ?? 0) + units.length);
    return units;
  }

  /**
   * Read the project's owed events from the warehouse into the buffer (in the background; wakes
   * the drain): all of them (the buffer replaced), or, `stored`, those among the event instants
   * stored since it was listed (added to the buffer).
   */
  private refill(project: string, inFlight: ReadonlySet<string>, stored = false): void {
    const book = this.options.book as KeepsTraceBook;
    const events = this.options.events as ResourceDefinition;
    const span = this.storedSpans.get(project);
    this.storedSpans.delete(project);
    if (!stored) this.stale.delete(project);
    this.listed.add(project);
    const limit = OWED_PAGE + inFlight.size;
    const startedAt = this.clock.now();
    const query = owedQuery(this.options.traces, events, this.queryOptions(), startedAt);
    // After a complete listing the destination may read only what changed since (BigQuery).
    const mark = stored ? undefined : this.marks()[project];
    const full = mark === undefined || startedAt - mark.fullAtMs >= OWED_FULL_EVERY_MS;
    const startMs = this.options.startMs ?? Number.NEGATIVE_INFINITY;
    const bounds =
      stored && span !== undefined
        ? {
            fromIso: new Date(Math.max(startMs, span.fromMs)).toISOString(),
            toIso: new Date(span.toMs + 1).toISOString(),
          }
        : {};
    const done = book
      .owedTraces({ ...query, ...bounds, ...(full ? {} : { listedThrough: mark }), project, limit })
      .then((owed) => {
        const fresh = stored ? (this.buffer.get(project) ?? new Map<string, number>()) : new Map<string, number>();
        const booked = this.booked.get(project);
        for (const u of owed) if (!inFlight.has(u.id) && booked?.has(u.id) !== true) fresh.set(u.id, u.at);
        this.buffer.set(project, fresh);
        // A full page: more are owed than were read; read again once these are taken.
        if (owed.length >= limit) {
          this.stale.add(project);
          this.listedInFull.delete(project);
          this.listing.delete(project);
        } else if (!stored) {
          this.listedInFull.add(project);
          this.listing.set(project, { listedAtMs: startedAt, fullAtMs: full ? startedAt : mark.fullAtMs });
        }
      })
      .finally(() => {
        this.refilling.delete(project);
        this.reportBacklog();
        this.wake();
      });
    this.refilling.set(project, done);
    // A failed read of the owed set fails the drain when it asks next.
    done.catch((error: unknown) => {
      this.failure = error;
    });
  }

  private queryOptions(): { selection: Exclude<TraceSelection, 'none'>; settleMs: number; startMs?: number } {
    return {
      selection: this.options.selection,
      settleMs: this.options.settleMs ?? 0,
      ...(this.options.startMs === undefined ? {} : { startMs: this.options.startMs }),
    };
  }

  /**
   * Events of a project still owed: the queue's pending, or in book mode what the buffer and the
   * units in flight hold when it holds them all (nothing stale or still to be read), else the
   * warehouse's count (on BigQuery a query billed by the events table's size: asked only then).
   */
  async owedCount(project: string): Promise<number> {
    if (!this.usesBook) return this.pendingCount(project);
    if (this.failure === undefined && this.heldInFull(project)) {
      const left = (this.buffer.get(project)?.size ?? 0) + (this.taken.get(project) ?? 0);
      // Drained dry: every event owed at the listing's start is booked (a chunk's reads count as
      // taken until its commit is durable), so the next listing may read only what changed since.
      const listing = this.listing.get(project);
      if (left === 0 && listing !== undefined) {
        this.listing.delete(project);
        await this.state.updateSection<OwedMarks>(owedMarkSectionName(this.options.traces), (marks = {}) => ({
          ...marks,
          [project]: listing,
        }));
      }
      return left;
    }
    const book = this.options.book as KeepsTraceBook;
    const query = owedQuery(
      this.options.traces,
      this.options.events as ResourceDefinition,
      this.queryOptions(),
      this.clock.now(),
    );
    return (await book.countOwedTraces(query))[project] ?? 0;
  }

  /** Whether the buffer (and the units taken) hold every owed event of `project` now. */
  private heldInFull(project: string): boolean {
    return (
      this.listedInFull.has(project) &&
      !this.stale.has(project) &&
      !this.storedSpans.has(project) &&
      !this.refilling.has(project)
    );
  }

  /** Units pending across projects, to `onBacklog`. */
  private reportBacklog(): void {
    const report = this.options.onBacklog;
    if (report === undefined) return;
    if (this.usesBook) {
      let buffered = 0;
      for (const units of this.buffer.values()) buffered += units.size;
      for (const n of this.taken.values()) buffered += n;
      report(buffered);
      return;
    }
    let pending = 0;
    for (const units of Object.values(this.units())) pending += Object.keys(units.pending).length;
    report(pending);
  }

  /** Up to `n` pending units of a project (and rechecks now due), oldest event first, skipping those in flight. */
  take(project: string, n: number, inFlight: ReadonlySet<string>): { readonly id: string; readonly at: number }[] {
    const units = this.units()[project];
    const dueBefore = this.clock.now() - (this.options.settleMs ?? 0);
    const due = Object.entries(units?.recheck ?? {}).filter(([, at]) => at <= dueBefore);
    return [...Object.entries(units?.pending ?? {}), ...due]
      .filter(([id]) => !inFlight.has(id))
      .sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : 1))
      .slice(0, n)
      .map(([id, at]) => ({ id, at }));
  }

  pendingCount(project: string): number {
    return Object.keys(this.units()[project]?.pending ?? {}).length;
  }

  /** Whether a unit whose answer was empty is asked again later: its event is younger than `settle`. */
  recheckLater(unit: { readonly at: number }): boolean {
    const settleMs = this.options.settleMs ?? 0;
    return settleMs > 0 && unit.at > this.clock.now() - settleMs;
  }

  /**
   * Mark units done (their rows are stored), or to be asked again at settle (`later`), pruning done
   * units no later sync can enqueue again; written through `state` (the chunk's batch, or the store).
   */
  async complete(
    project: string,
    units: readonly { readonly id: string; readonly at: number }[],
    later: ReadonlySet<string> = new Set(),
    state: StateWriter = this.state,
    /** Traces each unit answered (book mode: booked with the read). */
    answered: ReadonlyMap<string, number> = new Map(),
  ): Promise<void> {
    if (this.usesBook) return this.completeBooked(project, units, later, state, answered);
    const horizonMs = this.horizonMs();
    if (later.size > 0) {
      // A recheck is one more request for its event: counted in the daily load like a queued one.
      const laterAts = units.filter((u) => later.has(u.id)).map((u) => u.at);
      const nowMs = this.clock.now();
      await state.updateSection<LoadSection>(traceLoadSection(this.options.traces), (load) =>
        addToLoad(load, laterAts, [], nowMs),
      );
    }
    await state.updateSection<TraceSection>(this.section, (section = {}) =>
      withCompleted(section, project, units, later, horizonMs),
    );
    // Inside a batch's commit the units are done once it is durable: count them then.
    state.whenCommitted(() => this.reportBacklog());
  }

  /** Book mode: each read booked in the chunk's commit (an empty answer while young is booked too: it is owed again at settle). */
  private async completeBooked(
    project: string,
    units: readonly TraceUnit[],
    later: ReadonlySet<string>,
    state: StateWriter,
    answered: ReadonlyMap<string, number>,
  ): Promise<void> {
    const nowMs = this.clock.now();
    const readAt = new Date(nowMs).toISOString();
    const reads: TraceRead[] = units.map((u) => ({
      resource: this.options.traces.name,
      projectId: project,
      eventId: u.id,
      eventAt: new Date(u.at).toISOString(),
      traces: answered.get(u.id) ?? 0,
      readAt,
    }));
    if (later.size > 0) {
      // A recheck is one more request for its event: counted in the daily load like a queued one.
      const laterAts = units.filter((u) => later.has(u.id)).map((u) => u.at);
      await state.updateSection<LoadSection>(traceLoadSection(this.options.traces), (load) =>
        addToLoad(load, laterAts, [], nowMs),
      );
    }
    await state.recordTraceReads(reads);
    state.whenCommitted(() => {
      this.taken.set(project, Math.max(0, (this.taken.get(project) ?? 0) - units.length));
      const booked = this.booked.get(project) ?? new Set<string>();
      for (const u of units) booked.add(u.id);
      this.booked.set(project, booked);
      this.reportBacklog();
    });
  }

  /** Resolves at the next enqueue or event end. */
  changed(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  private units(): TraceSection {
    return traceSection(this.state.document, this.section);
  }

  /** The owed listings' marks, per project (`owed-listed:<resource>`). */
  private marks(): OwedMarks {
    return (this.state.document.sections[owedMarkSectionName(this.options.traces)] ?? {}) as OwedMarks;
  }

  /** The earliest mark of the event's streams (−∞ when one has none: a first sync counts every event). */
  private firstMarkMs(): number {
    const prefix = `${this.options.traces.perParent?.parent ?? ''}:`;
    let first = Number.POSITIVE_INFINITY;
    for (const [key, st] of Object.entries(this.state.document.streams)) {
      if (!key.startsWith(prefix)) continue;
      if (st.mark === undefined) return Number.NEGATIVE_INFINITY;
      first = Math.min(first, Date.parse(st.mark));
    }
    return first === Number.POSITIVE_INFINITY ? Number.NEGATIVE_INFINITY : first;
  }

  /** The oldest event instant any events stream re-reads: its settle mark, or its mark − lookback. */
  private horizonMs(): number {
    let horizon = Number.POSITIVE_INFINITY;
    const prefix = `${this.options.traces.perParent?.parent ?? ''}:`;
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

/** Chunks of per-event reads at once, at most, when the caller gives no bound. */
export const DEFAULT_TRACE_CONCURRENCY = 8;
