import { describe, expect, it } from 'vitest';
import { nextWindow } from '../../../src/state/books/sync.js';
import {
  compareWindows,
  finishedThrough,
  gapsOf,
  inWindow,
  isCovered,
  isEmptyWindow,
  mergeWindows,
  sameWindow,
  sliceWindows,
  splitBalanced,
  splitByCounts,
  splitByTime,
  splitIntoPages,
  splitPages,
  subtractWindows,
  suffixCounts,
  syncWindow,
} from '../../../src/extract/windows.js';
import { dedupeRows } from '../../../src/load/destination.js';
import { readEnvelope } from '../../../src/extract/paginate.js';
import { newCallStats } from '../../../src/http/client.js';

const T = Date.parse('2026-11-21T12:00:00Z');
const MIN = 60_000;

describe('nextWindow', () => {
  it('reads all history (or from --start) on a first sync, up to the run start', () => {
    expect(nextWindow({}, { runStartMs: T, lookbackMs: 15 * MIN })).toEqual({
      window: { fromMs: 0, toMs: T },
      cursor: undefined,
    });
    expect(nextWindow({}, { runStartMs: T, lookbackMs: 15 * MIN, startMs: T - 100 })?.window).toEqual({
      fromMs: T - 100,
      toMs: T,
    });
  });
  it('re-reads the lookback before the mark', () => {
    const mark = new Date(T - 60 * MIN).toISOString();
    expect(nextWindow({ mark }, { runStartMs: T, lookbackMs: 15 * MIN })?.window).toEqual({
      fromMs: T - 75 * MIN,
      toMs: T,
    });
  });
  it('resumes a checkpoint before anything else', () => {
    const pending = { from: new Date(0).toISOString(), to: new Date(T - MIN).toISOString(), cursor: 'c9' };
    expect(
      nextWindow({ mark: new Date(T - 5 * MIN).toISOString(), pending }, { runStartMs: T, lookbackMs: MIN }),
    ).toEqual({
      window: { fromMs: 0, toMs: T - MIN },
      cursor: 'c9',
    });
  });
  it('is done when the mark has reached the run start', () => {
    expect(nextWindow({ mark: new Date(T).toISOString() }, { runStartMs: T, lookbackMs: MIN })).toBeUndefined();
  });
});

describe('dedupeRows', () => {
  it('keeps one row per (project_id, key), the newest version, the later on a tie', () => {
    const rows = [
      { project_id: 'a', id: '1', v: '2026-01-02T00:00:00Z', n: 1 },
      { project_id: 'b', id: '1', v: '2026-01-01T00:00:00Z', n: 2 },
      { project_id: 'a', id: '1', v: '2026-01-01T00:00:00Z', n: 3 },
      { project_id: 'b', id: '1', v: '2026-01-01T00:00:00Z', n: 4 },
    ];
    const out = dedupeRows(rows, ['project_id', 'id'], 'v');
    expect(out).toHaveLength(2);
    expect(out.find((r) => r.project_id === 'a')?.n).toBe(1);
    expect(out.find((r) => r.project_id === 'b')?.n).toBe(4);
  });

  it('keys of one, two or three columns; rows with no key twice come back in order, in a new array', () => {
    const rows = [
      { project_id: 'a', id: '1', span: 's', n: 1 },
      { project_id: 'a', id: 1, span: 's', n: 2 },
      { project_id: 'a', id: '1', span: 't', n: 3 },
      { project_id: 'b', id: '1\u0000a', span: 's', n: 4 },
    ];
    expect(dedupeRows(rows, ['id']).map((r) => r.n)).toEqual([3, 4]);
    expect(dedupeRows(rows, ['project_id', 'id']).map((r) => r.n)).toEqual([3, 4]);
    expect(dedupeRows(rows, ['project_id', 'id', 'span']).map((r) => r.n)).toEqual([2, 3, 4]);
    const distinct = rows.slice(2);
    const out = dedupeRows(distinct, ['project_id', 'id']);
    expect(out).toEqual(distinct);
    expect(out).not.toBe(distinct);
  });
});

