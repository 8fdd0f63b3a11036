import { describe, expect, it } from 'vitest';
import { ConcurrencyController, type ConcurrencyOptions } from '../../../src/sync/concurrency.js';

/** A fake clock the test moves by hand. */
function fakeClock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000_000;
  return { now: () => t, advance: (ms) => (t += ms) };
}

function controller(options: Partial<ConcurrencyOptions> & { max: number }): {
  c: ConcurrencyController;
  clock: ReturnType<typeof fakeClock>;
} {
  const clock = fakeClock();
  return { c: new ConcurrencyController({ now: clock.now, ...options }), clock };
}

const network = { waitedMs: 0, latencyMs: 300 };
const budget = { waitedMs: 900, latencyMs: 100 };

describe('ConcurrencyController', () => {
  it('says within a few requests whether they wait on the network or the budget, where the limit follows by one walk a period', () => {
    const { c, clock } = controller({ max: 16, initial: 8 });
    for (let i = 0; i < 20; i += 1) {
      clock.advance(50);
      c.record(budget);
    }
    expect(c.networkBound).toBe(false);
    const limitBefore = c.limit;
    let samples = 0;
    while (!c.networkBound) {
      clock.advance(50);
      c.record(network);
      samples += 1;
    }
    expect(samples).toBeLessThanOrEqual(12);
    // The limit has not caught up in that time (under a second).
    expect(c.limit).toBeLessThanOrEqual(limitBefore);
  });

  it('starts small and, while requests wait on the network, grows by one per sample (doubling per round trip) up to the bound', () => {
    const { c, clock } = controller({ max: 16 });
    expect(c.limit).toBe(1);
    const rounds: number[] = [];
    for (let round = 0; round < 6; round += 1) {
      clock.advance(300);
      // Every walk running this round returns one page.
      for (let i = c.limit; i > 0; i -= 1) c.record(network);
      rounds.push(c.limit);
    }
    expect(rounds).toEqual([2, 4, 8, 16, 16, 16]);
    expect(c.peak).toBe(16);
  });

  it('shrinks by one per period while requests wait on the budget, never below the minimum', () => {
    const { c, clock } = controller({ max: 16, initial: 8, min: 2 });
    c.record(budget); // ends slow start
    expect(c.inSlowStart).toBe(false);
    const limits: number[] = [];
    for (let step = 0; step < 40; step += 1) {
      clock.advance(100);
      c.record(budget);
      limits.push(c.limit);
    }
    // One decision per 1000 ms period: 8 → 7 after the first period, … down to 2.
    expect(limits[8]).toBe(8);
    expect(limits[9]).toBe(7);
    expect(limits[19]).toBe(6);
    for (let step = 0; step < 100; step += 1) {
      clock.advance(100);
      c.record(budget);
    }
    expect(c.limit).toBe(2);
  });

  it('holds in the band between growing and shrinking', () => {
    const { c, clock } = controller({ max: 16, initial: 6 });
    const mixed = { waitedMs: 100, latencyMs: 300 }; // a quarter of the time on the budget
    for (let step = 0; step < 50; step += 1) {
      clock.advance(100);
      c.record(mixed);
    }
    expect(c.limit).toBe(6);
  });

  it('halves on a 429, once per episode, and leaves slow start', () => {
    const { c, clock } = controller({ max: 32, initial: 12 });
    expect(c.inSlowStart).toBe(true);
    c.record({ waitedMs: 0, latencyMs: 200, rateLimited: true });
    expect(c.limit).toBe(6);
    // The other requests of the same burst come back 429 too: one cut.
    c.record({ waitedMs: 0, latencyMs: 200, rateLimited: true });
    clock.advance(500);
    c.record({ waitedMs: 0, latencyMs: 200, rateLimited: true });
    expect(c.limit).toBe(6);
    expect(c.inSlowStart).toBe(false);
    // Network-bound samples right after the cut do not undo it.
    c.record(network);
    expect(c.limit).toBe(6);
    // A later 429 is a new episode.
    clock.advance(1_000);
    c.record({ waitedMs: 0, latencyMs: 200, rateLimited: true });
    expect(c.limit).toBe(3);
  });

  it('after budget-bound stretches, a network-bound period restarts slow start and catches up within a few round trips', () => {
    const { c, clock } = controller({ max: 16, initial: 2 });
    c.record(budget);
    expect(c.inSlowStart).toBe(false);
    // The first period still holds the budget-bound sample (a quarter of its time queued): hold;
    // the second is network-bound throughout.
    for (let step = 0; step < 25; step += 1) {
      clock.advance(100);
      c.record(network);
    }
    expect(c.inSlowStart).toBe(true);
    const before = c.limit;
    for (let round = 0; round < 3; round += 1) {
      clock.advance(300);
      for (let i = c.limit; i > 0; i -= 1) c.record(network);
    }
    expect(c.limit).toBeGreaterThanOrEqual(Math.min(16, before * 8));
  });

  it('against a budget of 40/s at 300 ms a request, settles where the budget is just filled (12 walks), not at the bound', () => {
    const { c, clock } = controller({ max: 64 });
    const ratePerMs = 40 / 1000;
    const latencyMs = 300;
    const history: number[] = [];
    for (let round = 0; round < 200; round += 1) {
      const walks = c.limit;
      // With `walks` sequential walks the budget passes `ratePerMs`: each request queues for what the
      // network does not cover.
      const cycleMs = Math.max(latencyMs, walks / ratePerMs);
      clock.advance(cycleMs);
      for (let i = 0; i < walks; i += 1) c.record({ waitedMs: cycleMs - latencyMs, latencyMs });
      history.push(c.limit);
    }
    const settled = history.slice(100);
    // Grows while waited/total < 0.1 (limit < 13.3), shrinks while > 0.5 (limit > 24).
    expect(Math.min(...settled)).toBeGreaterThanOrEqual(12);
    expect(Math.max(...settled)).toBeLessThanOrEqual(25);
    expect(c.peak).toBeLessThan(64);
  });

  it('a planned split starts it at the walks it needs (never lower, never past the bound), and the budget binding still shrinks it', () => {
    const { c, clock } = controller({ max: 16 });
    c.atLeast(13);
    expect(c.limit).toBe(13);
    c.atLeast(4);
    expect(c.limit, 'never lowered').toBe(13);
    c.atLeast(40);
    expect(c.limit, 'never past the bound').toBe(16);
    for (let period = 0; period < 3; period += 1) {
      clock.advance(1_000);
      for (let i = 0; i < 8; i += 1) c.record(budget);
    }
    expect(c.limit).toBeLessThan(16);
  });

  it('refuses bounds that make no sense', () => {
    const now = (): number => 0;
    expect(() => new ConcurrencyController({ max: 0, now })).toThrow(/at least 1/);
    expect(() => new ConcurrencyController({ max: 4, min: 5, now })).toThrow(/min/);
    expect(() => new ConcurrencyController({ max: 4, growBelow: 0.6, shrinkAbove: 0.5, now })).toThrow(/growBelow/);
    expect(new ConcurrencyController({ max: 4, initial: 10, now }).limit).toBe(4);
  });
});
