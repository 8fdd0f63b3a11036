import { describe, expect, it } from 'vitest';
import { ConcurrencyController } from '../../src/http/concurrency.js';
import { newCallStats, type CallContext } from '../../src/http/client.js';
import { newSplit, partsForLatency, walkParts, withoutPartCursor, withPartCheckpoint } from '../../src/pipeline/split.js';
import type { StreamState } from '../../src/state/store.js';

const T = Date.parse('2026-11-01T00:00:00Z');
const iso = (ms: number): string => new Date(ms).toISOString();

describe('split state', () => {
  const split = newSplit({ fromMs: T, toMs: T + 300 }, [
    { fromMs: T, toMs: T + 100 },
    { fromMs: T + 100, toMs: T + 200 },
    { fromMs: T + 200, toMs: T + 300 },
  ]);
  const [a, b, c] = split.parts as [NonNullable<StreamState['split']>['parts'][number], NonNullable<StreamState['split']>['parts'][number], NonNullable<StreamState['split']>['parts'][number]];

  it('checkpoints each sub-window on its own; the mark moves only in the write that finishes the last one, in any order', () => {
    let s: StreamState = { mark: iso(T - 1), split };
    s = withPartCheckpoint(s, b, 'b1');
    s = withPartCheckpoint(s, a, 'a1');
    expect(s.split?.parts.map((p) => p.cursor)).toEqual(['a1', 'b1', undefined]);
    s = withPartCheckpoint(s, c, null);
    s = withPartCheckpoint(s, a, null);
    expect(s.mark).toBe(iso(T - 1));
    expect(s.split?.parts).toEqual([{ from: b.from, to: b.to, cursor: 'b1' }]);
    s = withPartCheckpoint(s, b, null);
    expect(s.split).toBeUndefined();
    expect(s.mark).toBe(iso(T + 300));
  });

  it('never moves a mark back, drops a refused cursor, and ignores a state without a split', () => {
    const later = withPartCheckpoint(withPartCheckpoint(withPartCheckpoint({ mark: iso(T + 999), split }, a, null), b, null), c, null);
    expect(later.mark).toBe(iso(T + 999));
    const refused = withoutPartCursor(withPartCheckpoint({ split }, a, 'a1'), a);
    expect(refused.split?.parts[0]).toEqual({ from: a.from, to: a.to });
    expect(withPartCheckpoint({ mark: iso(T) }, a, null)).toEqual({ mark: iso(T) });
  });
});

describe('partsForLatency', () => {
  it('cuts twice the walks that fill 40/s at the latency seen, at least two', () => {
    expect(partsForLatency(0)).toBe(2);
    expect(partsForLatency(100)).toBe(10);
    expect(partsForLatency(300)).toBe(26);
    expect(partsForLatency(300, 20)).toBe(14);
  });
});

describe('walkParts', () => {
  const ctx = (): CallContext => ({ resource: 'events', project: '*', lane: 'events|*', stats: newCallStats() });

  it('runs at most the controller limit at once, picks up a raised limit, and adds the sub-walks counters to the stream', async () => {
    let t = 0;
    const controller = new ConcurrencyController({ max: 3, now: () => t });
    const streamCtx = ctx();
    let running = 0;
    let peak = 0;
    const done: number[] = [];
    await walkParts([1, 2, 3, 4, 5, 6], controller, streamCtx, { now: () => t, sleep: async () => undefined }, async (part, sub) => {
      running += 1;
      peak = Math.max(peak, running);
      for (let page = 0; page < 2; page += 1) {
        await new Promise((r) => setTimeout(r, 2));
        t += 100;
        sub.ctx.stats.requests += 1;
        sub.onPage(); // no wait for budget: the controller grows
      }
      running -= 1;
      done.push(part);
    });
    expect(done.sort()).toEqual([1, 2, 3, 4, 5, 6]);
    expect(peak).toBeGreaterThan(1);
    expect(peak).toBeLessThanOrEqual(3);
    expect(streamCtx.stats.requests).toBe(12);
  });

  it('after the first failure starts no new part, lets running ones finish, and throws that failure', async () => {
    const controller = new ConcurrencyController({ max: 2, initial: 2, now: () => 0 });
    const started: number[] = [];
    const finished: number[] = [];
    const run = walkParts([1, 2, 3, 4], controller, ctx(), { now: () => 0, sleep: async () => undefined }, async (part) => {
      started.push(part);
      await new Promise((r) => setTimeout(r, part === 1 ? 1 : 20));
      if (part === 1) throw new Error('part 1 failed');
      finished.push(part);
    });
    await expect(run).rejects.toThrow('part 1 failed');
    expect(started).toEqual([1, 2]);
    expect(finished).toEqual([2]);
  });
});
