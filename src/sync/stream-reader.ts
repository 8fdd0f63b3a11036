import type { ProjectScope, ResourceDefinition, Row } from '../core/types.js';
import type { TimeWindow } from '../extract/windows.js';
import type { Page } from '../extract/paginate.js';
import type { CallContext } from '../http/client.js';
import { ConcurrencyController } from './concurrency.js';
import { RowBudget } from './row-budget.js';
import type { SchemaTracker } from '../normalize/normalize.js';
import { streamKey } from '../state/store.js';
import { LatenessHistogram } from './lateness.js';
import {
  MIN_STEAL_PAGES,
  partPagesLeft,
  planSplit,
  resplit,
  stealCut,
  type FirstPage,
  type SplitPlan,
} from './split/plan.js';
import type { SyncRun } from './context.js';
import type { Book } from '../state/books/book.js';
import { GroupCommit } from './group-commit.js';
import {
  newSplit,
  nextSyncUnits,
  resumedSettleUnit,
  settleWindow,
  syncBook,
  withPartCut,
  type SyncUnit,
} from '../state/books/sync.js';
import type { SubWalk, UnitSource } from './units.js';
import { endOf, WalkBounds, walkWindow, type WalkParams } from './walk.js';

/**
 * The units of one sync stream (`stream.ts` runs them in its frame): produced from state (the
 * window state says is open, a split's parts with tail work-stealing, the settle re-reads),
 * recorded in it through the book, read by walks.
 */

/** What the run hands one sync stream besides its context: its callbacks. */
export interface StreamHooks {
  /** Called with project slugs found in `project_id` of all-projects reads. */
  readonly onProjects?: WalkParams['onProjects'];
  /** Called after each page (progress display). */
  readonly onPage?: WalkParams['onPage'];
  /** Called with each stored batch before its checkpoint (per-event traces enqueue from it). */
  readonly onStored?: WalkParams['onStored'];
}

/** A split's part being walked, and its live range. */
interface LivePart {
  readonly unit: SyncUnit & { kind: 'part' };
  readonly bounds: WalkBounds;
}

export class UnitReader {
  readonly controller: ConcurrencyController;
  /** What the stream's walks did, added as each ends (`walk`), and the windows it started. */
  private readonly tally = { rows: 0, pages: 0, windows: 0 };
  readonly lateness: LatenessHistogram | undefined;
  /** The split this run planned (a resumed one has none: its sub-windows are not cut again). */
  private planned: SplitPlan | undefined;
  /** Where this run's windows started reading (the settle re-read stops there). */
  private readFromMs: number | undefined;
  private readonly key: string;
  private readonly maxParts: number;
  private readonly onStored: WalkParams['onStored'];
  /** Where this run's windows end and how far they reach back (the sync book's window options). */
  private readonly windows: { readonly runStartMs: number; readonly lookbackMs: number; readonly startMs?: number };
  private readonly book: Book<SyncUnit>;
  /** The split's parts being walked now, each with its live range (tail work-stealing). */
  private readonly live = new Set<LivePart>();
  /** Units that are the far side of a cut (see `steal`), until taken. */
  private readonly farSides = new WeakSet<SyncUnit>();
  /** A cut being written to state: no other starts meanwhile. */
  private stealing: Promise<void> | undefined;
  private stealFailure: { readonly error: unknown } | undefined;

  constructor(
    private readonly resource: ResourceDefinition,
    private readonly scope: ProjectScope,
    private readonly tracker: SchemaTracker,
    private readonly run: SyncRun,
    private readonly hooks: StreamHooks,
    private readonly ctx: CallContext,
    private readonly lists?: WalkParams['lists'],
  ) {
    this.key = streamKey(resource.name, scope.key);
    const { settings } = run;
    this.maxParts = settings.concurrency;
    this.windows = {
      runStartMs: run.runStartMs,
      lookbackMs: settings.lookbackMs,
      ...(settings.startMs === undefined ? {} : { startMs: settings.startMs }),
    };
    this.controller = new ConcurrencyController({ max: this.maxParts, now: () => run.clock.now() });
    const lateness = resource.arrivalField === undefined ? undefined : new LatenessHistogram(resource);
    this.lateness = lateness;
    this.onStored =
      lateness === undefined && hooks.onStored === undefined
        ? undefined
        : async (rows: readonly Row[], state): Promise<void> => {
            lateness?.add(rows);
            await hooks.onStored?.(rows, state);
          };
    this.book = syncBook(run.state, this.key);
    // Two pages at least, so a part can read one while another is written.
    this.rowBudget = new RowBudget(Math.max(settings.batchRows, 2 * resource.maxPageSize));
    this.commits = new GroupCommit({
      tracker,
      batchRows: run.settings.batchRows,
      batchBytes: run.settings.batchBytes,
      deps: run,
    });
  }

