import { describe, expect, it } from 'vitest';
import { ConcurrencyController } from '../../../../src/sync/concurrency.js';
import { newCallStats, type CallContext } from '../../../../src/http/client.js';
import { events } from '../../../../connectors/events.js';
import { MIN_STEAL_PAGES, partsForLatency, stealCut, walkParts } from '../../../../src/sync/split/plan.js';
import { newSplit, withoutPartCursor, withPartCheckpoint, withPartCut } from '../../../../src/state/books/sync.js';
import { WalkBounds } from '../../../../src/sync/walk.js';
import type { StreamState } from '../../../../src/state/document.js';

const T = Date.parse('2026-11-01T00:00:00Z');
const iso = (ms: number): string => new Date(ms).toISOString();

describe('split state', () => {
  const split = newSplit({ fromMs: T, toMs: T + 300 }, [
    { fromMs: T, toMs: T + 100 },
    { fromMs: T + 100, toMs: T + 200 },
    { fromMs: T + 200, toMs: T + 300 },
  ]);
  const [a, b, c] = split.parts as [
    NonNullable<StreamState['split']>['parts'][number],
    NonNullable<StreamState['split']>['parts'][number],
    NonNullable<StreamState['split']>['parts'][number],
  ];

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
    const later = withPartCheckpoint(
      withPartCheckpoint(withPartCheckpoint({ mark: iso(T + 999), split }, a, null), b, null),
      c,
      null,
    );
    expect(later.mark).toBe(iso(T + 999));
    const refused = withoutPartCursor(withPartCheckpoint({ split }, a, 'a1'), a);
    expect(refused.split?.parts[0]).toEqual({ from: a.from, to: a.to });
    expect(withPartCheckpoint({ mark: iso(T) }, a, null)).toEqual({ mark: iso(T) });
  });
});

describe('cutting a running sub-window (tail work-stealing)', () => {
  const split = newSplit({ fromMs: T, toMs: T + 300 }, [
    { fromMs: T, toMs: T + 100 },
    { fromMs: T + 100, toMs: T + 300 },
  ]);
  const big = split.parts[1] as NonNullable<StreamState['split']>['parts'][number];

  it('newest first: the walk keeps [cut, to) with its cursor, the far side [from, cut) is a part of its own; its checkpoints find it before and after', () => {
    let s: StreamState = { mark: iso(T - 1), split };
    const ref = { part: big, anchor: 'to' } as const;
    // A checkpoint applied before the cut lands finds the whole part by its anchor.
    s = withPartCheckpoint(s, ref, 'c1');
    s = withPartCut(s, ref, T + 150);
    expect(s.split?.parts).toEqual([
      split.parts[0],
      { from: iso(T + 150), to: iso(T + 300), cursor: 'c1' },
      { from: iso(T + 100), to: iso(T + 150) },
    ]);
    s = withPartCheckpoint(s, ref, 'c2');
    expect(s.split?.parts[1]).toEqual({ from: iso(T + 150), to: iso(T + 300), cursor: 'c2' });
    // Cut again: the anchored part is the one that keeps `to`.
    s = withPartCut(s, ref, T + 200);
    expect(s.split?.parts.map((p) => [p.from, p.to, p.cursor])).toEqual([
      [iso(T), iso(T + 100), undefined],
      [iso(T + 200), iso(T + 300), 'c2'],
      [iso(T + 150), iso(T + 200), undefined],
      [iso(T + 100), iso(T + 150), undefined],
    ]);
    // The walk stored to its cut: the far sides stay, the mark waits for them.
    s = withPartCheckpoint(s, ref, null);
    expect(s.split?.parts).toHaveLength(3);
    expect(s.mark).toBe(iso(T - 1));
  });

  it('oldest first: the walk keeps [from, cut); a cut outside the part or on a part stored to its end changes nothing', () => {
    const ref = { part: big, anchor: 'from' } as const;
    let s: StreamState = withPartCut({ split }, ref, T + 250);
    expect(s.split?.parts.slice(1)).toEqual([
      { from: iso(T + 100), to: iso(T + 250) },
      { from: iso(T + 250), to: iso(T + 300) },
    ]);
    expect(withPartCut(s, ref, T + 260)).toEqual(s);
    expect(withPartCut(s, ref, T + 100)).toEqual(s);
    s = withPartCheckpoint(s, ref, null);
    expect(withPartCut(s, ref, T + 120)).toEqual(s);
    expect(
      withoutPartCursor(withPartCheckpoint(s, { part: split.parts[0] as typeof big }, 'x'), {
        part: split.parts[0] as typeof big,
      }).split?.parts[0],
    ).toEqual(split.parts[0]);
  });

  const rec = (ms: number): Record<string, string> => ({ id: String(ms), timestamp: iso(ms) });

  it('a walk learns its direction from its records, says what it has left, and stops past its cut; rows equal to the cut stay on one side', () => {
    for (const direction of ['desc', 'asc'] as const) {
      const bounds = new WalkBounds({ fromMs: T, toMs: T + 1000 }, events);
      const pages =
        direction === 'desc'
          ? [
              [999, 990, 980],
              [970, 960, 950],
            ]
          : [
              [0, 10, 20],
              [30, 40, 50],
            ];
      expect(bounds.left()).toBeUndefined();
      expect(bounds.observe(pages[0]!.map((ms) => rec(T + ms)))).toBe(false);
      expect(bounds.left()).toBeUndefined(); // one page: no density yet
      bounds.observe(pages[1]!.map((ms) => rec(T + ms)));
      const left = bounds.left();
      expect(left?.direction).toBe(direction);
      expect(left?.range).toEqual(
        direction === 'desc' ? { fromMs: T, toMs: T + 951 } : { fromMs: T + 50, toMs: T + 1000 },
      );
      expect(left?.pages).toBeGreaterThan(MIN_STEAL_PAGES);
      const at = stealCut(left!.range, undefined) as number;
      const far = bounds.cut(at, direction);
      expect(far).toEqual(direction === 'desc' ? { fromMs: T, toMs: at } : { fromMs: at, toMs: T + 1000 });
      // The cut's own instant is the walk's newest first, the far side's oldest first: never both, never neither.
      const inWalk = at >= bounds.window.fromMs && at < bounds.window.toMs;
      const inFar = at >= far.fromMs && at < far.toMs;
      expect(inWalk !== inFar).toBe(true);
      expect(inWalk).toBe(direction === 'desc');
      // The last row on the walk's side does not stop it; the first row of the far side does.
      const [mine, theirs] = direction === 'desc' ? [at, at - 1] : [at - 1, at];
      expect(bounds.observe([rec(mine)])).toBe(false);
      expect(bounds.observe([rec(theirs)])).toBe(true);
    }
  });

  it('a walk whose records go against their order is never cut and never stops early', () => {
    const bounds = new WalkBounds({ fromMs: T, toMs: T + 1000 }, events);
    bounds.observe([rec(T + 900), rec(T + 800)]);
    bounds.observe([rec(T + 850), rec(T + 700)]);
    expect(bounds.left()).toBeUndefined();
    bounds.window = { fromMs: T + 750, toMs: T + 1000 };
    expect(bounds.observe([rec(T + 100)])).toBe(false);
  });
});

