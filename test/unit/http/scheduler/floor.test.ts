import { describe, expect, it } from 'vitest';
import { DEFAULT_RATE_LIMITS } from '../../../../src/http/scheduler/budget.js';
import { minimumSeconds } from '../../../../src/http/scheduler/floor.js';

const L = DEFAULT_RATE_LIMITS; // 400/min per endpoint, 50/min search, 40/s, search gate 20/s

describe('minimumSeconds (the floor of the rate limits)', () => {
  it('is 0 when every request may start at once, and for nothing to do', () => {
    expect(minimumSeconds({}, L)).toBe(0);
    expect(minimumSeconds({ '/v1/events': 0, '/v1/users': -3 }, L)).toBe(0);
    expect(minimumSeconds({ '/v1/events': 40 }, L)).toBe(0);
  });

  it('is bound by the per-second limit in a burst: 41 requests need a second, 400 need nine', () => {
    expect(minimumSeconds({ '/v1/events': 41 }, L)).toBe(1);
    expect(minimumSeconds({ '/v1/events': 400 }, L)).toBe(9);
  });

  it('800 to one endpoint: 400 in the first 10 s, the next 400 once the first leave the minute, ≈ 70 s', () => {
    expect(minimumSeconds({ '/v1/events': 800 }, L)).toBe(69);
    expect(minimumSeconds({ '/v1/events': 801 }, L)).toBe(120);
    // Long runs approach 400 a minute.
    const t = minimumSeconds({ '/v1/events': 4000 }, L);
    expect(t).toBeGreaterThan(9 * 60);
    expect(t).toBeLessThan(9 * 60 + 10);
  });

  it('endpoints have their own minute windows but share the second: 400 + 400 take 20 s, not 70', () => {
    expect(minimumSeconds({ '/v1/events': 400, '/v1/users': 400 }, L)).toBe(19);
    // The combined limit alone: 6 endpoints × 400 at 40/s.
    const six = Object.fromEntries(['a', 'b', 'c', 'd', 'e', 'f'].map((e) => [`/v1/${e}`, 400]));
    expect(minimumSeconds(six, L)).toBe(59);
  });

  it('fills the busiest endpoint first, so a small endpoint does not push the end out', () => {
    // 800 events bound the end at 69 s; 30 count requests fit in the gaps of the first minute.
    expect(minimumSeconds({ '/v1/events': 800, '/v1/events/count': 30 }, L)).toBe(69);
  });

  it('search: 50 a minute, and only while combined usage is under the gate', () => {
    expect(minimumSeconds({ '/v1/events/search': 50 }, L)).toBe(2); // 20 per second at most (gate)
    expect(minimumSeconds({ '/v1/events/search': 51 }, L)).toBe(60);
  });

  it('follows the configured limits and rounds fractional counts up', () => {
    const slow = { ...L, maxRpm: 100, maxRps: 10 };
    expect(minimumSeconds({ '/v1/events': 200 }, slow)).toBe(69);
    expect(minimumSeconds({ '/v1/events': 40.2 }, L)).toBe(1);
  });

  it('handles large runs (1M events = 10k pages)', () => {
    // Each endpoint has its own minute: events' 10k pages are 25 minutes of 400, the last 400 in
    // 9 s at 40/s; traces' 5k fit beside them within the shared per-second limit.
    expect(minimumSeconds({ '/v1/events': 10_000, '/v1/traces': 5_000 }, L)).toBe(24 * 60 + 9);
  });
});

describe('minimumSeconds with the scheduler safety margins', () => {
  it('lengthens the windows: 720 requests at 40 per 1.1 s instead of per 1 s, 800 to one endpoint a quarter second later', () => {
    const limits = { maxRpm: 400, searchRpm: 50, maxRps: 40, searchGateRps: 20 };
    const margins = { minuteMs: 250, secondMs: 100 };
    const spread = { '/v1/events': 360, '/v1/conversations': 360 };
    expect(minimumSeconds(spread, limits)).toBeCloseTo(17, 6);
    expect(minimumSeconds(spread, limits, margins)).toBeCloseTo(17 * 1.1, 6);
    expect(minimumSeconds({ '/v1/events': 800 }, limits, margins)).toBeCloseTo(60.25 + 9 * 1.1, 6);
  });
});