  /** The commits of this stream's sub-walks, each holding the batches handed over meanwhile (`group-commit.ts`). */
  private readonly commits: GroupCommit;
  /** The rows this stream's sub-walks hold together (`row-budget.ts`). */
  private readonly rowBudget: RowBudget;

  /**
   * The window units, from state: the parts of a split in state (at once, as many as the controller
   * allows; a re-split hands its sub-windows back to the list), else the next window (alone). A
   * window's unit may end by planning a split: the split's parts come next.
   */
  windowUnits(): UnitSource<SyncUnit> {
    /** The split's parts not yet started (units handed back are taken first); `undefined`: no split under way. */
    let parts: SyncUnit[] | undefined;
    let partCount = 0;
    return {
      take: (running) => {
        if (parts !== undefined) {
          const part = parts.shift();
          if (part !== undefined) return part;
          // No part left to start while slots are free: the far half of a long running walk.
          const list = parts;
          const stolen = this.steal((far) => list.unshift(far));
          if (stolen !== undefined) return stolen;
          if (running > 0) return undefined;
          this.run.logger.debug(
            {
              resource: this.resource.name,
              project: this.scope.key,
              parts: partCount,
              peak: this.controller.peak,
              limit: this.controller.limit,
            },
            'split walked',
          );
          parts = undefined; // walked: state says what is left
        }
        if (running > 0) return undefined;
        const st = this.run.state.stream(this.key);
        const next = nextSyncUnits(st, this.windows);
        if (next?.kind === 'split') {
          this.tally.windows += 1;
          partCount = next.parts.length;
          this.readFrom(Date.parse(st.split?.from ?? ''));
          parts = next.parts;
          return parts.shift();
        }
        if (
          next === undefined ||
          (this.run.settings.sampleRows !== undefined && this.tally.rows >= this.run.settings.sampleRows)
        )
          return undefined;
        this.readFrom(next.unit.window.fromMs);
        return next.unit;
      },
      putBack: (more) => parts?.unshift(...more),
      changed: () => this.stealing ?? Promise.resolve(),
      // The tail (every planned part started; what is queued is far sides of cuts) while the walks
      // wait on the network, not the budget: room up to --concurrency, so a running walk can be cut
      // and its far side walked at once, whatever the limit shrank to while the budget bound (it
      // follows by one walk a second).
      room: () =>
        parts !== undefined &&
        this.live.size > 0 &&
        this.controller.networkBound &&
        parts.every((p) => this.farSides.has(p))
          ? this.controller.max
          : 0,
    };
  }

