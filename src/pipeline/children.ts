import type { ChildSelection, Clock, ResourceDefinition, Row } from '../core/types.js';
import { PROJECT_COLUMN } from '../normalize/normalize.js';
import type { StateDocument, StateStore, StateWriter } from '../state/store.js';
import {
  childSection,
  childSectionName,
  withCompleted,
  withQueued,
  type ChildSection,
} from '../state/books/children.js';
import { addToLoad, childLoadSection, type LoadSection } from './children-load.js';

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
 *   bounded by the re-read horizon plus the backlog itself;
 * - `recheck` holds units whose answer was empty (or 404) while their parent was younger than
 *   `--settle`: spans can lag their event (a tracer and a logger write apart), so such a unit is
 *   asked again once its parent is `settle` old, by whichever run comes then, and is done after that.
 */

/** The backlog of one child resource as read from a state document (for `status` and `plan`). */
export function childBacklog(
  doc: StateDocument,
  resource: ResourceDefinition,
): { readonly pending: Readonly<Record<string, number>>; readonly done: number; readonly recheck: number } {
  const section = childSection(doc, childSectionName(resource));
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
  /** A unit answered empty while its parent is younger than this is asked again once it is this old; 0: never. @default 0 */
  readonly settleMs?: number;
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

  /**
   * Enqueue the children of a stored batch of parent rows (those selected and not yet queued or
   * done), written through `state`: the batch the rows commit with, or the store.
   */
  async enqueue(rows: readonly Row[], state: StateWriter = this.state): Promise<void> {
    const parent = this.options.parent;
    if (parent === undefined) return;
    const fresh = new Map<string, Map<string, number>>();
    const current = this.units();
    const shownAts: number[] = [];
    for (const row of rows) {
      const shown = showsChildren(row, this.options.child.perParent?.shownBy ?? []);
      if (this.options.selection === 'traced' && !shown) continue;
      const project = String(row[PROJECT_COLUMN]);
      const id = String(row[parent.key]);
      const known = current[project];
      if (known !== undefined && (id in known.pending || id in known.done || id in (known.recheck ?? {}))) continue;
      const at = Date.parse(String(row[parent.cursorField ?? '']));
      const forProject = fresh.get(project) ?? new Map<string, number>();
      fresh.set(project, forProject);
      forProject.set(id, Number.isNaN(at) ? 0 : at);
      if (shown && !Number.isNaN(at)) shownAts.push(at);
    }
    if (fresh.size === 0) return;
    // Counted per parent day: whether per-parent reads can keep up, and what `traced` would save (children-load.ts).
    const ats = [...fresh.values()].flatMap((ids) => [...ids.values()]);
    const nowMs = this.clock.now();
    await state.updateSection<LoadSection>(childLoadSection(this.options.child), (load) =>
      addToLoad(load, ats, shownAts, nowMs),
    );
    await state.updateSection<ChildSection>(this.section, (section = {}) => withQueued(section, fresh));
    // Inside a batch's commit the units exist once it is durable: wake the drains then.
    state.whenCommitted(() => {
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

  /** Up to `n` pending units of a project (and rechecks now due), oldest parent first, skipping those in flight. */
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

  /** Whether a unit whose answer was empty is asked again later: its parent is younger than `settle`. */
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
  ): Promise<void> {
    const horizonMs = this.horizonMs();
    if (later.size > 0) {
      // A recheck is one more request for its parent: counted in the daily load like a queued one.
      const laterAts = units.filter((u) => later.has(u.id)).map((u) => u.at);
      const nowMs = this.clock.now();
      await state.updateSection<LoadSection>(childLoadSection(this.options.child), (load) =>
        addToLoad(load, laterAts, [], nowMs),
      );
    }
    await state.updateSection<ChildSection>(this.section, (section = {}) =>
      withCompleted(section, project, units, later, horizonMs),
    );
    // Inside a batch's commit the units are done once it is durable: count them then.
    state.whenCommitted(() => this.reportBacklog());
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
    return childSection(this.state.document, this.section);
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

/** Chunks of per-parent reads at once, at most, when the caller gives no bound. */
export const DEFAULT_CHILD_CONCURRENCY = 8;
