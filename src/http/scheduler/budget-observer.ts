import type { BudgetStats, RequestBudget, ScheduleOptions } from './budget.js';

/**
 * What a progress display wants to know of the request budget: which lanes have requests waiting
 * for it, and which endpoints the server refused with 429. Observing from outside keeps the
 * scheduler free of display concerns.
 */
export interface BudgetObserver {
  /** A request of `lane` to `endpoint` is waiting for the budget. */
  queued(endpoint: string, lane: string | undefined): void;
  /** It left the queue: `started` (counted against the limits), or cancelled before it could. */
  dequeued(lane: string | undefined, started: boolean): void;
  /** The server answered 429 on `endpoint`. */
  rateLimited(endpoint: string, retryAfterMs: number | undefined): void;
}

/** `inner`, reporting to `observer`; scheduling, limits and order are exactly `inner`'s. */
export function observedBudget(inner: RequestBudget, observer: BudgetObserver): RequestBudget {
  return {
    schedule<T>(endpoint: string, task: (sent: () => void) => Promise<T>, options?: ScheduleOptions): Promise<T> {
      const lane = options?.lane;
      observer.queued(endpoint, lane);
      let started = false;
      const result = inner.schedule(
        endpoint,
        (sent) => {
          started = true;
          observer.dequeued(lane, true);
          return task(sent);
        },
        options,
      );
      // A request cancelled (aborted) before it started still leaves the queue.
      return result.catch((error: unknown) => {
        if (!started) observer.dequeued(lane, false);
        throw error;
      });
    },
    onRateLimited(endpoint: string, retryAfterMs: number | undefined): void {
      observer.rateLimited(endpoint, retryAfterMs);
      inner.onRateLimited(endpoint, retryAfterMs);
    },
    stats(): BudgetStats {
      return inner.stats();
    },
    headroom(endpoint: string): number {
      return inner.headroom?.(endpoint) ?? Number.POSITIVE_INFINITY;
    },
    recentStarts(): Readonly<Record<string, readonly number[]>> {
      return inner.recentStarts?.() ?? {};
    },
    seedStarts(starts: Readonly<Record<string, readonly number[]>>): void {
      inner.seedStarts?.(starts);
    },
    close(reason: unknown): void {
      inner.close?.(reason);
    },
  };
}
