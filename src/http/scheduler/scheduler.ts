/**
 * The request scheduler: the one `RequestBudget` every request of a run draws on.
 *
 * Design. Rate limiting here is decided by our own sliding logs of start times, not by p-queue's
 * `interval`/`intervalCap`:
 * - The limits are several sliding windows enforced at once (per endpoint per minute, adapted after
 *   429s; all endpoints per second; the search gate on the combined count), plus per-endpoint pauses
 *   and round-robin lanes. p-queue's interval options express one window per queue, and nesting
 *   queues would count a request when it enters the inner queue rather than when it starts.
 * - Keeping the start times lets us compute the exact earliest start of the next request, so a single
 *   timer sleeps until then: no polling, and budget is never left idle while someone waits.
 * p-queue does what it is good at: it runs the tasks with `concurrency` = `maxInFlight`. The
 * dispatcher hands a task to it only while it has a free slot, so p-queue starts it synchronously
 * and the time recorded in the logs is the time the request really starts. A task finishing
 * (p-queue's `next` event) wakes the dispatcher.
 *
 * Safety margins are in time, never in counts: every window is lengthened a little (see
 * `DEFAULT_SAFETY_MARGINS`), which costs well under 1 % on minute-bound stretches, whereas
 * lowering 400/min to 396/min would make an 800-request backfill take 120 s instead of 70 s.
 *
 * The search gate needs one exception to "never leave budget idle": under a saturated combined
 * budget the last second never holds fewer than `searchGateRps` starts, so a search would wait
 * forever. When it is a search lane's turn and only the gate holds it back, nothing else starts until
 * the combined count has fallen under the gate (searches are at most `searchRpm` a minute, so the
 * cost is bounded). Letting searches wait for the count to dip by itself was measured to be slower:
 * search, at 50 a minute, is usually the longest stream, and delaying its first minute delays its end.
 */

import PQueue from 'p-queue';
import type { Logger } from '../../core/log.js';
import type { BudgetStats, EndpointStats, RateLimits, RequestBudget, ScheduleOptions } from './budget.js';
import { Bucket, type Waiter } from './bucket.js';
import { RoundRobin } from './lanes.js';
import { SlidingLog } from './window.js';
import { DEFAULT_MAX_IN_FLIGHT, DEFAULT_SAFETY_MARGINS, type SchedulerOptions } from './options.js';

/** Lane of requests scheduled without one. */
const DEFAULT_LANE = 'default';

const MINUTE_MS = 60_000;
const SECOND_MS = 1_000;

/** A started request that has not said it was sent: where its start is in the logs. */
interface Unsent {
  readonly bucket: Bucket;
  at: number;
}

interface Candidate {
  readonly bucket: Bucket;
  readonly lane: string;
  readonly head: Waiter;
  /** Only the search gate holds it back. */
  readonly gated: boolean;
}

/**
 * Create the request budget of a run. One scheduler is shared by every resource, project and window
 * of the run: the limits are per API key.
 */
export function createScheduler(options: SchedulerOptions): RequestBudget {
  return new Scheduler(options);
}

class Scheduler implements RequestBudget {
  readonly #limits: RateLimits;
  readonly #minuteWindowMs: number;
  readonly #secondWindowMs: number;
  readonly #maxInFlight: number;
  readonly #logger: Logger | undefined;
  readonly #clock: () => number;
  readonly #queue: PQueue;
  readonly #buckets = new Map<string, Bucket>();
  /** Starts across all endpoints, for the combined rate, the search gate and `maxPerSecond`. */
  readonly #allStarts = new SlidingLog();
  /** Started requests that report when they are sent and have not yet (`ScheduleOptions.reportsSent`). */
  readonly #unsent = new Set<Unsent>();
  /** Lanes with waiting requests, and how many each has (across endpoints). */
  readonly #lanes = new RoundRobin<string>();
  readonly #laneWaiting = new Map<string, number>();
  #waiting = 0;
  #lastNow = Number.NEGATIVE_INFINITY;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt = Number.POSITIVE_INFINITY;
  #dispatchQueued = false;
  #requests = 0;
  #rateLimited = 0;
  /** Set by `close`: the reason every later request is refused with. */
  #closed: { readonly reason: unknown } | undefined;
  #maxPerSecond = 0;