  /**
   * Tail work-stealing: when the split has no part left to start but a running walk has many pages
   * left, cut what it has left in two (`stealCut`): the walk keeps the near side, the far side
   * becomes a part (`withPartCut`, one state write) handed to `start` once durable. `'wait'` while
   * a cut is being written; `undefined` when none is worth it: no walk with `MIN_STEAL_PAGES` left,
   * or the endpoint's per-minute budget has no room for the request a cut costs (past a multiple
   * of 400 a page can cost a whole minute window). A failed write fails the stream (thrown at the
   * next take).
   */
  private steal(start: (far: SyncUnit) => void): 'wait' | undefined {
    if (this.stealFailure !== undefined) throw this.stealFailure.error;
    if (this.stealing !== undefined) return 'wait';
    let best: { walk: LivePart; left: NonNullable<ReturnType<WalkBounds['left']>> } | undefined;
    let pagesLeft = 0;
    for (const walk of this.live) {
      const left = walk.bounds.left();
      if (left === undefined) continue;
      pagesLeft += left.pages;
      if (best === undefined || left.pages > best.left.pages) best = { walk, left };
    }
    if (best === undefined || best.left.pages < MIN_STEAL_PAGES) return undefined;
    // A request more can cost a whole minute window where the endpoint's minute budget binds: never
    // in a split of a minute's budget or more (its cuts were placed on whole pages for that), and
    // elsewhere only with room for twice the pages the walks seem to have left (a guess from density).
    const plan = this.planned;
    if (plan !== undefined && plan.pagesPerPart * plan.parts.length >= this.run.settings.limits.maxRpm)
      return undefined;
    if (this.run.client.headroom(this.resource.path) < 2 * Math.ceil(pagesLeft) + MIN_STEAL_PAGES) return undefined;
    const at = stealCut(best.left.range, this.planned?.buckets);
    if (at === undefined) return undefined;
    const { walk, left } = best;
    // The walk's checkpoints find its part by the edge it keeps from now on, before and after the cut lands.
    const anchor = left.direction === 'desc' ? 'to' : 'from';
    const ref = { part: isoWindow(walk.unit.window), anchor } as const;
    // A cut that would change nothing in state (the walk's part is gone: stored to its end, not yet
    // released) is not worth a write: asked again at every take, that write of nothing looped.
    const current = this.run.state.stream(this.key);
    if (withPartCut(current, ref, at).split?.parts.length === current.split?.parts.length) return undefined;
    walk.bounds.anchor = anchor;
    const far: TimeWindow =
      left.direction === 'desc'
        ? { fromMs: walk.bounds.window.fromMs, toMs: at }
        : { fromMs: at, toMs: walk.bounds.window.toMs };
    this.stealing = this.run.state
      .updateStream(this.key, (s) => withPartCut(s, ref, at))
      .then(() => {
        // Not in state: the walk was stored to its end before the cut landed (it read the far side too).
        const farIso = isoWindow(far);
        if (
          !(
            this.run.state
              .stream(this.key)
              .split?.parts.some((p) => p.from === farIso.from && p.to === farIso.to && p.cursor === undefined) ?? false
          )
        )
          return;
        walk.bounds.cut(at, left.direction);
        this.run.logger.debug(
          {
            resource: this.resource.name,
            project: this.scope.key,
            pagesLeft: Math.round(left.pages),
            at: new Date(at).toISOString(),
          },
          'running sub-window cut: its far side is read by another walk',
        );
        const unit: SyncUnit = { kind: 'part', window: far, split: walk.unit.split };
        this.farSides.add(unit);
        start(unit);
      })
      .catch((error: unknown) => {
        this.stealFailure = { error };
      })
      .finally(() => {
        this.stealing = undefined;
      });
    return 'wait';
  }

  /** The settle units: a re-read a killed run left, then this run's own (or only the settle mark's move: `settledTo`). */
  settleUnits(
    markBefore: string | undefined,
    settleMs: number,
  ): UnitSource<SyncUnit> & { settledTo(): number | undefined } {
    let step = 0;
    let settledTo: number | undefined;
    return {
      take: (running) => {
        if (running > 0) return undefined;
        if (step === 0) {
          step = 1;
          const resumed = resumedSettleUnit(this.run.state.stream(this.key));
          if (resumed !== undefined) return resumed;
        }
        if (step === 1) {
          step = 2;
          const next = settleWindow(
            this.run.state.stream(this.key),
            { ...this.windows, settleMs },
            markBefore,
            this.readFromMs,
          );
          if (next.window !== undefined) return { kind: 'settle', window: next.window, settledTo: next.settledTo };
          settledTo = next.settledTo;
        }
        return undefined;
      },
      settledTo: () => settledTo,
    };
  }