describe('readEnvelope', () => {
  const ctx = { resource: 'events', project: 'p', lane: 'x', stats: newCallStats() };
  it('accepts the documented envelope', () => {
    expect(readEnvelope({ data: [{ id: 'a' }], meta: { cursor: 'c', has_more: true } }, ctx)).toEqual({
      records: [{ id: 'a' }],
      nextCursor: 'c',
      hasMore: true,
    });
  });
  it('names the resource, the project and what was wrong', () => {
    expect(() => readEnvelope({ items: [] }, ctx)).toThrow(/\[resource events, project p\].*"data" is not an array/);
    expect(() => readEnvelope({ data: [], meta: { has_more: 'yes' } }, ctx)).toThrow(/has_more/);
    expect(() => readEnvelope('<html>', ctx)).toThrow(/non-object/);
    expect(() => readEnvelope({ data: [1], meta: { has_more: false } }, ctx)).toThrow(/element is not an object/);
  });
});

describe('extract/windows: making and comparing windows', () => {
  it('is closed at the start and open at the end', () => {
    const w = { fromMs: 10, toMs: 20 };
    expect([9, 10, 19, 20].map((ms) => inWindow(w, ms))).toEqual([false, true, true, false]);
    expect(isEmptyWindow({ fromMs: 5, toMs: 5 })).toBe(true);
    expect(isEmptyWindow({ fromMs: 6, toMs: 5 })).toBe(true);
    expect(isEmptyWindow({ fromMs: 5, toMs: 6 })).toBe(false);
    expect(sameWindow({ fromMs: 1, toMs: 2 }, { fromMs: 1, toMs: 2 })).toBe(true);
    expect(
      [
        { fromMs: 2, toMs: 3 },
        { fromMs: 1, toMs: 5 },
        { fromMs: 1, toMs: 2 },
      ].sort(compareWindows),
    ).toEqual([
      { fromMs: 1, toMs: 2 },
      { fromMs: 1, toMs: 5 },
      { fromMs: 2, toMs: 3 },
    ]);
  });

  it('slices [from, to) into windows of a length, the last one shorter, and refuses a non-positive length', () => {
    expect(sliceWindows(0, 25, 10)).toEqual([
      { fromMs: 0, toMs: 10 },
      { fromMs: 10, toMs: 20 },
      { fromMs: 20, toMs: 25 },
    ]);
    expect(sliceWindows(5, 5, 10)).toEqual([]);
    expect(() => sliceWindows(0, 10, 0)).toThrow(/positive window length/);
  });

  it('makes the sync window: all history or --start first, then the lookback before the mark', () => {
    expect(syncWindow(undefined, { runStartMs: T, lookbackMs: MIN })).toEqual({ fromMs: 0, toMs: T });
    expect(syncWindow(undefined, { runStartMs: T, lookbackMs: MIN, startMs: T })).toBeUndefined();
    expect(syncWindow(T - 10 * MIN, { runStartMs: T, lookbackMs: MIN })).toEqual({ fromMs: T - 11 * MIN, toMs: T });
    expect(syncWindow(T - 10 * MIN, { runStartMs: T, lookbackMs: MIN, startMs: T - 5 * MIN - 1 })).toEqual({
      fromMs: T - 5 * MIN - 1,
      toMs: T,
    });
    expect(syncWindow(T, { runStartMs: T, lookbackMs: MIN })).toBeUndefined();
  });
});

/** Every sub-window list must cover the window exactly: consecutive, no gap, no overlap, none empty. */
function expectExactCover(
  window: { fromMs: number; toMs: number },
  parts: readonly { fromMs: number; toMs: number }[],
): void {
  expect(parts[0]?.fromMs).toBe(window.fromMs);
  expect(parts[parts.length - 1]?.toMs).toBe(window.toMs);
  for (let i = 0; i < parts.length; i += 1) {
    const p = parts[i] as { fromMs: number; toMs: number };
    expect(p.toMs).toBeGreaterThan(p.fromMs);
    expect(Number.isInteger(p.fromMs) && Number.isInteger(p.toMs)).toBe(true);
    if (i > 0) expect(p.fromMs).toBe(parts[i - 1]?.toMs);
  }
}

