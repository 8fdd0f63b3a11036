import { describe, expect, it } from 'vitest';
import {
  evaluateFreshness,
  forecastBacklog,
  forecastLine,
  freshLine,
  spoken,
  type FreshnessFacts,
} from '../../../src/reports/freshness.js';

const NOW = Date.parse('2026-11-28T12:00:00Z');
const HOUR = 3_600_000;
const ago = (ms: number): string => new Date(NOW - ms).toISOString();

function facts(overrides: Partial<FreshnessFacts> = {}): FreshnessFacts {
  return {
    nowMs: NOW,
    published: { path: '/data/warehouse.duckdb', asOf: ago(10 * 60_000) },
    streams: [
      { resource: 'events', project: '*', asOf: ago(20 * 60_000), lastRun: { at: ago(20 * 60_000), outcome: 'ok' } },
      {
        resource: 'signals',
        project: 'alpha',
        asOf: ago(20 * 60_000),
        lastRun: { at: ago(20 * 60_000), outcome: 'ok' },
      },
    ],
    backlogs: [forecastBacklog('traces', 1200, 400, { perDay: 50_000, partialDay: false })],
    ...overrides,
  };
}

describe('the forecast of a per-event backlog', () => {
  it('drains at the budget less what keeps arriving; never when more arrives a day than the budget reads', () => {
    // 400/min is 576,000 a day; 144,000 arriving a day takes 100/min of it.
    const f = forecastBacklog('traces', 41_200, 400, { perDay: 144_000, partialDay: false });
    expect(f.wholeInSeconds).toBe(Math.ceil((41_200 / 300) * 60));
    expect(f.growthPerDay).toBe(0);
    expect(forecastLine(f)).toBe(
      'traces: 41,200 events waiting, whole in 2 h 17 min at 400/min (144,000 events arrive a day)',
    );

    const never = forecastBacklog('traces', 41_200, 400, { perDay: 756_000, partialDay: true });
    expect(never.wholeInSeconds).toBeNull();
    expect(never.growthPerDay).toBe(180_000);
    expect(forecastLine(never)).toBe(
      "traces: 41,200 events waiting, never whole at 400/min: at today's arrival rate the backlog grows by 180k a day: see docs/traces.md",
    );

    expect(forecastBacklog('traces', 0, 400).wholeInSeconds).toBe(0);
    expect(forecastLine(forecastBacklog('traces', 0, 400))).toBe('traces: whole, no events waiting');
    // Without a daily count, the least time: the budget alone.
    expect(forecastBacklog('traces', 4000, 400).wholeInSeconds).toBe(600);
  });

  it('says durations as a person does', () => {
    expect([40_000, 12 * 60_000, 103 * 60_000, 2 * HOUR, 51 * HOUR].map(spoken)).toEqual([
      '40 s',
      '12 min',
      '1 h 43 min',
      '2 h',
      '2 d 3 h',
    ]);
  });
});

describe('evaluateFreshness', () => {
  it('all within bounds: no breach, and one line saying so', () => {
    const bounds = { maxLagMs: 2 * HOUR, maxBacklogEtaMs: 6 * HOUR };
    expect(evaluateFreshness(facts(), bounds)).toEqual([]);
    expect(freshLine(facts(), bounds)).toBe(
      'FRESH: 2 streams and the published copy within --max-lag 2 h (oldest 20 min); backlog whole in 3 min ≤ --max-backlog-eta 6 h',
    );
  });

  it('one breach per copy, stream and backlog behind, each naming the resource, project, lag, bound and what to do', () => {
    const old = facts({
      published: { path: '/data/warehouse.duckdb', asOf: ago(3 * HOUR) },
      streams: [
        {
          resource: 'events',
          project: '*',
          asOf: ago(3 * HOUR),
          lastRun: { at: ago(HOUR), outcome: 'failed', error: '503' },
        },
        { resource: 'signals', project: 'alpha', asOf: ago(20 * 60_000) },
        { resource: 'traces', project: 'beta', lastRun: { at: ago(HOUR), outcome: 'failed' } },
      ],
      backlogs: [forecastBacklog('traces', 200_000, 400)],
    });
    const breaches = evaluateFreshness(old, { maxLagMs: 2 * HOUR, maxBacklogEtaMs: 6 * HOUR });
    expect(breaches.map((b) => [b.kind, b.resource, b.project, b.valueMs])).toEqual([
      ['published', 'published copy', '*', 3 * HOUR],
      ['stream', 'events', '*', 3 * HOUR],
      ['stream', 'traces', 'beta', null],
      ['backlog', 'traces', '*', 500 * 60_000],
    ]);
    expect(breaches[0]?.line).toBe(
      `STALE published copy /data/warehouse.duckdb: as of ${ago(3 * HOUR)}, lag 3 h > --max-lag 2 h: is the sync still scheduled? Its last runs: query-sync status; query-sync publish publishes what the last run stored`,
    );
    expect(breaches[1]?.line).toBe(
      `STALE events *: stored up to ${ago(3 * HOUR)}, lag 3 h > --max-lag 2 h (last run ${ago(HOUR)} failed (503)): fix what failed and run query-sync sync --resources events`,
    );
    expect(breaches[2]?.line).toMatch(
      /^STALE traces beta: never read whole \(last run .* failed; bound --max-lag 2 h\)/,
    );
    expect(breaches[3]?.line).toBe(
      'BACKLOG traces: 200,000 events waiting, whole in 8 h 20 min at 400/min > --max-backlog-eta 6 h: read fewer (--traces traced or none), or ask the vendor for a higher limit (docs/traces.md)',
    );
  });

  it('a backlog that never drains breaches any bound; a bound left out is not checked', () => {
    const growing = facts({ backlogs: [forecastBacklog('traces', 10, 400, { perDay: 600_000, partialDay: false })] });
    expect(evaluateFreshness(growing, { maxBacklogEtaMs: 365 * 24 * HOUR }).map((b) => b.valueMs)).toEqual([null]);
    expect(evaluateFreshness(growing, { maxLagMs: 2 * HOUR })).toEqual([]);
    expect(evaluateFreshness(facts({ published: { path: 'w', asOf: ago(9 * HOUR) } }), {})).toEqual([]);
  });

  it('nothing synced, or no published copy yet, is stale', () => {
    const none = evaluateFreshness(
      { nowMs: NOW, published: { path: 'w.duckdb', asOf: null }, streams: [], backlogs: [] },
      { maxLagMs: HOUR },
    );
    expect(none.map((b) => b.line)).toEqual([
      'STALE published copy w.duckdb: none yet (bound --max-lag 1 h): a sync publishes at its end; run query-sync sync, or query-sync publish',
      "STALE: no stream was ever synced in this state (bound --max-lag 1 h): run query-sync sync (are --state and --duckdb-path the sync's?)",
    ]);
  });
});
