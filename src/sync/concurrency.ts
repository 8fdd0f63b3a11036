/**
 * How many walks of one stream to run at once: an adaptive limit, fed one sample per request. Used
 * by every producer of work units that runs its units at once (`units.ts`): a split's sub-windows
 * (`stream-reader.ts`) and the per-event traces's chunks (`traces/drain.ts`).
 *
 * A walk is sequential (each page's cursor comes from the previous page), so one walk makes at most
 * one request per round trip: at 300 ms a page that is 3.3 requests a second where the limits allow
 * 40. More walks at once (sub-windows of the stream's window) fill the budget, but past the point
 * where the budget binds they only add partial last pages and memory. So the limit follows what the
 * requests wait on:
 *
 * - **on the network** (little of a request's time is spent queued for budget): more walks would
 *   use budget that is idle. Grow: by one per such sample while in slow start (which doubles the
 *   limit per round trip, as TCP does), then by one per decision period.
 * - **on the budget** (most of a request's time is queued in the scheduler): more walks would only
 *   queue. Shrink by one per period; the next network-bound period starts slow start again, so the
 *   limit catches up within a few round trips when the budget frees up (e.g. a minute window
 *   rolling over).
 * - **429**: the server disagrees with our pacing. Halve, once per period (responses of requests
 *   already in flight belong to the same episode), and leave slow start.
 *
 * It never exceeds `max` (`--concurrency`: an upper bound, not a requirement) nor drops below
 * `min`. Pure: time comes from the injected clock, and nothing runs between samples.
 */

export interface ConcurrencyOptions {
  /** Upper bound (`--concurrency`). */
  readonly max: number;
  /** Lower bound. @default 1 */
  readonly min?: number;
  /** Starting limit: start small and grow. @default 1 */
  readonly initial?: number;
  /** Least time between two decisions outside slow start, and the length of a 429 episode. @default 1000 */
  readonly periodMs?: number;
  /** Grow while the share of request time spent waiting for budget is below this. @default 0.1 */
  readonly growBelow?: number;
  /** Shrink when that share is above this. @default 0.5 */
  readonly shrinkAbove?: number;
  /** Current time in ms. */
  readonly now: () => number;
}

/** One finished request, as its walk saw it. */
export interface RequestSample {
  /** Time spent queued for the rate budget. */
  readonly waitedMs: number;
  /** Time from its start to its answer (network and server; retries' backoff included). */
  readonly latencyMs: number;
  /** It was answered 429 at least once. */
  readonly rateLimited?: boolean;
}

const DEFAULT_CONCURRENCY_PERIOD_MS = 1_000;

export class ConcurrencyController {
  readonly max: number;
  readonly min: number;
  readonly #periodMs: number;
  readonly #growBelow: number;
  readonly #shrinkAbove: number;
  readonly #now: () => number;
  #limit: number;
  #slowStart = true;
  #periodStart: number;
  #waitedMs = 0;
  #totalMs = 0;
  #samples = 0;
  #lastCutAt = Number.NEGATIVE_INFINITY;
  #peak: number;
  #recentShare = 0;

  constructor(options: ConcurrencyOptions) {
    const min = options.min ?? 1;
    if (!Number.isInteger(options.max) || options.max < 1) {
      throw new RangeError(`expected the concurrency bound to be an integer of at least 1, got ${String(options.max)}`);
    }
    if (!Number.isInteger(min) || min < 1 || min > options.max) {
      throw new RangeError(`expected min to be an integer in [1, ${options.max}], got ${String(min)}`);
    }
    this.max = options.max;
    this.min = min;
    this.#periodMs = options.periodMs ?? DEFAULT_CONCURRENCY_PERIOD_MS;
    this.#growBelow = options.growBelow ?? 0.1;
    this.#shrinkAbove = options.shrinkAbove ?? 0.5;
    if (!(this.#growBelow < this.#shrinkAbove)) {
      throw new RangeError(`expected growBelow (${this.#growBelow}) below shrinkAbove (${this.#shrinkAbove})`);
    }
    this.#now = options.now;
    this.#limit = clamp(Math.floor(options.initial ?? 1), min, options.max);
    this.#peak = this.#limit;
    this.#periodStart = this.#now();
  }

  /** Walks that may run at once now. */
  get limit(): number {
    return this.#limit;
  }

  /** Highest limit reached so far (for the summary). */
  get peak(): number {
    return this.#peak;
  }

  /**
   * Share of the last few requests' time spent queued for budget (a moving average, weight 1/5 per
   * sample): it follows the budget within a round trip or two, where the limit follows it by one
   * walk per period. Below `growBelow`: the walks wait on the network, not the budget.
   */
  get recentBudgetShare(): number {
    return this.#recentShare;
  }

  /** Whether the recent requests waited on the network rather than the budget (see `recentBudgetShare`). */
  get networkBound(): boolean {
    return this.#recentShare < this.#growBelow;
  }

  /** Whether the limit is still doubling per round trip. */
  get inSlowStart(): boolean {
    return this.#slowStart;
  }

  /**
   * Start from at least `n` (clamped to the bounds): what a planned split sized from the latency
   * it measured needs to fill the budget, instead of slow start's climb from one (a second or two
   * at 300 ms). Slow start goes on from there; the budget binding shrinks it as usual.
   */
  atLeast(n: number): void {
    if (n > this.#limit) this.#set(Math.floor(n));
  }

  /** Feed one finished request. */
  record(sample: RequestSample): void {
    const now = this.#now();
    const waited = Math.max(0, sample.waitedMs);
    const total = waited + Math.max(0, sample.latencyMs);
    this.#recentShare = 0.8 * this.#recentShare + 0.2 * (total === 0 ? 0 : waited / total);
    if (sample.rateLimited === true) {
      this.#slowStart = false;
      if (now - this.#lastCutAt >= this.#periodMs) {
        this.#lastCutAt = now;
        this.#set(Math.ceil(this.#limit / 2));
      }
      this.#resetPeriod(now);
      return;
    }
    // Right after a cut, requests already in flight still report the old picture.
    if (now - this.#lastCutAt < this.#periodMs) return;
    this.#waitedMs += waited;
    this.#totalMs += total;
    this.#samples += 1;
    if (this.#slowStart) {
      if (total === 0 || waited / total < this.#growBelow) {
        this.#set(this.#limit + 1);
        return;
      }
      // The budget binds: slow start is over; the period decides from here.
      this.#slowStart = false;
    }
    if (now - this.#periodStart < this.#periodMs || this.#samples < Math.min(this.#limit, 4)) return;
    const share = this.#totalMs === 0 ? 0 : this.#waitedMs / this.#totalMs;
    if (share < this.#growBelow) {
      // Network-bound again (e.g. the budget freed up): catch up quickly.
      this.#slowStart = true;
      this.#set(this.#limit + 1);
    } else if (share > this.#shrinkAbove) {
      this.#set(this.#limit - 1);
    }
    this.#resetPeriod(now);
  }

  #set(limit: number): void {
    this.#limit = clamp(limit, this.min, this.max);
    this.#peak = Math.max(this.#peak, this.#limit);
  }

  #resetPeriod(now: number): void {
    this.#periodStart = now;
    this.#waitedMs = 0;
    this.#totalMs = 0;
    this.#samples = 0;
  }
}

function clamp(value: number, min: number, max: number): number {
  return Math.max(min, Math.min(max, value));
}
