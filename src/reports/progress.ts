import type { Clock } from '../core/types.js';
import type { RateLimits } from '../http/scheduler/budget.js';

/**
 * Progress of a run per resource: rows, pages, windows done of total, rows per second and an ETA.
 * Pure counting; the display (a live TTY view or periodic log lines) lives in `app/output/`.
 *
 * The ETA comes from the plan: with a planned page count, a resource's expected total time is the
 * larger of the plan's minimum time (the floor of the rate limits) and the time so far divided by
 * the share of planned pages read. Early in a run the floor dominates (the first burst is fast, the
 * minute limit then binds), later the observed pace does. A per-event backlog the run grows as it
 * stores parents (traces per event) is estimated from what is queued now: one request per pending
 * parent at its drain's pace, never faster than an endpoint's minute limit. Without either, "ETA ?",
 * never a misleading 0.
 */

/** What the plan expects of one resource (any field may be unknown). */
export interface ResourcePlan {
  readonly rows?: number;
  readonly pages?: number;
  /** Least time the limits allow for its requests, in seconds. */
  readonly minimumSeconds?: number;
  /**
   * A window resumes a checkpoint of an interrupted run, and how many of `rows` that run already
   * stored is unknown (a sync's checkpoint keeps a cursor, not a count): `rows` is then an upper
   * bound of what this run stores, never a target it fell short of.
   */
  readonly resumed?: boolean;
}

export interface ProgressPlan {
  readonly resources: Readonly<Record<string, ResourcePlan>>;
  /** Least time the limits allow for every planned request together, in seconds. */
  readonly minimumSeconds?: number;
}

export interface ResourceProgress {
  readonly resource: string;
  /** Rows stored in the destination (written in batches, so it lags `rowsRead`). */
  readonly rows: number;
  /** Records read from the API so far (what the plan's row count compares with). */
  readonly rowsRead: number;
  readonly plannedRows?: number;
  readonly pages: number;
  readonly plannedPages?: number;
  readonly windowsDone: number;
  readonly windowsTotal: number;
  readonly rowsPerSecond: number;
  /** Seconds left, when it can be told. */
  readonly etaSeconds?: number;
  /** Every stream of the resource has ended (ok or failed). */
  readonly done: boolean;
  /** `plannedRows` includes rows an interrupted run stored before (see `ResourcePlan.resumed`). */
  readonly resumed: boolean;
  /** Streams (project scopes) of this resource that failed, with their errors. */
  readonly failed: readonly { readonly scope: string; readonly message: string }[];
  /** What it waits for right now, if anything worth showing. */
  readonly activity?: Activity;
}

/**
 * Why a resource is not moving: its requests wait for the shared rate budget (longer than a blink;
 * the pacing of every request is normal), or it sleeps before retrying a failed request.
 */
export type Activity =
  | { readonly kind: 'waiting'; readonly seconds: number; readonly pausedAfter429: boolean }
  | { readonly kind: 'backoff'; readonly seconds: number; readonly reason: string };

export interface ProgressSnapshot {
  readonly elapsedSeconds: number;
  readonly resources: readonly ResourceProgress[];
  /** Time left for the resources whose ETA is known (the longest of them). */
  readonly etaSeconds?: number;
  /** Some resources have no estimate: the run may take longer than `etaSeconds`. */
  readonly etaIsLowerBound: boolean;
  /** `planning` until the run's plan (count requests for the ETA) is made. */
  readonly phase: 'planning' | 'running';
  /** Requests started so far in this process (plan included). */
  readonly requests: number;
  /** 429s answered so far. */
  readonly rateLimited: number;
}

/** A request queued this long for the budget shows as "waiting for rate budget". */
const WAITING_SHOWN_AFTER_MS = 1000;

interface Counter {
  rows: number;
  read: number;
  pages: number;
  windowsDone: number;
  windowsTotal: number;
  /** Windows done before this run (ledger): they took none of its time. */
  skipped: number;
  firstPageAt?: number;
  failed: { scope: string; message: string }[];
  /** Queued requests per lane: when each was queued. */
  queued: Map<string, number[]>;
  backoffUntil?: number;
  backoffReason?: string;
  endpoint?: string;
  /** A per-event backlog: events still waiting for their traces (one request each), as last told. */
  backlog?: number;
}

/** Lane names: `<resource>|<scope>` for walks, `plan|…` for the plan's count requests. */
function resourceOfLane(lane: string | undefined): string | undefined {
  if (lane === undefined) return undefined;
  const [first] = lane.split('|');
  return first === 'plan' || first === '' ? undefined : first;
}

