import { describe, expect, it } from 'vitest';
import {
  isCovered,
  keepRunning,
  ledgerUnits,
  ledgerGaps,
  mergeIntervals,
  readLedger,
  runningOf,
  subtractIntervals,
  updateStreamLedger,
  withCheckpoint,
  withDone,
  withRequested,
  windowsOf,
  withoutCursor,
  type StreamLedger,
} from '../../../../src/state/books/ledger.js';

const D = 86_400_000;
const T0 = Date.parse('2026-10-01T00:00:00Z');
const day = (n: number): string => new Date(T0 + n * D).toISOString();
const win = (a: number, b: number): { fromMs: number; toMs: number } => ({ fromMs: T0 + a * D, toMs: T0 + b * D });
const EMPTY: StreamLedger = { requested: [], done: [], running: [] };

describe('interval arithmetic', () => {
  it('merges overlapping and adjacent intervals and drops empty ones', () => {
    expect(mergeIntervals([win(3, 4), win(0, 1), win(1, 2), win(5, 5), win(3, 3.5)])).toEqual([win(0, 2), win(3, 4)]);
  });
  it('subtracts: what is left of [0, 10) without [2, 3) and [5, 12)', () => {
    expect(subtractIntervals([win(0, 10)], [win(5, 12), win(2, 3)])).toEqual([win(0, 2), win(3, 5)]);
    expect(subtractIntervals([win(0, 2)], [win(0, 2)])).toEqual([]);
    expect(subtractIntervals([win(0, 2), win(4, 6)], [])).toEqual([win(0, 2), win(4, 6)]);
  });
  it('a window is covered by finished windows sliced differently', () => {
    const done = [
      { from: day(0), to: day(1) },
      { from: day(1), to: day(2) },
      { from: day(3), to: day(4) },
    ];
    expect(isCovered(win(0, 2), done)).toBe(true);
    expect(isCovered(win(1, 3), done)).toBe(false);
  });
});

describe('the ledger of one stream', () => {
  it('records requests, checkpoints and finished windows; gaps are what was asked and is not done', () => {
    let s = withRequested(EMPTY, [win(0, 3)]);
    s = withRequested(s, [win(2, 5)]);
    expect(s.requested).toEqual([{ from: day(0), to: day(5) }]);
    s = withCheckpoint(s, { from: day(1), to: day(2), cursor: 'c1', rows: 100, pages: 1, since: day(0) });
    s = withCheckpoint(s, { from: day(1), to: day(2), cursor: 'c2', rows: 200, pages: 2, since: day(0) });
    expect(s.running).toEqual([{ from: day(1), to: day(2), cursor: 'c2', rows: 200, pages: 2, since: day(0) }]);
    expect(runningOf(s, win(1, 2))?.cursor).toBe('c2');
    s = withDone(s, { from: day(1), to: day(2), rows: 250, pages: 3, at: day(0) });
    s = withDone(s, { from: day(0), to: day(1), rows: 10, pages: 1, at: day(1) });
    expect(s.running).toEqual([]);
    // Finished windows that touch are one interval: the ledger grows with its gaps, not its windows.
    expect(s.done).toEqual([{ from: day(0), to: day(2), rows: 260, pages: 4, at: day(1), windows: 2 }]);
    expect(ledgerGaps(s)).toEqual([{ from: day(2), to: day(5) }]);
    s = withDone(s, { from: day(3), to: day(4), rows: 5, pages: 1, at: day(1) });
    expect(s.done.map((d) => [d.from, d.to, windowsOf(d)])).toEqual([
      [day(0), day(2), 2],
      [day(3), day(4), 1],
    ]);
    expect(ledgerGaps(s)).toEqual([
      { from: day(2), to: day(3) },
      { from: day(4), to: day(5) },
    ]);
    // Done again inside a finished interval (a repair): nothing counted twice, its time moves.
    s = withDone(s, { from: day(1), to: day(2), rows: 11, pages: 1, at: day(2) });
    expect(s.done[0]).toEqual({ from: day(0), to: day(2), rows: 260, pages: 4, at: day(2), windows: 2 });
    // Done again as its own entry: replaced, not duplicated.
    s = withDone(s, { from: day(3), to: day(4), rows: 6, pages: 1, at: day(2) });
    expect(s.done[1]).toEqual({ from: day(3), to: day(4), rows: 6, pages: 1, at: day(2) });
  });

  it('merges a ledger written one entry per window (the format before intervals) at its next finished window', () => {
    const old: StreamLedger = {
      ...EMPTY,
      done: [0, 1, 2, 4].map((n) => ({ from: day(n), to: day(n + 1), rows: n, pages: 1, at: day(n) })),
    };
    expect(isCovered(win(0, 3), old.done)).toBe(true);
    const s = withDone(old, { from: day(5), to: day(6), rows: 7, pages: 1, at: day(6) });
    expect(s.done).toEqual([
      { from: day(0), to: day(3), rows: 3, pages: 3, at: day(2), windows: 3 },
      { from: day(4), to: day(6), rows: 11, pages: 2, at: day(6), windows: 2 },
    ]);
  });

  it('units: done windows skipped, a run of open windows joined into one unit that resumes its own checkpoint', () => {
    let s = withDone(EMPTY, { from: day(2), to: day(3), rows: 1, pages: 1, at: day(3) });
    s = withCheckpoint(s, { from: day(3), to: day(6), cursor: 'c', rows: 4, pages: 2, since: day(3) });
    const windows = [0, 1, 2, 3, 4, 5].map((n) => win(n, n + 1));
    expect(ledgerUnits(s, windows, false).map((u) => [u.window, u.done === true, u.resumed?.cursor])).toEqual(
      windows.map((w, i) => [w, i === 2, undefined]),
    );
    expect(ledgerUnits(s, windows, false, true)).toEqual([
      { window: win(0, 2), windows: 2 },
      { window: win(2, 3), done: true },
      { window: win(3, 6), windows: 3, resumed: s.running[0] },
    ]);
    expect(ledgerUnits(s, windows, true, true)).toEqual([{ window: win(0, 6), windows: 6 }]);
  });

  it('a refused cursor drops the checkpoint; a new run keeps only the checkpoints of its own windows', () => {
    let s = withCheckpoint(EMPTY, { from: day(0), to: day(1), cursor: 'a', rows: 1, pages: 1, since: day(0) });
    s = withCheckpoint(s, { from: day(1), to: day(3), cursor: 'b', rows: 1, pages: 1, since: day(0) });
    expect(withoutCursor(s, { from: day(0), to: day(1) }).running.map((r) => r.cursor)).toEqual(['b']);
    expect(keepRunning(s, [win(0, 1), win(1, 2), win(2, 3)]).running.map((r) => r.cursor)).toEqual(['a']);
  });

  it('reads the section from a state document, and refuses one that is not a ledger', () => {
    expect(readLedger({ sections: {} })).toEqual({ version: 1, streams: {} });
    const ledger = updateStreamLedger(undefined, 'events:*', (s) => withRequested(s, [win(0, 1)]));
    expect(readLedger({ sections: { backfills: ledger } }).streams['events:*']?.requested).toEqual([
      { from: day(0), to: day(1) },
    ]);
    expect(() => readLedger({ sections: { backfills: { version: 9 } } })).toThrow(
      /not a backfill ledger.*remove that section/,
    );
  });
});
