/**
 * The request budget every request of a run draws on. The HTTP layer asks it for a slot before
 * each request and tells it about 429s; the scheduler (`scheduler.ts`) is the real implementation.
 */

export interface ScheduleOptions {
  /**
   * Fairness lane, e.g. `events|alpha`. Lanes that share an endpoint take turns, so a large backfill
   * of one resource or project cannot starve the others.
   */
  readonly lane?: string;
  readonly signal?: AbortSignal;
  /**
   * Requests its caller still has to make one after another once this one is answered (a walk's
   * pages left), if it knows: within its lane, the request with the most left goes first (ties and
   * unknowns in arrival order, unknown before known: a walk that has just started). The longest
   * chain first makes a lane's walks end together instead of the largest one alone at the end.
   */
  readonly left?: number;
  /**
   * The task calls `sent` when its request goes out (the API client does, at the socket write).
   * Until then a started request counts in every window as sent now: one written more than a
   * window after it started (a stalled event loop, a slow connect) would otherwise not count
   * against the starts made meanwhile, and the server, counting it when it arrives, would.
   */
  readonly reportsSent?: boolean;
}

export interface EndpointStats {
  readonly requests: number;
  readonly rateLimited: number;
  /** Total time requests to this endpoint spent waiting for budget, in ms. */
  readonly waitedMs: number;
  /** Current allowed requests per minute (lower than configured after adapting to 429s). */
  readonly currentRpm: number;
}

export interface BudgetStats {
  readonly requests: number;
  readonly rateLimited: number;
  /** Largest number of requests started within any sliding 1-second window. */
  readonly maxPerSecond: number;
  readonly endpoints: Readonly<Record<string, EndpointStats>>;
}

export interface RequestBudget {
  /**
   * Run `task` once the budget for `endpoint` (a path template such as `/v1/events`) allows one more
   * request. Every call counts as one request against the limits from when `task` starts, or, once
   * `task` calls `sent`, from when its request really went out: a connection being opened (TCP, TLS)
   * or a busy event loop can hold a request back after it started, and the server counts it when it
   * arrives, later than its neighbours on open connections.
   */
  schedule<T>(endpoint: string, task: (sent: () => void) => Promise<T>, options?: ScheduleOptions): Promise<T>;
  /** The server answered 429 for `endpoint`: pause that bucket and lower its rate. */
  onRateLimited(endpoint: string, retryAfterMs: number | undefined): void;
  stats(): BudgetStats;
  /**
   * Requests to `endpoint` its per-minute budget still allows before it binds (configured or
   * adapted rate, minus those started within the window and those waiting). Optional: a budget
   * without it is taken as unbounded. Split walks ask it before adding a request to cut a walk.
   */
  headroom?(endpoint: string): number;
  /**
   * Start times of the requests still inside the per-endpoint minute window at `now`, per
   * endpoint: what this run spent that a run starting soon after must not spend again.
   * Optional: a budget without it carries nothing over.
   */
  recentStarts?(): Readonly<Record<string, readonly number[]>>;
  /**
   * Count requests another run (same key) started at these times as if this run had started them:
   * every window the scheduler keeps starts full where that run left it. Call before any request.
   */
  seedStarts?(starts: Readonly<Record<string, readonly number[]>>): void;
  /**
   * No request starts after this: every request waiting for the budget, and every one scheduled
   * later, is refused with `reason` (the key was rejected: nothing more may leave). Requests
   * already started are not touched. Optional: a budget without it keeps scheduling.
   */
  close?(reason: unknown): void;
}

/** Limits of the Query API. Sources: `../shared/spec/query-api.md`, section Limits. */
export interface RateLimits {
  /** Requests per sliding minute per endpoint. @default 400 */
  readonly maxRpm: number;
  /** Requests per sliding minute to `GET /v1/events/search`. @default 50 */
  readonly searchRpm: number;
  /** Requests per sliding second across all endpoints. @default 40 */
  readonly maxRps: number;
  /** A search request is sent only while combined usage in the last second is under this. @default 20 */
  readonly searchGateRps: number;
}

export const DEFAULT_RATE_LIMITS: RateLimits = Object.freeze({
  maxRpm: 400,
  searchRpm: 50,
  maxRps: 40,
  searchGateRps: 20,
});

export const SEARCH_ENDPOINT = '/v1/events/search';
