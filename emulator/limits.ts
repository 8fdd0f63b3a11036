/**
 * Sliding-window rate limits, per API key: every endpoint template `maxRpm` per 60 s, search
 * `searchRpm` per 60 s, all endpoints together `maxRps` per 1 s, and search refused once the combined
 * count of the last second has reached `searchGateRps`. Only accepted requests are counted, so a 429
 * does not consume budget. Source: spec, section Limits.
 */

export interface RateLimitOptions {
  /** Requests per sliding minute per endpoint template. */
  readonly maxRpm: number;
  /** Requests per sliding minute to `GET /v1/events/search`. */
  readonly searchRpm: number;
  /** Requests per sliding second across all endpoints. */
  readonly maxRps: number;
  /** A search is refused once the combined count in the last second has reached this. */
  readonly searchGateRps: number;
}

/**
 * The limits the spec documents (query-api.md, section Limits: the overview's and the latest
 * reference's figures; one older reference states 200 a minute and 20 a second). The emulator keeps
 * its own copy rather than the client's defaults (src/http/scheduler/budget.ts): it is the oracle the client is
 * tested against, so a change to the client's figures must not move the server's with it.
 */
export const SPEC_RATE_LIMITS: RateLimitOptions = Object.freeze({
  maxRpm: 400,
  searchRpm: 50,
  maxRps: 40,
  searchGateRps: 20,
});

const SECOND_MS = 1000;
const MINUTE_MS = 60_000;

/** Times (ms) of events within the last `windowMs`: t counts at `now` while t > now − windowMs. */
export class SlidingWindow {
  private readonly windowMs: number;
  private times: number[] = [];
  private head = 0;

  constructor(windowMs: number) {
    this.windowMs = windowMs;
  }

  add(time: number): void {
    this.times.push(time);
  }

  count(now: number): number {
    this.prune(now);
    return this.times.length - this.head;
  }

  /** The `index`-th oldest time still in the window. */
  nth(index: number): number | undefined {
    return this.times[this.head + index];
  }

  /** ms until enough entries leave for the count to drop below `limit` (call right after `count`). */
  waitUntilBelow(limit: number, now: number): number {
    const inWindow = this.times.length - this.head;
    const leaving = this.nth(Math.max(0, inWindow - limit));
    return leaving === undefined ? 0 : leaving + this.windowMs - now;
  }

  private prune(now: number): void {
    const cutoff = now - this.windowMs;
    while (this.head < this.times.length && this.times[this.head]! <= cutoff) this.head++;
    if (this.head > 1024 && this.head * 2 > this.times.length) {
      this.times = this.times.slice(this.head);
      this.head = 0;
    }
  }
}

export type LimitDecision =
  | { readonly allowed: true }
  | { readonly allowed: false; readonly retryAfterSeconds: number; readonly reason: string };

interface KeyWindows {
  readonly perSecond: SlidingWindow;
  readonly perEndpoint: Map<string, SlidingWindow>;
}

export class RateLimiter {
  private readonly options: RateLimitOptions;
  private readonly searchTemplate: string;
  private readonly keys = new Map<string, KeyWindows>();

  constructor(options: RateLimitOptions, searchTemplate: string) {
    this.options = options;
    this.searchTemplate = searchTemplate;
  }

  /** Decides, and when allowed counts the request. */
  admit(apiKey: string, template: string, now: number): LimitDecision {
    const windows = this.windowsOf(apiKey);
    let endpoint = windows.perEndpoint.get(template);
    if (!endpoint) {
      endpoint = new SlidingWindow(MINUTE_MS);
      windows.perEndpoint.set(template, endpoint);
    }
    const search = template === this.searchTemplate;
    const refusals: { waitMs: number; reason: string }[] = [];
    const check = (window: SlidingWindow, limit: number, reason: string): void => {
      if (window.count(now) >= limit) refusals.push({ waitMs: window.waitUntilBelow(limit, now), reason });
    };
    check(windows.perSecond, this.options.maxRps, `more than ${this.options.maxRps} requests per second`);
    check(endpoint, this.options.maxRpm, `more than ${this.options.maxRpm} requests per minute to ${template}`);
    if (search) {
      check(endpoint, this.options.searchRpm, `more than ${this.options.searchRpm} searches per minute`);
      check(
        windows.perSecond,
        this.options.searchGateRps,
        `search is paused while combined usage is at ${this.options.searchGateRps} requests per second`,
      );
    }
    if (refusals.length > 0) {
      const waitMs = Math.max(...refusals.map((r) => r.waitMs));
      return {
        allowed: false,
        retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
        reason: refusals.map((r) => r.reason).join('; '),
      };
    }
    windows.perSecond.add(now);
    endpoint.add(now);
    return { allowed: true };
  }

  private windowsOf(apiKey: string): KeyWindows {
    let windows = this.keys.get(apiKey);
    if (!windows) {
      windows = { perSecond: new SlidingWindow(SECOND_MS), perEndpoint: new Map() };
      this.keys.set(apiKey, windows);
    }
    return windows;
  }
}