  /** Read one unit: a window (which may turn into a split), a settle re-read, or a split's part. */
  async read(unit: SyncUnit, sub: SubWalk): Promise<SyncUnit[] | undefined> {
    if (unit.kind === 'part') return this.readPart(unit, sub);
    if (unit.kind === 'settle') {
      await this.walk(unit);
      return;
    }
    const { resource, scope, run, maxParts } = this;
    const { settings } = run;
    const st = run.state.stream(this.key);
    // A fresh window's first page says whether it is large enough to read split (then the walk is
    // abandoned before storing anything, and the split planned). A dry run reads a sample: one
    // walk, never a split.
    const fresh = unit.cursor === undefined && st.pending === undefined && settings.sampleRows === undefined;
    const splits = fresh && resource.split !== undefined && maxParts >= 2;
    // A first sync is large but for the smallest accounts: its plan needs no first page (which
    // would be read twice), where counts exist.
    const direct =
      splits && st.mark === undefined && (resource.split?.exact === true || resource.split?.count !== undefined);
    if (direct) {
      const plan = await planSplit(
        resource,
        scope,
        unit.window,
        undefined,
        maxParts,
        { ...run, limits: settings.limits },
        this.ctx,
      );
      this.logSplit(plan, undefined);
      if (plan !== undefined) {
        await this.recordSplit(unit.window, plan);
        return;
      }
    }
    const sized =
      splits && !direct
        ? this.firstPageHook(this.ctx, async (first) => {
            const plan = await planSplit(
              resource,
              scope,
              unit.window,
              first,
              maxParts,
              { ...run, limits: settings.limits },
              this.ctx,
            );
            this.logSplit(plan, first);
            if (plan === undefined) return false;
            await this.recordSplit(unit.window, plan);
            return true;
          })
        : undefined;
    await this.walk(unit, sized);
  }

  /** The sub-windows are durable before any is read: a kill resumes the same split. */
  private async recordSplit(window: TimeWindow, plan: SplitPlan): Promise<void> {
    await this.run.state.updateStream(this.key, (s) => ({ ...s, split: newSplit(window, plan.parts) }));
    this.planned = plan;
    // The plan cut twice the walks that fill the budget at the latency it saw: start with that many.
    this.controller.atLeast(Math.ceil(plan.parts.length / 2));
  }

  /**
   * One walk of a unit, recorded through the book: a window or settle re-read on the stream's own
   * counters (or everything, for a full-refresh resource: no unit); a split's part on its own.
   * What the walk did is added to the stream's counts when it ends, however it ends.
   */
  async walk(
    unit: SyncUnit | undefined,
    onFirstPage?: (page: Page) => Promise<boolean>,
    sub?: SubWalk,
    bounds?: WalkBounds,
  ): Promise<'done' | 'abandoned'> {
    const { resource, hooks } = this;
    const { settings } = this.run;
    // A part: rows held by all sub-walks together stay about `batchRows`, as in a backfill. A part
    // on another field than the cursor's filters the whole split window on that field.
    const share = sub === undefined ? 1 : this.maxParts;
    const onField =
      unit?.kind === 'part' && resource.split?.partGte !== undefined && resource.split.partLt !== undefined;
    if (sub === undefined) this.tally.windows += 1;
    const walked = await walkWindow(
      {
        resource,
        scope: this.scope,
        tracker: this.tracker,
        window: onField ? unit.split : unit?.window,
        partFilter: onField
          ? { gte: resource.split?.partGte as string, lt: resource.split?.partLt as string, window: unit.window }
          : undefined,
        startCursor: unit?.cursor,
        onFirstPage,
        bounds,
        batchRows: sub === undefined ? settings.batchRows : Math.max(1, Math.ceil(settings.batchRows / share)),
        batchBytes: sub === undefined ? settings.batchBytes : Math.max(1, Math.ceil(settings.batchBytes / share)),
        // A sample is the stream's: a walk stops at what the walks before it left of it.
        sampleRows: settings.sampleRows === undefined ? undefined : settings.sampleRows - this.tally.rows,
        ctx: sub === undefined || unit?.kind !== 'part' ? (sub?.ctx ?? this.ctx) : this.partContext(unit, sub, bounds),
        onProjects: hooks.onProjects,
        onPage:
          sub === undefined
            ? hooks.onPage
            : (page) => {
                sub.onPage();
                hooks.onPage?.(page);
              },
        onStored: this.onStored,
        ...(sub === undefined
          ? {}
          : { commitBatch: (rows, changes) => this.commits.commit(rows, changes), rowBudget: this.rowBudget }),
        lists: this.lists,
        checkpoint: (nextCursor, state) =>
          unit === undefined ? Promise.resolve() : this.book.checkpoint(unit, nextCursor, state),
        onCursorRejected: () => (unit === undefined ? Promise.resolve() : this.book.cursorRejected(unit)),
      },
      this.run,
    );
    this.tally.rows += walked.rows;
    this.tally.pages += walked.pages;
    return endOf(walked);
  }

