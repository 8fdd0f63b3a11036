import { describe, expect, it } from 'vitest';
import { settleWindow } from '../../../../src/state/books/sync.js';

const H = 3_600_000;
const M = 60_000;
const at = (ms: number): string => new Date(ms).toISOString();
const T0 = Date.parse('2026-03-01T00:00:00Z');

describe('settleWindow (the settle re-read of late-enriched events)', () => {
  const options = { runStartMs: T0 + 10 * H, lookbackMs: 15 * M, settleMs: 2 * H };

  it('a first sync reads nothing again: everything older than now − settle was read settled', () => {
    expect(settleWindow({}, options, undefined, 0)).toEqual({ settledTo: T0 + 8 * H });
  });

  it('a 15-minute schedule re-reads the 15 minutes that settled since the last run, no more', () => {
    const prevRun = options.runStartMs - 15 * M;
    const st = { mark: at(prevRun), settled: at(prevRun - 2 * H) };
    const readFrom = prevRun - 15 * M; // this run's window started at mark − lookback
    expect(settleWindow(st, options, st.mark, readFrom)).toEqual({
      window: { fromMs: prevRun - 2 * H, toMs: T0 + 8 * H },
      settledTo: T0 + 8 * H,
    });
  });

  it('after a pause longer than settle, the part this run just read (already settled) is not read twice', () => {
    const st = { mark: at(T0), settled: at(T0 - 2 * H) };
    const readFrom = T0 - 15 * M;
    expect(settleWindow(st, options, st.mark, readFrom)).toEqual({
      window: { fromMs: T0 - 2 * H, toMs: readFrom },
      settledTo: T0 + 8 * H,
    });
  });

  it('runs back to back leave a sliver for later: the settle mark does not move', () => {
    const st = { mark: at(options.runStartMs - 1000), settled: at(options.runStartMs - 1000 - 2 * H) };
    const out = settleWindow(st, options, st.mark, options.runStartMs - 1000 - 15 * M);
    expect(out.window).toBeUndefined();
    expect(out.settledTo).toBe(Date.parse(st.settled));
  });

  it('state from before the settle pass re-reads from mark − lookback − settle once', () => {
    const st = { mark: at(T0 + 9 * H) };
    const out = settleWindow(st, options, st.mark, T0 + 9 * H - 15 * M);
    expect(out.window).toEqual({ fromMs: T0 + 9 * H - 15 * M - 2 * H, toMs: T0 + 8 * H });
  });
});
