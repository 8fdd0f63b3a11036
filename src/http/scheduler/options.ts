import type { Logger } from '../../core/log.js';
import type { RateLimits } from './budget.js';

/**
 * The scheduler's settings (`scheduler.ts`): the limits it keeps, the safety margins in time, how
 * many requests it keeps in flight, and their defaults with where each number comes from.
 */

/** Time added to the sliding windows, against clock skew and network jitter with the server. */
interface SafetyMargins {
  /**
   * Added to every per-endpoint minute window (60 s → 60.25 s). A request that left our window may
   * still sit in the server's if it arrived later than the next one does; 250 ms covers latency
   * differences between requests sent a minute apart at 0.4 % of throughput. @default 250
   */
  readonly minuteMs?: number;
  /**
   * Added to the one-second windows: the combined rate, the search gate and the adapted per-endpoint
   * rate. It costs its own size in throughput while the combined rate binds (40 per 1.1 s), so it is
   * kept small. What it must cover: the server stamps a request when it arrives, we when we write it
   * to the socket (the `sent` callback), so our own event loop no longer counts; left are the
   * difference in one-way delay between two requests sent a second apart and how late the server's
   * front door stamps (a pause of its own: the emulator's gate thread stalled 100-200 ms on a loaded
   * machine), while clock skew does not matter to a duration (drift is parts per million). Measured
   * against the emulator with its limits kept by a gate on its own thread, run 2 of bench:pace:
   * 25 ms gave 2 × 429 in 2 runs, 50 ms 3 × 429 in 12 (each cutting the endpoint's rate for a minute:
   * a run of 20 s took 60), 100 ms none in 4, nor in the runs before the gate. @default 100
   */
  readonly secondMs?: number;
}

export const DEFAULT_SAFETY_MARGINS = Object.freeze({ minuteMs: 250, secondMs: 100 });

/**
 * @default 32: enough to fill 40 requests per second at up to 800 ms per request. A real server
 * answers a page in 100–500 ms (plus jitter); with split walks a stream keeps that many requests
 * going, and 16 capped the combined rate at 300 ms ± 20 % with a few slow answers.
 */
export const DEFAULT_MAX_IN_FLIGHT = 32;

export interface SchedulerOptions {
  /** The limits to keep within, per API key. Usually `DEFAULT_RATE_LIMITS`. */
  readonly limits: RateLimits;
  /** Time added to every sliding window. @default { minuteMs: 250, secondMs: 100 } */
  readonly safetyMarginMs?: SafetyMargins;
  /** Most requests in flight at once. @default 32 */
  readonly maxInFlight?: number;
  /** Receives a debug line per 429 (pause and new rate). @default no logging */
  readonly logger?: Logger;
  /** Current time in ms. @default Date.now (looked up on each call, so fake timers apply) */
  readonly now?: () => number;
}
