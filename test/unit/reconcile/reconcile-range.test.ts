import { describe, expect, it } from 'vitest';
import { reconcileRange, reconcileRequests, RECONCILE_RECENT_MS } from '../../../src/reconcile/differences.js';
import { notReconcilable } from '../../../src/reconcile/step.js';
import { RESOURCES } from '../../../connectors/index.js';

const HOUR = 3_600_000;
const MIN = 60_000;
/** A run start 37 minutes past an hour. */
const RUN = Date.UTC(2026, 10, 26, 12, 37);
const LOOKBACK = 15 * MIN;

describe('reconcileRange', () => {
  it('ends on the hour before min(mark, run start) - lookback: the open edge is never checked', () => {
    const range = reconcileRange({
      runStartMs: RUN,
      markMs: RUN,
      lookbackMs: LOOKBACK,
      startMs: undefined,
      touchedFromMs: RUN - 30 * MIN,
    });
    // 12:37 - 15 min = 12:22 -> 12:00: the 12:00 hour still takes events the next window reads.
    expect(range?.recent).toEqual({
      fromMs: Date.UTC(2026, 10, 26, 12) - RECONCILE_RECENT_MS,
      toMs: Date.UTC(2026, 10, 26, 12),
    });
    expect(range?.older).toBeUndefined();
    expect(reconcileRequests(range)).toBe(1);
    // A lookback that crosses the hour moves the edge back one more hour.
    expect(
      reconcileRange({ runStartMs: RUN, markMs: RUN, lookbackMs: 40 * MIN, startMs: undefined, touchedFromMs: RUN })
        ?.recent?.toMs,
    ).toBe(Date.UTC(2026, 10, 26, 11));
    // A stream whose mark lags the run start (its window did not finish) is checked only up to its mark.
    expect(
      reconcileRange({
        runStartMs: RUN,
        markMs: RUN - 5 * HOUR,
        lookbackMs: LOOKBACK,
        startMs: undefined,
        touchedFromMs: RUN,
      })?.recent?.toMs,
    ).toBe(Date.UTC(2026, 10, 26, 7));
  });

  it('a run that read older than two days adds one older part, from where it read, never before --start', () => {
    const first = reconcileRange({
      runStartMs: RUN,
      markMs: RUN,
      lookbackMs: LOOKBACK,
      startMs: undefined,
      touchedFromMs: 0,
    });
    expect(first?.older).toEqual({ fromMs: 0, toMs: first?.recent?.fromMs });
    expect(reconcileRequests(first)).toBe(2);
    const started = RUN - 10 * 86_400_000 + 7 * MIN;
    expect(
      reconcileRange({ runStartMs: RUN, markMs: RUN, lookbackMs: LOOKBACK, startMs: started, touchedFromMs: 0 })?.older
        ?.fromMs,
    ).toBe(started);
    // --start inside the last two days: the recent part starts there, not on an hour before it.
    const recentStart = RUN - 3 * HOUR + 5 * MIN;
    expect(
      reconcileRange({
        runStartMs: RUN,
        markMs: RUN,
        lookbackMs: LOOKBACK,
        startMs: recentStart,
        touchedFromMs: recentStart,
      }),
    ).toEqual({
      recent: { fromMs: recentStart, toMs: Date.UTC(2026, 10, 26, 12) },
    });
    // Nothing closed yet: nothing to check.
    expect(
      reconcileRange({
        runStartMs: RUN,
        markMs: RUN,
        lookbackMs: LOOKBACK,
        startMs: RUN - 20 * MIN,
        touchedFromMs: RUN - 20 * MIN,
      }),
    ).toBeUndefined();
  });
});

describe('notReconcilable', () => {
  it('checks events; says why users, conversations, traces and full-refresh resources are not checked', () => {
    const reason = (name: string): string | undefined =>
      notReconcilable(RESOURCES.find((r) => r.name === name) as (typeof RESOURCES)[number]);
    expect(reason('events')).toBeUndefined();
    expect(reason('users')).toMatch(
      /distinct user_id among events in a window .*count_by=user_id.*last_seen.*not checked/,
    );
    expect(reason('conversations')).toMatch(/distinct convo_id among events .*last_message_at.*not checked/);
    expect(reason('traces')).toMatch(/per event/);
    expect(reason('signals')).toMatch(/full refresh/);
  });
});