  constructor(options: SchedulerOptions) {
    const { limits } = options;
    for (const key of ['maxRpm', 'searchRpm', 'maxRps', 'searchGateRps'] as const) {
      if (!Number.isInteger(limits[key]) || limits[key] < 1) {
        throw new RangeError(`Expected limits.${key} to be an integer of at least 1, got ${String(limits[key])}`);
      }
    }
    const minuteMarginMs = options.safetyMarginMs?.minuteMs ?? DEFAULT_SAFETY_MARGINS.minuteMs;
    const secondMarginMs = options.safetyMarginMs?.secondMs ?? DEFAULT_SAFETY_MARGINS.secondMs;
    for (const [name, value] of [
      ['minuteMs', minuteMarginMs],
      ['secondMs', secondMarginMs],
    ] as const) {
      if (!Number.isFinite(value) || value < 0) {
        throw new RangeError(`Expected safetyMarginMs.${name} to be a finite number ≥ 0, got ${String(value)}`);
      }
    }
    const maxInFlight = options.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    if (!(maxInFlight >= 1)) {
      throw new RangeError(`Expected maxInFlight to be at least 1, got ${String(maxInFlight)}`);
    }
    this.#limits = limits;
    this.#minuteWindowMs = MINUTE_MS + minuteMarginMs;
    this.#secondWindowMs = SECOND_MS + secondMarginMs;
    this.#maxInFlight = maxInFlight;
    this.#logger = options.logger;
    this.#clock = options.now ?? (() => Date.now());
    this.#queue = new PQueue({ concurrency: maxInFlight });
    this.#queue.on('next', () => this.#requestDispatch());
  }