export class ProgressTracker {
  private readonly clock: Clock;
  private startedAt: number;
  private plan: ProgressPlan | undefined;
  private readonly counters = new Map<string, Counter>();
  private phase: ProgressSnapshot['phase'] = 'running';
  private finished = false;
  private order: readonly string[] = [];
  private requests = 0;
  private rateLimited = 0;
  /** Endpoint → until when it is paused after a 429 (when the server said). */
  private readonly pausedUntil = new Map<string, number>();

  /** Requests per second one endpoint may make (the configured `--max-rpm` / 60): a backlog drains no faster. */
  private readonly backlogMaxPerSecond: number;

  constructor(clock: Clock, limits: Pick<RateLimits, 'maxRpm'>, plan?: ProgressPlan) {
    this.clock = clock;
    this.backlogMaxPerSecond = limits.maxRpm / 60;
    this.startedAt = clock.now();
    this.plan = plan;
  }

  /** Resources are listed in this order (the declaration order), whatever order they start in. */
  setOrder(resources: readonly string[]): void {
    this.order = [...resources];
  }

  setPlan(plan: ProgressPlan | undefined): void {
    this.plan = plan;
  }

  /** The plan's count requests are being made (a long backfill can take a while). */
  markPlanning(): void {
    this.phase = 'planning';
    this.startedAt = this.clock.now();
  }

  /** The run itself starts now (after opening files and planning): elapsed time and ETAs count from here. */
  markStart(): void {
    this.phase = 'running';
    this.startedAt = this.clock.now();
  }

  /** A stream (resource, scope) ended in failure: the resource shows as failed. */
  streamFailed(resource: string, scope: string, message: string): void {
    this.counter(resource).failed.push({ scope, message });
  }

  /** The run is over: every resource has ended, whatever windows it did not get to. */
  finish(): void {
    this.finished = true;
  }

  // ---- request activity (fed by the observed budget and the client's retry hook) ----

  /** A request of `lane` to `endpoint` waits for the budget. */
  requestQueued(endpoint: string, lane: string | undefined): void {
    const resource = resourceOfLane(lane);
    if (resource === undefined || lane === undefined) return;
    const c = this.counter(resource);
    c.endpoint = endpoint;
    const list = c.queued.get(lane) ?? [];
    list.push(this.clock.now());
    c.queued.set(lane, list);
    if (c.backoffUntil !== undefined && c.backoffUntil <= this.clock.now()) c.backoffUntil = undefined;
  }

  /** It left the queue (started, or was cancelled). */
  requestDequeued(lane: string | undefined, started: boolean): void {
    if (started) this.requests += 1;
    const resource = resourceOfLane(lane);
    if (resource === undefined || lane === undefined) return;
    const list = this.counters.get(resource)?.queued.get(lane);
    list?.shift();
  }

  /** The server answered 429 on `endpoint`; it pauses for `retryAfterMs` when the server said. */
  rateLimitedOn(endpoint: string, retryAfterMs: number | undefined): void {
    this.rateLimited += 1;
    if (retryAfterMs !== undefined) this.pausedUntil.set(endpoint, this.clock.now() + retryAfterMs);
  }