describe('extract/windows: splitting', () => {
  it('splits by time into near-equal whole-ms parts that cover the window exactly', () => {
    expect(splitByTime({ fromMs: 0, toMs: 100 }, 4)).toEqual([
      { fromMs: 0, toMs: 25 },
      { fromMs: 25, toMs: 50 },
      { fromMs: 50, toMs: 75 },
      { fromMs: 75, toMs: 100 },
    ]);
    const odd = splitByTime({ fromMs: T, toMs: T + 10 }, 3);
    expectExactCover({ fromMs: T, toMs: T + 10 }, odd);
    expect(odd.map((w) => w.toMs - w.fromMs)).toEqual([3, 3, 4]);
  });

  it('a one-ms window stays one part; a short window gets at most one part per ms; an empty one none', () => {
    expect(splitByTime({ fromMs: 7, toMs: 8 }, 5)).toEqual([{ fromMs: 7, toMs: 8 }]);
    expect(splitByTime({ fromMs: 7, toMs: 10 }, 8)).toEqual([
      { fromMs: 7, toMs: 8 },
      { fromMs: 8, toMs: 9 },
      { fromMs: 9, toMs: 10 },
    ]);
    expect(splitByTime({ fromMs: 7, toMs: 7 }, 3)).toEqual([]);
    expect(splitByCounts({ fromMs: 7, toMs: 7 }, 3, [])).toEqual([]);
    expect(() => splitByTime({ fromMs: 0, toMs: 10 }, 0)).toThrow(/at least one part/);
  });

  it('a record at a cut instant belongs to exactly one sub-window (the later one)', () => {
    const parts = splitByTime({ fromMs: 0, toMs: 100 }, 4);
    for (const t of [0, 24, 25, 50, 99]) expect(parts.filter((p) => inWindow(p, t))).toHaveLength(1);
    expect(parts.findIndex((p) => inWindow(p, 25))).toBe(1);
  });

  it('balances by counts: a busy stretch gets more, shorter sub-windows', () => {
    // 900 records in [0, 10), 100 in [10, 100): 5 parts of ~200 records.
    const counts = [
      { window: { fromMs: 0, toMs: 10 }, count: 900 },
      { window: { fromMs: 10, toMs: 100 }, count: 100 },
    ];
    const parts = splitByCounts({ fromMs: 0, toMs: 100 }, 5, counts);
    expectExactCover({ fromMs: 0, toMs: 100 }, parts);
    expect(parts).toHaveLength(5);
    // 200, 400, 600, 800 records are reached at 2.2, 4.4, 6.7, 8.9 ms (evenly spread inside the bucket).
    expect(parts.map((p) => p.toMs)).toEqual([2, 4, 7, 9, 100]);
  });

  it('equal timestamps: all records at one instant cannot be split, and the cover stays exact', () => {
    const counts = [
      { window: { fromMs: 0, toMs: 50 }, count: 0 },
      { window: { fromMs: 50, toMs: 51 }, count: 1000 },
      { window: { fromMs: 51, toMs: 100 }, count: 0 },
    ];
    const parts = splitByCounts({ fromMs: 0, toMs: 100 }, 4, counts);
    expectExactCover({ fromMs: 0, toMs: 100 }, parts);
    // The busy instant 50 lies in exactly one sub-window, whole.
    expect(parts.filter((p) => inWindow(p, 50))).toHaveLength(1);
    expect(parts.length).toBeLessThanOrEqual(4);
  });

  it('falls back to time where counts say nothing, and clips buckets that overhang the window', () => {
    expect(splitByCounts({ fromMs: 0, toMs: 100 }, 2, [])).toEqual(splitByTime({ fromMs: 0, toMs: 100 }, 2));
    expect(splitByCounts({ fromMs: 0, toMs: 100 }, 2, [{ window: { fromMs: 0, toMs: 100 }, count: 0 }])).toEqual(
      splitByTime({ fromMs: 0, toMs: 100 }, 2),
    );
    // A day bucket of 1000 records of which this window holds the last 100 ms (even spread: ~1.16 records).
    const parts = splitByCounts({ fromMs: 1000, toMs: 1100 }, 2, [{ window: { fromMs: 0, toMs: 1100 }, count: 1100 }]);
    expect(parts).toEqual([
      { fromMs: 1000, toMs: 1050 },
      { fromMs: 1050, toMs: 1100 },
    ]);
  });

  it('splits balanced with a count function on a finer time split, asking one count per slice', async () => {
    // Records at ms 0..99, nine tenths of them in [0, 10).
    const times = [...Array.from({ length: 90 }, (_, i) => i / 9), ...Array.from({ length: 10 }, (_, i) => 10 + i * 9)];
    const asked: { fromMs: number; toMs: number }[] = [];
    const count = async (w: { fromMs: number; toMs: number }): Promise<number> => {
      asked.push(w);
      return times.filter((t) => inWindow(w, t)).length;
    };
    const parts = await splitBalanced({ fromMs: 0, toMs: 100 }, 2, count, 10);
    expect(asked).toHaveLength(20);
    expectExactCover({ fromMs: 0, toMs: 100 }, parts);
    expect(parts).toHaveLength(2);
    const inFirst = times.filter((t) => inWindow(parts[0] as { fromMs: number; toMs: number }, t)).length;
    expect(Math.abs(inFirst - 50)).toBeLessThanOrEqual(10);
    expect(await splitBalanced({ fromMs: 0, toMs: 100 }, 1, count)).toEqual([{ fromMs: 0, toMs: 100 }]);
    expect(asked).toHaveLength(20);
  });
});

