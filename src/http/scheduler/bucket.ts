import { SEARCH_ENDPOINT, type RateLimits } from './budget.js';
import { LaneQueues } from './lanes.js';
import { AdaptiveRate, DEFAULT_ADAPTIVE_RATE } from './rate.js';
import { SlidingLog } from './window.js';

/** One waiting request. */
export interface Waiter {
  readonly enqueuedAt: number;
  /** Hand the task to p-queue; settles the caller's promise. */
  readonly start: (startedAt: number) => void;
  /** Called when it leaves the queue (started or aborted). */
  readonly detach: () => void;
  /** Taken out of the queue unstarted (the budget was closed): rejects the caller's promise with `reason`. */
  readonly cancel: (reason: unknown) => void;
}

/** One endpoint's budget and its waiting requests. */
export class Bucket {
  readonly endpoint: string;
  readonly isSearch: boolean;
  readonly #configuredRpm: number;
  readonly #configuredRps: number;
  readonly starts = new SlidingLog();
  readonly rate = new AdaptiveRate(DEFAULT_ADAPTIVE_RATE);
  readonly waiting = new LaneQueues<Waiter>();
  requests = 0;
  rateLimited = 0;
  waitedMs = 0;

  constructor(endpoint: string, limits: RateLimits) {
    this.endpoint = endpoint;
    this.isSearch = endpoint === SEARCH_ENDPOINT;
    this.#configuredRpm = this.isSearch ? limits.searchRpm : limits.maxRpm;
    this.#configuredRps = limits.maxRps;
  }

  /** Requests per sliding minute allowed at `now` (lower than configured after 429s). */
  rpmAt(now: number): number {
    return Math.max(1, Math.floor(this.#configuredRpm * this.rate.factorAt(now)));
  }

  /**
   * Requests per sliding second this endpoint alone may use at `now`: the combined limit until a
   * 429, then the combined limit × factor². A 429 does not say which window the server refused, and
   * bursts are refused first by a lower per-second limit, which is shared by every endpoint: so
   * the per-second share falls faster (×0.49 per episode) than the minute rate (×0.7). Against a
   * server enforcing half the configured limits this finishes about 40 % sooner than one factor for
   * both, at a small cost when only the minute limit is lower.
   */
  rpsAt(now: number): number {
    const factor = this.rate.factorAt(now);
    return Math.max(1, Math.floor(this.#configuredRps * factor * factor));
  }

  /**
   * When this endpoint's own limits (pause, minute window, adapted second window) allow a start:
   * `now` when they do; otherwise the time to look again (the earlier of a window freeing up and
   * the adapted rate rising).
   */
  readyAt(now: number, minuteWindowMs: number, secondWindowMs: number): number {
    this.starts.forgetThrough(now - Math.max(minuteWindowMs, secondWindowMs));
    const pausedUntil = Math.max(now, this.rate.pausedUntil);
    const limitedUntil = Math.max(
      this.starts.nextFreeAt(now, minuteWindowMs, this.rpmAt(now)),
      this.starts.nextFreeAt(now, secondWindowMs, this.rpsAt(now)),
    );
    if (limitedUntil <= now) return pausedUntil;
    return Math.max(pausedUntil, Math.min(limitedUntil, this.rate.nextIncreaseAt(now)));
  }
}