  /**
   * A part's call context: it says how many pages it has left (`partPagesLeft`), so the scheduler
   * serves the stream's longest walks first and they end together instead of the largest alone at
   * the end, with the budget idle. Only with the plan in memory (a resumed split says nothing: its
   * walks take turns as they come).
   */
  private partContext(part: SyncUnit & { kind: 'part' }, sub: SubWalk, bounds: WalkBounds | undefined): CallContext {
    const plan = this.planned;
    if (plan === undefined) return sub.ctx;
    const stats = sub.ctx.stats;
    const start = stats.requests;
    return {
      ...sub.ctx,
      left: () =>
        partPagesLeft(
          this.resource,
          plan,
          bounds?.window ?? part.window,
          stats.requests - start,
          bounds?.left()?.range,
        ),
    };
  }

  /** A split's part; a fresh one (on the cursor field, balanced by a proxy) far larger than its share is cut again (handed back). */
  private async readPart(part: SyncUnit & { kind: 'part' }, sub: SubWalk): Promise<SyncUnit[] | undefined> {
    const { resource } = this;
    let replaced: TimeWindow[] | undefined;
    const plan = this.planned;
    const onField = resource.split?.partGte !== undefined && resource.split.partLt !== undefined;
    const onFirstPage =
      part.cursor !== undefined || onField || plan === undefined || resource.split?.exact !== false
        ? undefined
        : this.firstPageHook(sub.ctx, async (first) => {
            replaced = resplit(resource, part.window, first, plan, this.maxParts);
            if (replaced === undefined) return false;
            await this.book.replace?.(part, replaced);
            return true;
          });
    // A part on the cursor field may be cut while it runs (its far side handed to a free slot).
    const live: LivePart | undefined = onField
      ? undefined
      : { unit: part, bounds: new WalkBounds(part.window, resource) };
    if (live !== undefined) this.live.add(live);
    let ended: 'done' | 'abandoned';
    try {
      // A part that may be cut: its checkpoints find it by the edge it keeps, as it is when each change is applied.
      const walked = live === undefined ? part : { ...part, anchor: () => live.bounds.anchor };
      ended = await this.walk(walked, onFirstPage, sub, live?.bounds);
    } finally {
      if (live !== undefined) this.live.delete(live);
    }
    return ended === 'abandoned' && replaced !== undefined
      ? replaced.map((window) => ({ kind: 'part', window, split: part.split }))
      : undefined;
  }

  /** What the stream's walks did so far: rows stored, pages read, windows started. */
  get counts(): { readonly rows: number; readonly pages: number; readonly windows: number } {
    return { ...this.tally };
  }

  private readFrom(ms: number): void {
    this.readFromMs = Math.min(this.readFromMs ?? ms, ms);
  }

  private logSplit(plan: SplitPlan | undefined, first: FirstPage | undefined): void {
    this.run.logger.debug(
      {
        resource: this.resource.name,
        project: this.scope.key,
        latencyMs: first?.latencyMs,
        parts: plan?.parts.length ?? 1,
        pagesPerPart: plan?.pagesPerPart,
      },
      plan === undefined ? 'window read in one walk' : 'window read split',
    );
  }

  /** The first-page hook of a walk: measures the page's answer time (budget queueing excluded). */
  private firstPageHook(
    walkCtx: CallContext,
    decide: (first: FirstPage) => Promise<boolean>,
  ): (page: Page) => Promise<boolean> {
    const startedAt = this.run.clock.now();
    const waitedBefore = walkCtx.stats.waitedMs;
    return (page) =>
      decide({
        ...page,
        latencyMs: Math.max(0, this.run.clock.now() - startedAt - (walkCtx.stats.waitedMs - waitedBefore)),
      });
  }
}

const isoWindow = (w: TimeWindow): { from: string; to: string } => ({
  from: new Date(w.fromMs).toISOString(),
  to: new Date(w.toMs).toISOString(),
});