describe('extract/windows: finished ranges and the gaps they leave', () => {
  it('merges finished ranges into a compact sorted set (overlapping and adjacent joined, empty dropped)', () => {
    expect(mergeWindows([])).toEqual([]);
    expect(
      mergeWindows([
        { fromMs: 30, toMs: 40 },
        { fromMs: 0, toMs: 10 },
        { fromMs: 10, toMs: 20 },
        { fromMs: 50, toMs: 50 },
        { fromMs: 35, toMs: 38 },
      ]),
    ).toEqual([
      { fromMs: 0, toMs: 20 },
      { fromMs: 30, toMs: 40 },
    ]);
    // A one-ms hole stays a hole.
    expect(
      mergeWindows([
        { fromMs: 0, toMs: 5 },
        { fromMs: 6, toMs: 9 },
      ]),
    ).toHaveLength(2);
  });

  it('computes the gaps left, finished in any order', () => {
    const window = { fromMs: 0, toMs: 100 };
    const finished = [
      { fromMs: 75, toMs: 100 },
      { fromMs: 0, toMs: 25 },
    ];
    expect(gapsOf(window, finished)).toEqual([{ fromMs: 25, toMs: 75 }]);
    expect(gapsOf(window, [])).toEqual([window]);
    expect(gapsOf(window, [{ fromMs: -5, toMs: 200 }])).toEqual([]);
    expect(subtractWindows([{ fromMs: 0, toMs: 10 }], [{ fromMs: 4, toMs: 5 }])).toEqual([
      { fromMs: 0, toMs: 4 },
      { fromMs: 5, toMs: 10 },
    ]);
    expect(
      isCovered(window, [
        { fromMs: 0, toMs: 50 },
        { fromMs: 50, toMs: 100 },
      ]),
    ).toBe(true);
    expect(
      isCovered(window, [
        { fromMs: 0, toMs: 50 },
        { fromMs: 51, toMs: 100 },
      ]),
    ).toBe(false);
    expect(isCovered({ fromMs: 3, toMs: 3 }, [])).toBe(true);
  });

  it('finishedThrough: how far a mark may move, stopping at the first gap however much is done after it', () => {
    const finished = [
      { fromMs: 50, toMs: 75 },
      { fromMs: 0, toMs: 25 },
      { fromMs: 75, toMs: 100 },
    ];
    expect(finishedThrough(0, finished)).toBe(25);
    expect(finishedThrough(0, [...finished, { fromMs: 25, toMs: 50 }])).toBe(100);
    expect(finishedThrough(10, finished)).toBe(25);
    expect(finishedThrough(30, finished)).toBe(30);
    expect(finishedThrough(0, [])).toBe(0);
  });
});