  /** A request of `resource` failed and is retried after `delayMs`. */
  backingOff(resource: string | undefined, delayMs: number, reason: string): void {
    if (resource === undefined) return;
    const c = this.counter(resource);
    c.backoffUntil = this.clock.now() + delayMs;
    c.backoffReason = reason;
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

  /** `windows` ended (more than one where a backfill read a run of them in one walk). */
  windowDone(resource: string, windows = 1): void {
    this.counter(resource).windowsDone += windows;
  }

  /** A per-event resource's backlog is now `pending` requests (the run grows it as it stores parents). */
  backlog(resource: string, pending: number): void {
    this.counter(resource).backlog = pending;
  }

  /** A page of `records` was read; `rowsStored` rows were written after it (0 until a batch fills). */
  page(resource: string, rowsStored: number, records = rowsStored): void {
    const c = this.counter(resource);
    c.pages += 1;
    c.rows += rowsStored;
    c.read += records;
    c.firstPageAt ??= this.clock.now();
  }

  snapshot(): ProgressSnapshot {
    const now = this.clock.now();
    const elapsed = (now - this.startedAt) / 1000;
    const rank = (name: string): number => (this.order.includes(name) ? this.order.indexOf(name) : this.order.length);
    const names = [...new Set([...this.counters.keys(), ...Object.keys(this.plan?.resources ?? {})])].sort(
      (a, b) => rank(a) - rank(b),
    );
    const resources: ResourceProgress[] = [];
    for (const resource of names) {
      const c = this.counters.get(resource) ?? newCounter();
      const planned = this.plan?.resources[resource];
      const done = this.finished || (c.windowsTotal > 0 && c.windowsDone >= c.windowsTotal);
      const failed = c.failed.map((f) => ({ ...f }));
      const since = c.firstPageAt === undefined ? 0 : (now - c.firstPageAt) / 1000;
      resources.push({
        resource,
        rows: c.rows,
        rowsRead: c.read,
        plannedRows: planned?.rows,
        pages: c.pages,
        plannedPages: planned?.pages,
        windowsDone: c.windowsDone,
        windowsTotal: c.windowsTotal,
        rowsPerSecond: since > 0 ? c.read / since : 0,
        etaSeconds: done ? 0 : eta(elapsed, c, planned, since, this.backlogMaxPerSecond),
        done,
        resumed: planned?.resumed === true,
        failed,
        activity: done ? undefined : this.activity(c, now),
      });
    }
    const known = resources.map((r) => r.etaSeconds).filter((e): e is number => e !== undefined);
    let total = known.length === 0 ? undefined : Math.max(...known);
    if (total !== undefined && this.plan?.minimumSeconds !== undefined && resources.some((r) => !r.done)) {
      total = Math.max(total, this.plan.minimumSeconds - elapsed);
    }
    // A bound of "at least 0 s" while a resource with no estimate still runs says nothing: unknown.
    if (total !== undefined && total < 1 && resources.some((r) => !r.done && r.etaSeconds === undefined))
      total = undefined;
    return {
      elapsedSeconds: elapsed,
      resources,
      etaSeconds: total === undefined ? undefined : Math.max(0, total),
      etaIsLowerBound: known.length < resources.length,
      phase: this.phase,
      requests: this.requests,
      rateLimited: this.rateLimited,
    };
  }

  /** Backoff wins (nothing is even queued meanwhile); then the oldest queued request, if it waited long enough. */
  private activity(c: Counter, now: number): Activity | undefined {
    if (c.backoffUntil !== undefined && c.backoffUntil > now) {
      return { kind: 'backoff', seconds: (c.backoffUntil - now) / 1000, reason: c.backoffReason ?? 'retrying' };
    }
    let oldest: number | undefined;
    for (const list of c.queued.values()) {
      const first = list[0];
      if (first !== undefined && (oldest === undefined || first < oldest)) oldest = first;
    }
    if (oldest === undefined || now - oldest < WAITING_SHOWN_AFTER_MS) return undefined;
    const paused = c.endpoint === undefined ? undefined : this.pausedUntil.get(c.endpoint);
    return { kind: 'waiting', seconds: (now - oldest) / 1000, pausedAfter429: paused !== undefined && paused > now };
  }

  private counter(resource: string): Counter {
    let c = this.counters.get(resource);
    if (c === undefined) {
      c = newCounter();
      this.counters.set(resource, c);
    }
    return c;
  }
}

function newCounter(): Counter {
  return { rows: 0, read: 0, pages: 0, windowsDone: 0, windowsTotal: 0, skipped: 0, failed: [], queued: new Map() };
}

/** `backlogMaxPerSecond`: the requests a second one endpoint may make (`--max-rpm` / 60); a backlog drains no faster, whatever its pace so far. */
function eta(
  elapsed: number,
  c: Counter,
  planned: ResourcePlan | undefined,
  since: number,
  backlogMaxPerSecond: number,
): number | undefined {
  // A per-event backlog (traces of the events just stored): one request per pending event, at the
  // pace its drain has kept (after a few seconds of it), never faster than an endpoint's minute
  // limit. It grows while its parents are read, so this is the time for what is queued now.
  const backlogEta = (): number | undefined => {
    if (c.backlog === undefined) return undefined;
    const pace = since >= 5 && c.pages > 0 ? Math.min(c.pages / since, backlogMaxPerSecond) : backlogMaxPerSecond;
    return c.backlog / pace;
  };
  if (planned?.pages !== undefined && planned.pages > 0) {
    // Every planned page read and still going (a per-event backlog the run itself grows): the plan
    // no longer says how much is left, and 0 would be a lie; the backlog does, when it is known.
    if (c.pages >= planned.pages) return backlogEta();
    const share = c.pages / planned.pages;
    const byPace = share > 0 ? elapsed / share : 0;
    const expected = Math.max(planned.minimumSeconds ?? 0, byPace);
    return Math.max(0, expected - elapsed, backlogEta() ?? 0);
  }
  const fromBacklog = backlogEta();
  if (fromBacklog !== undefined) return fromBacklog;
  // No plan: the share of windows done (only meaningful with many windows).
  const ran = c.windowsDone - c.skipped;
  const toRun = c.windowsTotal - c.skipped;
  if (toRun > 1 && ran > 0) {
    const share = ran / toRun;
    return Math.max(0, elapsed / share - elapsed);
  }
  return undefined;
}
