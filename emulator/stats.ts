/**
 * Live request counters that benchmarks read: totals, 429s, faults, and the largest request counts
 * seen in any sliding second (all endpoints) and sliding minute (per endpoint).
 */

import { SlidingWindow } from './limits.js';

export interface EmulatorStats {
  /** Every HTTP request received. */
  requests: number;
  /** Requests per path template, e.g. `/v1/events`, `/v1/events/{id}` (429s included). */
  byEndpoint: Record<string, number>;
  /** 429s sent. */
  rateLimited: number;
  /** Faults injected, by `FaultKind`. */
  faults: Record<string, number>;
  /** Largest number of accepted requests within any sliding 1-second window. */
  maxPerSecond: number;
  /** Largest number of accepted requests within any sliding 60-second window, per endpoint template. */
  maxPerMinuteByEndpoint: Record<string, number>;
  /** Arrival time (ms, emulator clock) of every request. */
  requestTimes: number[];
  /** Path and query of every request, in the order of `requestTimes`: to match arrivals with sends. */
  requestPaths: string[];
  /** 401s sent for a key that is not (or no longer) valid. */
  unauthorized: number;
  /**
   * Requests that arrived after the first 401 had been answered: what a client sent once it could
   * know its key was refused (those already in flight arrived before).
   */
  afterUnauthorized: number;
}

export class StatsRecorder {
  private current = StatsRecorder.empty();
  private perSecond = new SlidingWindow(1000);
  private perMinute = new Map<string, SlidingWindow>();

  private static empty(): EmulatorStats {
    return {
      requests: 0,
      byEndpoint: {},
      rateLimited: 0,
      faults: {},
      maxPerSecond: 0,
      maxPerMinuteByEndpoint: {},
      requestTimes: [],
      requestPaths: [],
      unauthorized: 0,
      afterUnauthorized: 0,
    };
  }

  /** Whether a 401 has been answered (requests received after it, in the server's event order, are counted). */
  private answeredUnauthorized = false;
  /** Requests admitted (past the key and the rate limiter) so far. */
  private admittedCount = 0;

  admitted(): number {
    return this.admittedCount;
  }

  received(time: number, template: string | undefined, path: string): void {
    this.current.requests++;
    if (this.answeredUnauthorized) this.current.afterUnauthorized++;
    this.current.requestTimes.push(time);
    this.current.requestPaths.push(path);
    if (template !== undefined) this.current.byEndpoint[template] = (this.current.byEndpoint[template] ?? 0) + 1;
  }

  /** A request that passed authentication and the rate limiter. */
  accepted(time: number, template: string): void {
    this.admittedCount++;
    this.perSecond.add(time);
    this.current.maxPerSecond = Math.max(this.current.maxPerSecond, this.perSecond.count(time));
    let minute = this.perMinute.get(template);
    if (!minute) {
      minute = new SlidingWindow(60_000);
      this.perMinute.set(template, minute);
    }
    minute.add(time);
    const inMinute = minute.count(time);
    const byEndpoint = this.current.maxPerMinuteByEndpoint;
    byEndpoint[template] = Math.max(byEndpoint[template] ?? 0, inMinute);
  }

  unauthorized(): void {
    this.current.unauthorized++;
    this.answeredUnauthorized = true;
  }

  rateLimited(): void {
    this.current.rateLimited++;
  }

  fault(kind: string): void {
    this.current.faults[kind] = (this.current.faults[kind] ?? 0) + 1;
  }

  /** A copy: later requests do not change it. */
  snapshot(): EmulatorStats {
    const s = this.current;
    return {
      requests: s.requests,
      byEndpoint: { ...s.byEndpoint },
      rateLimited: s.rateLimited,
      faults: { ...s.faults },
      maxPerSecond: s.maxPerSecond,
      maxPerMinuteByEndpoint: { ...s.maxPerMinuteByEndpoint },
      requestTimes: [...s.requestTimes],
      requestPaths: [...s.requestPaths],
      unauthorized: s.unauthorized,
      afterUnauthorized: s.afterUnauthorized,
    };
  }

  reset(): void {
    this.current = StatsRecorder.empty();
    this.answeredUnauthorized = false;
    this.perSecond = new SlidingWindow(1000);
    this.perMinute = new Map();
  }
}