describe('extract/windows: finding the data with few counts', () => {
  const DAY = 86_400_000;
  it('finds 30 days of data in a window that starts at the epoch, and the split puts every part where the data is', async () => {
    const end = Date.parse('2026-11-01T00:00:00Z');
    // 3000 records, one every 864 s over the last 30 days.
    const times = Array.from({ length: 3000 }, (_, i) => end - 30 * DAY + i * 864_000);
    let asked = 0;
    const count = async (w: { fromMs: number; toMs: number }): Promise<number> => {
      asked += 1;
      return times.filter((t) => inWindow(w, t)).length;
    };
    const window = { fromMs: 0, toMs: end };
    const buckets = await suffixCounts(window, 3000, count);
    expect(asked).toBeLessThanOrEqual(6);
    expect(buckets.reduce((n, b) => n + b.count, 0)).toBe(3000);
    expectExactCover(
      window,
      buckets.map((b) => b.window),
    );
    const parts = splitByCounts(window, 6, buckets);
    expectExactCover(window, parts);
    const perPart = parts.map((p) => times.filter((t) => inWindow(p, t)).length);
    expect(perPart.reduce((a, b) => a + b, 0)).toBe(3000);
    // Coarse buckets far back cost balance, not coverage: no part is empty, none holds more than half.
    expect(Math.min(...perPart)).toBeGreaterThan(0);
    expect(Math.max(...perPart)).toBeLessThanOrEqual(1000);
  });

  it('stops at the first suffix that holds everything, and asks nothing for an empty window or no records', async () => {
    let asked = 0;
    const count = async (): Promise<number> => {
      asked += 1;
      return 10;
    };
    const buckets = await suffixCounts({ fromMs: 0, toMs: 1024 }, 10, count, 10, 0);
    expect(asked).toBe(1);
    expect(buckets).toEqual([
      { window: { fromMs: 0, toMs: 1023 }, count: 0 },
      { window: { fromMs: 1023, toMs: 1024 }, count: 10 },
    ]);
    expect(await suffixCounts({ fromMs: 5, toMs: 5 }, 10, count)).toEqual([]);
    expect(await suffixCounts({ fromMs: 0, toMs: 100 }, 0, count)).toEqual([]);
    expect(asked).toBe(1);
  });
});