describe('partsForLatency', () => {
  it('cuts twice the walks that fill 40/s at the latency seen, at least two', () => {
    expect(partsForLatency(0, 40)).toBe(2);
    expect(partsForLatency(100, 40)).toBe(10);
    expect(partsForLatency(300, 40)).toBe(26);
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
    await walkParts(
      [1, 2, 3, 4, 5, 6],
      controller,
      streamCtx,
      { now: () => t, sleep: async () => undefined },
      async (part, sub) => {
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
      },
    );
    expect(done.sort()).toEqual([1, 2, 3, 4, 5, 6]);
    expect(peak).toBeGreaterThan(1);
    expect(peak).toBeLessThanOrEqual(3);
    expect(streamCtx.stats.requests).toBe(12);
  });

  it('after the first failure starts no new part, lets running ones finish, and throws that failure', async () => {
    const controller = new ConcurrencyController({ max: 2, initial: 2, now: () => 0 });
    const started: number[] = [];
    const finished: number[] = [];
    // Part 2 is still running when part 1 fails, by construction: it waits for part 1 to throw, then
    // for one turn of the event loop (setImmediate runs after every pending promise job, so after the
    // runner has handled the failure and would have started part 3 in part 1's slot).
    let part1Threw!: () => void;
    const thrown = new Promise<void>((resolve) => {
      part1Threw = resolve;
    });
    let part2Started!: () => void;
    const secondRunning = new Promise<void>((resolve) => {
      part2Started = resolve;
    });
    const run = walkParts(
      [1, 2, 3, 4],
      controller,
      ctx(),
      { now: () => 0, sleep: async () => undefined },
      async (part) => {
        started.push(part);
        if (part === 1) {
          await secondRunning; // the limit is 2: part 2 starts beside it
          part1Threw();
          throw new Error('part 1 failed');
        }
        if (part === 2) part2Started();
        await thrown;
        await new Promise((r) => setImmediate(r));
        finished.push(part);
      },
    );
    await expect(run).rejects.toThrow('part 1 failed');
    expect(started).toEqual([1, 2]);
    expect(finished).toEqual([2]);
  });
});
