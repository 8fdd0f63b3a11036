import { isServerWait, pauseAfter429 } from '../retry-after.js';
/**
 * How one endpoint's bucket reacts to 429s: a pause, then AIMD on its rate.
 *
 * The configured limits may be higher than what the server really enforces (the field notes list
 * three published versions of them). A 429 pauses the bucket (for `Retry-After`, else an exponential
 * backoff), cuts its rate multiplicatively, and the rate climbs back additively after quiet periods,
 * so a sync settles just under the real limit instead of hammering it. A lone 429 asking to wait at
 * most a second only pauses (see `forgiveRetryAfterMs`). Everything is computed from
 * timestamps when asked: no timer runs to raise the rate.
 */

export interface AdaptiveRateOptions {
  /** Rate is multiplied by this on a 429. @default 0.7 */
  readonly decreaseFactor: number;
  /** The rate never drops below this fraction of the configured limit. @default 0.1 */
  readonly minFactor: number;
  /** Fraction of the configured limit regained per quiet period. @default 0.05 */
  readonly increaseStep: number;
  /** Length of a quiet period (no 429, counted from the end of the pause). @default 10_000 */
  readonly quietPeriodMs: number;
  /**
   * 429s within this long of the last decrease belong to the same episode (requests already in flight
   * when the first 429 came back): they extend the pause but do not cut the rate again.
   * @default 1_000
   */
  readonly episodeMs: number;
  /** First backoff when the server gives no `Retry-After`; doubles per consecutive episode. @default 1_000 */
  readonly backoffInitialMs: number;
  /** Longest backoff. Matches the 30 s cap the vendor's own clients apply (field notes). @default 30_000 */
  readonly backoffMaxMs: number;
  /**
   * The first 429 episode after a quiet period whose `Retry-After` is at most this long only pauses
   * the bucket; the rate is cut from the next episode within the quiet period on. A lone 429 that
   * asks for a second's wait is most likely a one-second window that saw our last second a little
   * shorter than we did (a request's arrival delayed, the server's stamp late), and a cut costs the
   * endpoint 30 % for about a minute (a 20 s benchmark run took 60 s after one). A server whose real
   * limits are lower refuses again within seconds and is cut then: one episode later.
   * @default 1_000
   */
  readonly forgiveRetryAfterMs: number;
}

export const DEFAULT_ADAPTIVE_RATE: AdaptiveRateOptions = Object.freeze({
  decreaseFactor: 0.7,
  minFactor: 0.1,
  increaseStep: 0.05,
  quietPeriodMs: 10_000,
  episodeMs: 1_000,
  backoffInitialMs: 1_000,
  backoffMaxMs: 30_000,
  forgiveRetryAfterMs: 1_000,
});

export interface RateLimitedOutcome {
  /** How long the bucket is paused from now, in ms. */
  readonly pauseMs: number;
  /** Whether this 429 started a new episode and cut the rate. */
  readonly decreased: boolean;
  /** The factor in force after this 429. */
  readonly factor: number;
}

/** The adaptive state of one bucket: a factor in [minFactor, 1] applied to its limits, and its pause. */
export class AdaptiveRate {
  readonly #options: AdaptiveRateOptions;
  /** Factor at `#quietSince`; it rises by `increaseStep` per quiet period after that. */
  #base = 1;
  #quietSince = Number.NEGATIVE_INFINITY;
  #lastDecreaseAt = Number.NEGATIVE_INFINITY;
  #lastRateLimitedAt = Number.NEGATIVE_INFINITY;
  /** Consecutive episodes, for the backoff when no `Retry-After` is given. */
  #episodes = 0;
  #pausedUntil = Number.NEGATIVE_INFINITY;
  /** Start of the last episode that was forgiven (paused, not cut). */
  #forgivenAt = Number.NEGATIVE_INFINITY;

  constructor(options: AdaptiveRateOptions = DEFAULT_ADAPTIVE_RATE) {
    this.#options = options;
  }

  /** No request of this bucket may start before this time. */
  get pausedUntil(): number {
    return this.#pausedUntil;
  }

  /** The fraction of the configured limits allowed at `now`. */
  factorAt(now: number): number {
    if (this.#base >= 1 || now < this.#quietSince) return this.#base;
    const periods = Math.floor((now - this.#quietSince) / this.#options.quietPeriodMs);
    return Math.min(1, this.#base + periods * this.#options.increaseStep);
  }

  /** When the factor next rises; `Infinity` at full rate. */
  nextIncreaseAt(now: number): number {
    if (this.factorAt(now) >= 1) return Number.POSITIVE_INFINITY;
    if (now < this.#quietSince) return this.#quietSince + this.#options.quietPeriodMs;
    const periods = Math.floor((now - this.#quietSince) / this.#options.quietPeriodMs);
    return this.#quietSince + (periods + 1) * this.#options.quietPeriodMs;
  }

  /** Record a 429 received at `now`; `retryAfterMs` is the server's wait, when it gave one. */
  onRateLimited(now: number, retryAfterMs: number | undefined): RateLimitedOutcome {
    const o = this.#options;
    const current = this.factorAt(now);
    const short = isServerWait(retryAfterMs) && retryAfterMs <= o.forgiveRetryAfterMs;
    const isolated = now - this.#lastRateLimitedAt > o.quietPeriodMs;
    if (short && (isolated || now - this.#forgivenAt < o.episodeMs)) {
      // A lone short refusal (and the rest of its burst): pause, keep the rate (see `forgiveRetryAfterMs`).
      if (isolated) this.#forgivenAt = now;
      this.#base = current;
      this.#lastRateLimitedAt = now;
      this.#pausedUntil = Math.max(this.#pausedUntil, now + retryAfterMs);
      this.#quietSince = Math.max(this.#quietSince, this.#pausedUntil);
      return { pauseMs: this.#pausedUntil - now, decreased: false, factor: this.#base };
    }
    const decreased = now - this.#lastDecreaseAt >= o.episodeMs;
    if (decreased) {
      // A 429 after a long quiet stretch starts the backoff over.
      if (now - this.#lastRateLimitedAt > o.quietPeriodMs) this.#episodes = 0;
      this.#episodes += 1;
      this.#base = Math.max(o.minFactor, current * o.decreaseFactor);
      this.#lastDecreaseAt = now;
    } else {
      // Rebase before the quiet period restarts, so increases already earned are kept.
      this.#base = current;
    }
    this.#lastRateLimitedAt = now;
    const backoffMs = Math.min(o.backoffMaxMs, o.backoffInitialMs * 2 ** Math.max(0, this.#episodes - 1));
    const pauseMs = pauseAfter429(retryAfterMs, backoffMs);
    this.#pausedUntil = Math.max(this.#pausedUntil, now + pauseMs);
    this.#quietSince = Math.max(this.#quietSince, this.#pausedUntil);
    return { pauseMs: this.#pausedUntil - now, decreased, factor: this.#base };
  }
}