describe('splitIntoPages', () => {
  const w = { fromMs: 0, toMs: 1_000 };
  // 100 buckets of 10 ms; 37 records each except a few.
  const counts = Array.from({ length: 100 }, (_, i) => ({
    window: { fromMs: i * 10, toMs: i * 10 + 10 },
    count: i % 7 === 0 ? 13 : 37,
  }));
  const total = counts.reduce((n, c) => n + c.count, 0);
  const inside = (sub: { fromMs: number; toMs: number }): number =>
    counts.filter((c) => c.window.fromMs >= sub.fromMs && c.window.toMs <= sub.toMs).reduce((n, c) => n + c.count, 0);

  it('covers the window exactly, cut at bucket edges near equal shares', () => {
    const parts = splitIntoPages(w, 4, counts, 100);
    expect(parts).toHaveLength(4);
    expect(parts[0]?.fromMs).toBe(0);
    expect(parts.at(-1)?.toMs).toBe(1_000);
    for (let i = 1; i < parts.length; i += 1) expect(parts[i]?.fromMs).toBe(parts[i - 1]?.toMs);
    for (const p of parts) expect(Math.abs(inside(p) - total / 4)).toBeLessThanOrEqual(total / 4 / 4 + 37);
  });

  it('costs no more pages than one walk where the edges allow whole pages', () => {
    const parts = splitIntoPages(w, 4, counts, 100);
    const pages = parts.reduce((n, p) => n + Math.ceil(inside(p) / 100), 0);
    expect(pages).toBeLessThanOrEqual(Math.ceil(total / 100) + 1);
    // Cutting at equal shares instead (splitByCounts) spends about one partial page per sub-window.
    const naive = splitByCounts(w, 4, counts).reduce(
      (n, p) =>
        n + Math.ceil(inside({ fromMs: Math.ceil(p.fromMs / 10) * 10, toMs: Math.ceil(p.toMs / 10) * 10 }) / 100),
      0,
    );
    expect(pages).toBeLessThanOrEqual(naive);
  });

  // Hour buckets of ~110 records (80,000 events over 30 days): few bucket edges near a share end on
  // a whole page.
  let seed = 7;
  const random = (): number => {
    seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
    return seed / 2_147_483_648;
  };
  const hours = Array.from({ length: 720 }, (_, i) => ({
    window: { fromMs: i * 10, toMs: i * 10 + 10 },
    count: 90 + Math.floor(random() * 40),
  }));
  const hoursTotal = hours.reduce((n, c) => n + c.count, 0);

  it('reads no more pages than one walk when the total is not a whole number of pages, at every number of parts', () => {
    expect(hoursTotal % 100).not.toBe(0);
    for (const parts of [2, 3, 8, 10, 16]) {
      const subs = splitIntoPages({ fromMs: 0, toMs: 7_200 }, parts, hours, 100);
      expect(subs).toHaveLength(parts);
      expect(splitPages(subs, hours, 100), `${parts} parts`).toBe(Math.ceil(hoursTotal / 100));
    }
  });

  it('reads at most one page more than one walk when the total is whole pages and no edge is', () => {
    // Drop records from the last bucket so the total is a whole number of pages.
    const last = hours[hours.length - 1] as { window: { fromMs: number; toMs: number }; count: number };
    const whole = [...hours.slice(0, -1), { window: last.window, count: last.count - (hoursTotal % 100) }];
    const total = whole.reduce((n, c) => n + c.count, 0);
    expect(total % 100).toBe(0);
    for (const parts of [2, 8, 16]) {
      const subs = splitIntoPages({ fromMs: 0, toMs: 7_200 }, parts, whole, 100);
      expect(subs).toHaveLength(parts);
      expect(splitPages(subs, whole, 100), `${parts} parts`).toBeLessThanOrEqual(total / 100 + 1);
    }
    // Edges on whole pages (minute buckets of 2 records): no page more.
    const minutes = Array.from({ length: 4_000 }, (_, i) => ({ window: { fromMs: i, toMs: i + 1 }, count: 2 }));
    const subs = splitIntoPages({ fromMs: 0, toMs: 4_000 }, 16, minutes, 100);
    expect(splitPages(subs, minutes, 100)).toBe(80);
  });

  it('keeps the parts within a quarter of a share of equal, cut on bucket edges', () => {
    const subs = splitIntoPages({ fromMs: 0, toMs: 7_200 }, 8, hours, 100);
    for (const p of subs) {
      expect(p.fromMs % 10).toBe(0);
      const records = hours
        .filter((c) => c.window.fromMs >= p.fromMs && c.window.toMs <= p.toMs)
        .reduce((n, c) => n + c.count, 0);
      // Each cut within an eighth of a share of its target: a part within a quarter of a share.
      expect(Math.abs(records - hoursTotal / 8)).toBeLessThanOrEqual(hoursTotal / 8 / 4 + 130);
    }
  });

  it('strays up to `wholeWithin` of a share for a whole page when every edge near the target wastes records', () => {
    // 800 records, then buckets of 7 (no edge from 801 to 1,499 is a whole page), then 3: 2,000
    // records, a share of 1,000. Within an eighth of it (875 to 1,125) no cut is whole; 800 is
    // within a quarter.
    const buckets = [{ window: { fromMs: 0, toMs: 10 }, count: 800 }];
    for (let i = 0; i < 171; i += 1) buckets.push({ window: { fromMs: 10 + i * 10, toMs: 20 + i * 10 }, count: 7 });
    buckets.push({ window: { fromMs: 1_720, toMs: 1_730 }, count: 3 });
    const window = { fromMs: 0, toMs: 1_730 };
    const even = splitIntoPages(window, 2, buckets, 100);
    expect(splitPages(even, buckets, 100), 'within an eighth: a page more than one walk').toBe(21);
    const whole = splitIntoPages(window, 2, buckets, 100, 1 / 4);
    expect(whole).toEqual([
      { fromMs: 0, toMs: 10 },
      { fromMs: 10, toMs: 1_730 },
    ]);
    expect(splitPages(whole, buckets, 100)).toBe(20);
    // An eighth (the default): the same cut as without.
    expect(splitIntoPages(window, 2, buckets, 100, 1 / 8)).toEqual(even);
  });

  it('falls back to time where the counts say nothing', () => {
    expect(splitIntoPages(w, 2, [], 100)).toEqual([
      { fromMs: 0, toMs: 500 },
      { fromMs: 500, toMs: 1_000 },
    ]);
    expect(splitIntoPages({ fromMs: 5, toMs: 5 }, 2, counts, 100)).toEqual([]);
  });
});
