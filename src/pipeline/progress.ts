import type { Clock } from '../core/types.js';

/**
 * Progress of a run per resource: rows, pages, windows done of total, rows per second and an ETA.
 * Pure counting; the display (a live TTY view or periodic log lines) lives in `commands/`.
 *
 * The ETA comes from the plan: with a planned page count, a resource's expected total time is the
 * larger of the plan's minimum time (the floor of the rate limits) and the time so far divided by
 * the share of planned pages read. Early in a run the floor dominates (the first burst is fast, the
 * minute limit then binds), later the observed pace does.
 */

/** What the plan expects of one resource (any field may be unknown). */
export interface ResourcePlan {
  readonly rows?: number;
  readonly pages?: number;
  /** Least time the limits allow for its requests, in seconds. */
  readonly minimumSeconds?: number;
}

export interface ProgressPlan {
  readonly resources: Readonly<Record<string, ResourcePlan>>;
  /** Least time the limits allow for every planned request together, in seconds. */
  readonly minimumSeconds?: number;
}

export interface ResourceProgress {
  readonly resource: string;
  readonly rows: number;
  readonly plannedRows?: number;
  readonly pages: number;
  readonly plannedPages?: number;
  readonly windowsDone: number;
  readonly windowsTotal: number;
  readonly rowsPerSecond: number;
  /** Seconds left, when it can be told. */
  readonly etaSeconds?: number;
  readonly done: boolean;
}

export interface ProgressSnapshot {
  readonly elapsedSeconds: number;
  readonly resources: readonly ResourceProgress[];
  /** Time left for the resources whose ETA is known (the longest of them). */
  readonly etaSeconds?: number;
  /** Some resources have no estimate: the run may take longer than `etaSeconds`. */
  readonly etaIsLowerBound: boolean;
}

interface Counter {
  rows: number;
  pages: number;
  windowsDone: number;
  windowsTotal: number;
  /** Windows done before this run (ledger): they took none of its time. */
  skipped: number;
  firstPageAt?: number;
}

export class ProgressTracker {
  private readonly clock: Clock;
  private startedAt: number;
  private plan: ProgressPlan | undefined;
  private readonly counters = new Map<string, Counter>();

  constructor(clock: Clock, plan?: ProgressPlan) {
    this.clock = clock;
    this.startedAt = clock.now();
    this.plan = plan;
  }

  setPlan(plan: ProgressPlan | undefined): void {
    this.plan = plan;
  }

  /** The run itself starts now (after opening files and planning): elapsed time and ETAs count from here. */
  markStart(): void {
    this.startedAt = this.clock.now();
  }

  /** `count` more windows for `resource`, `skipped` of them already done. */
  addWindows(resource: string, count: number, skipped = 0): void {
    const c = this.counter(resource);
    c.windowsTotal += count;
    c.windowsDone += skipped;
    c.skipped += skipped;
  }

  /** Take back a window that will not run (a walk replaced by per-project walks). */
  removeWindow(resource: string): void {
    const c = this.counter(resource);
    c.windowsTotal = Math.max(0, c.windowsTotal - 1);
  }

  windowDone(resource: string): void {
    this.counter(resource).windowsDone += 1;
  }

  page(resource: string, rowsStored: number): void {
    const c = this.counter(resource);
    c.pages += 1;
    c.rows += rowsStored;
    c.firstPageAt ??= this.clock.now();
  }

  snapshot(): ProgressSnapshot {
    const now = this.clock.now();
    const elapsed = (now - this.startedAt) / 1000;
    const names = new Set([...this.counters.keys(), ...Object.keys(this.plan?.resources ?? {})]);
    const resources: ResourceProgress[] = [];
    for (const resource of names) {
      const c = this.counters.get(resource) ?? { rows: 0, pages: 0, windowsDone: 0, windowsTotal: 0, skipped: 0 };
      const planned = this.plan?.resources[resource];
      const done = c.windowsTotal > 0 && c.windowsDone >= c.windowsTotal;
      const since = c.firstPageAt === undefined ? 0 : (now - c.firstPageAt) / 1000;
      resources.push({
        resource,
        rows: c.rows,
        plannedRows: planned?.rows,
        pages: c.pages,
        plannedPages: planned?.pages,
        windowsDone: c.windowsDone,
        windowsTotal: c.windowsTotal,
        rowsPerSecond: since > 0 ? c.rows / since : 0,
        etaSeconds: done ? 0 : eta(elapsed, c, planned),
        done,
      });
    }
    const known = resources.map((r) => r.etaSeconds).filter((e): e is number => e !== undefined);
    let total = known.length === 0 ? undefined : Math.max(...known);
    if (total !== undefined && this.plan?.minimumSeconds !== undefined && resources.some((r) => !r.done)) {
      total = Math.max(total, this.plan.minimumSeconds - elapsed);
    }
    return {
      elapsedSeconds: elapsed,
      resources,
      etaSeconds: total === undefined ? undefined : Math.max(0, total),
      etaIsLowerBound: known.length < resources.length,
    };
  }

  private counter(resource: string): Counter {
    let c = this.counters.get(resource);
    if (c === undefined) {
      c = { rows: 0, pages: 0, windowsDone: 0, windowsTotal: 0, skipped: 0 };
      this.counters.set(resource, c);
    }
    return c;
  }
}

function eta(elapsed: number, c: Counter, planned: ResourcePlan | undefined): number | undefined {
  if (planned?.pages !== undefined && planned.pages > 0) {
    const share = Math.min(1, c.pages / planned.pages);
    const byPace = share > 0 ? elapsed / share : 0;
    const expected = Math.max(planned.minimumSeconds ?? 0, byPace);
    return Math.max(0, expected - elapsed);
  }
  // No plan: the share of windows done (only meaningful with many windows).
  const ran = c.windowsDone - c.skipped;
  const toRun = c.windowsTotal - c.skipped;
  if (toRun > 1 && ran > 0) {
    const share = ran / toRun;
    return Math.max(0, elapsed / share - elapsed);
  }
  return undefined;
}