  schedule<T>(endpoint: string, task: (sent: () => void) => Promise<T>, options: ScheduleOptions = {}): Promise<T> {
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#closed !== undefined) return Promise.reject(this.#closed.reason);
    const bucket = this.#bucket(endpoint);
    const lane = options.lane ?? DEFAULT_LANE;
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => {
        if (!bucket.waiting.remove(lane, waiter)) return;
        this.#leave(lane);
        reject(signal?.reason);
        // Its turn may have been holding others back (the search gate reservation).
        this.#requestDispatch();
      };
      const waiter: Waiter = {
        enqueuedAt: this.#now(),
        start: (startedAt) => {
          const unsent: Unsent = { bucket, at: startedAt };
          if (options.reportsSent === true) this.#unsent.add(unsent);
          // The request went out later than it started (a new connection, a busy loop): count it
          // from then, as the server does. Once, and only ever later.
          const sent = (): void => {
            const at = this.#now();
            const from = unsent.at;
            unsent.at = Number.POSITIVE_INFINITY;
            this.#unsent.delete(unsent);
            if (at <= from) return;
            bucket.starts.restamp(from, at);
            this.#allStarts.restamp(from, at);
            this.#requestDispatch();
          };
          this.#queue
            .add(() => task(sent))
            .finally(() => this.#unsent.delete(unsent))
            .then(resolve, reject);
        },
        detach: () => signal?.removeEventListener('abort', onAbort),
        cancel: (reason) => {
          signal?.removeEventListener('abort', onAbort);
          reject(reason);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      bucket.waiting.push(lane, waiter, options.left);
      this.#join(lane);
      this.#requestDispatch();
    });
  }

  close(reason: unknown): void {
    if (this.#closed !== undefined) return;
    this.#closed = { reason };
    for (const bucket of this.#buckets.values()) {
      for (const [lane, waiter] of bucket.waiting.drain()) {
        this.#leave(lane);
        waiter.cancel(reason);
      }
    }
    this.#wakeAt(Number.POSITIVE_INFINITY);
  }

  onRateLimited(endpoint: string, retryAfterMs: number | undefined): void {
    const now = this.#now();
    const bucket = this.#bucket(endpoint);
    bucket.rateLimited += 1;
    this.#rateLimited += 1;
    const outcome = bucket.rate.onRateLimited(now, retryAfterMs);
    this.#logger?.debug(
      {
        endpoint,
        retryAfterMs,
        pauseMs: outcome.pauseMs,
        decreased: outcome.decreased,
        currentRpm: bucket.rpmAt(now),
      },
      'rate limited: endpoint paused',
    );
    this.#requestDispatch();
  }

  headroom(endpoint: string): number {
    const now = this.#now();
    const bucket = this.#bucket(endpoint);
    return bucket.rpmAt(now) - bucket.starts.countWithin(now, this.#minuteWindowMs) - bucket.waiting.size;
  }

  recentStarts(): Readonly<Record<string, readonly number[]>> {
    const now = this.#now();
    const out: Record<string, readonly number[]> = {};
    for (const bucket of this.#buckets.values()) {
      const starts = bucket.starts.startsWithin(now, this.#minuteWindowMs);
      if (starts.length > 0) out[bucket.endpoint] = starts;
    }
    return out;
  }

  seedStarts(starts: Readonly<Record<string, readonly number[]>>): void {
    const now = this.#now();
    for (const [endpoint, times] of Object.entries(starts)) {
      const bucket = this.#bucket(endpoint);
      for (const at of times) {
        // Only what can still be in a window; a start "in the future" (clocks apart) counts as now.
        if (!Number.isFinite(at) || at <= now - this.#minuteWindowMs) continue;
        bucket.starts.push(Math.min(at, now));
        this.#allStarts.push(Math.min(at, now));
      }
    }
    this.#requestDispatch();
  }

  stats(): BudgetStats {
    const now = this.#now();
    const endpoints: Record<string, EndpointStats> = {};
    for (const bucket of this.#buckets.values()) {
      endpoints[bucket.endpoint] = {
        requests: bucket.requests,
        rateLimited: bucket.rateLimited,
        waitedMs: bucket.waitedMs,
        currentRpm: bucket.rpmAt(now),
      };
    }
    return {
      requests: this.#requests,
      rateLimited: this.#rateLimited,
      maxPerSecond: this.#maxPerSecond,
      endpoints,
    };
  }

  /** The clock, made monotonic: a wall clock stepping back must not reopen windows. */
  #now(): number {
    this.#lastNow = Math.max(this.#lastNow, this.#clock());
    return this.#lastNow;
  }

  #bucket(endpoint: string): Bucket {
    let bucket = this.#buckets.get(endpoint);
    if (bucket === undefined) {
      bucket = new Bucket(endpoint, this.#limits);
      this.#buckets.set(endpoint, bucket);
    }
    return bucket;
  }

  #join(lane: string): void {
    this.#waiting += 1;
    this.#laneWaiting.set(lane, (this.#laneWaiting.get(lane) ?? 0) + 1);
    this.#lanes.add(lane);
  }

  #leave(lane: string): void {
    this.#waiting -= 1;
    const left = (this.#laneWaiting.get(lane) ?? 1) - 1;
    if (left > 0) {
      this.#laneWaiting.set(lane, left);
    } else {
      this.#laneWaiting.delete(lane);
      this.#lanes.delete(lane);
    }
  }

  /** Coalesce the triggers of one tick (new requests, finished tasks, 429s, aborts) into one pass. */
  #requestDispatch(): void {
    if (this.#dispatchQueued) return;
    this.#dispatchQueued = true;
    queueMicrotask(() => {
      this.#dispatchQueued = false;
      this.#dispatch();
    });
  }

  /** Start every request the budget allows now, then sleep until the next one could start. */
  #dispatch(): void {
    for (;;) {
      // A finishing task wakes us through p-queue's `next` event; no timer is needed for that.
      if (this.#waiting === 0 || this.#queue.pending >= this.#maxInFlight) {
        this.#wakeAt(Number.POSITIVE_INFINITY);
        return;
      }
      const now = this.#now();
      const secondMs = this.#secondWindowMs;
      this.#holdUnsent(now);
      this.#allStarts.forgetThrough(now - Math.max(secondMs, SECOND_MS));
      const combinedFreeAt = this.#allStarts.nextFreeAt(now, secondMs, this.#limits.maxRps);
      if (combinedFreeAt > now) {
        this.#wakeAt(combinedFreeAt);
        return;
      }
      const gateOpenAt = this.#allStarts.nextFreeAt(now, secondMs, this.#limits.searchGateRps);

      // Each endpoint offers the head request of the lane whose turn it is there.
      const offers = new Map<string, Candidate[]>();
      let nextReadyAt = Number.POSITIVE_INFINITY;
      for (const bucket of this.#buckets.values()) {
        const lane = bucket.waiting.currentLane();
        const head = lane === undefined ? undefined : bucket.waiting.peek(lane);
        if (lane === undefined || head === undefined) continue;
        const readyAt = bucket.readyAt(now, this.#minuteWindowMs, secondMs);
        if (readyAt > now) {
          nextReadyAt = Math.min(nextReadyAt, readyAt);
          continue;
        }
        const candidate: Candidate = { bucket, lane, head, gated: bucket.isSearch && gateOpenAt > now };
        const list = offers.get(lane);
        if (list === undefined) offers.set(lane, [candidate]);
        else list.push(candidate);
      }

      // The combined budget goes to lanes in turn; within a lane, to its longest-waiting offer.
      const chosen = this.#pick(offers);
      if (chosen === undefined) {
        this.#wakeAt(nextReadyAt);
        return;
      }
      if (chosen.gated) {
        // A search's turn: hold everything else until the combined count falls under the gate.
        this.#wakeAt(gateOpenAt);
        return;
      }
      this.#start(chosen, now);
    }
  }

  /**
   * Started requests not yet sent (`reportsSent`) whose start is about to leave the second window
   * move to `now`: until it goes out, a request may go out at any moment, so it counts as now.
   */
  #holdUnsent(now: number): void {
    const before = now - this.#secondWindowMs;
    for (const unsent of this.#unsent) {
      if (unsent.at > before) continue;
      unsent.bucket.starts.restamp(unsent.at, now);
      this.#allStarts.restamp(unsent.at, now);
      unsent.at = now;
    }
  }

  #pick(offers: ReadonlyMap<string, readonly Candidate[]>): Candidate | undefined {
    if (offers.size === 0) return undefined;
    for (const lane of this.#lanes.inTurnOrder()) {
      const list = offers.get(lane);
      if (list === undefined) continue;
      let best: Candidate | undefined;
      for (const candidate of list) {
        if (best === undefined || candidate.head.enqueuedAt < best.head.enqueuedAt) best = candidate;
      }
      return best;
    }
    return undefined;
  }

  #start(candidate: Candidate, now: number): void {
    const { bucket, lane } = candidate;
    const waiter = bucket.waiting.shift(lane);
    if (waiter === undefined) return;
    this.#lanes.advancePast(lane);
    this.#leave(lane);
    waiter.detach();

    bucket.starts.push(now);
    this.#allStarts.push(now);
    bucket.requests += 1;
    bucket.waitedMs += now - waiter.enqueuedAt;
    this.#requests += 1;
    this.#maxPerSecond = Math.max(this.#maxPerSecond, this.#allStarts.countWithin(now, SECOND_MS));

    // p-queue has a free slot (checked in #dispatch), so it calls the task synchronously: the
    // request starts at `now`, the time just recorded (moved later if it is sent later).
    waiter.start(now);
  }

  /** Keep at most one timer, armed for `at`; none when nothing waits on time. */
  #wakeAt(at: number): void {
    if (at === this.#timerAt && this.#timer !== undefined) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Number.POSITIVE_INFINITY;
    if (!Number.isFinite(at)) return;
    const delayMs = Math.max(1, Math.ceil(at - this.#now()));
    this.#timerAt = at;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = Number.POSITIVE_INFINITY;
      this.#dispatch();
    }, delayMs);
  }
}
