import { describe, expect, it } from 'vitest';
import { RESOURCES } from '../../connectors/index.js';
import { events } from '../../connectors/events.js';
import { traces } from '../../connectors/traces.js';
import type { Emulator } from '../../emulator/index.js';
import { systemClock } from '../../src/core/clock.js';
import type { Clock } from '../../src/core/types.js';
import { cursorMillis } from '../../src/normalize/normalize.js';
import { readsByParent } from '../../src/sync/traces/probe.js';
import { owedTraces } from '../fakes/owed.js';
import { StateStore } from '../../src/state/store.js';
import { runCli } from '../fakes/cli.js';
import { dbPathOf, expectTableMatches, readTable, statePathOf, syncOnce } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

const ENRICH_MS = 1500;

/** How far after its event the emulator starts an event's spans, at most (as in test/fakes/server-matrix.ts). */
const SPAN_SPREAD_MS = 2_500;

/**
 * A clock that a test moves forward instead of sleeping: the emulator's (when enrichment falls due)
 * and, in-process, the run's. The events keep the timestamps they were added with, so every later
 * window still ends after them.
 */
function movableClock(): Clock & { readonly forward: (ms: number) => void } {
  let ahead = 0;
  return {
    now: () => Date.now() + ahead,
    sleep: systemClock.sleep,
    forward: (ms) => {
      ahead += ms;
    },
  };
}

/** Every table equals the API's `default` project as served now, up to `cutoffMs` on each cursor field. */
async function expectExact(d: string, emu: Emulator, cutoffMs: number): Promise<void> {
  for (const resource of RESOURCES) {
    const expected = emu.snapshot(resource.name, 'default').filter((r) => (cursorMillis(resource, r) ?? 0) < cutoffMs);
    expectTableMatches(await readTable(d, resource.name), expected, resource.key, resource.name);
  }
}

/**
 * The emulator in its real-service flavor (the vendor SDK's shapes): `X-Raindrop-Project-Id` only,
 * traces by `event_id` only, users filtered on `last_seen`, conversations on `started_at` only,
 * events enriched `ENRICH_MS` after they appear, signal groups.
 */
describe('sync against the real-service flavor with only --base-url and --api-key', () => {
  it('ends exact in every table, enriched fields and per-event traces included', async () => {
    const clock = movableClock();
    const emu = await emulator({
      flavor: 'real',
      seed: 31,
      eventsPerProject: 250,
      enrichAfterMs: ENRICH_MS,
      now: clock.now,
    });
    const d = dir();
    // Not enriched yet when the first sync reads them. Dated SPAN_SPREAD_MS back: the spans of an event
    // start up to that long after it and come with it, so all of theirs start before the cut-off below
    // (a first sync quicker than that left a span past it, in the warehouse but not in the expected set).
    const fresh = emu.addEvents('default', 30, { timestamp: Date.now() - SPAN_SPREAD_MS });
    expect(fresh.some((e) => e.tool_calls !== undefined || e.topics !== undefined)).toBe(true);
    // QUERY_API_BASE_URL and QUERY_API_KEY are the only settings (runCli passes them in the environment).
    // Beside where to write, one pacing flag: the emulator enforces no limits and pacing is not the
    // point (the ~280 per-event reads waited ~7 s at the documented 40 a second). Unpaced, the
    // warning below still shows when the run's signal does not allow many waiters (tried).
    const storage = [
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
      '--log-level',
      'warn',
      '--max-rps',
      '100000',
    ];
    const first = await runCli(emu, ['sync', ...storage]);
    expect(first.code, first.stdout + first.stderr).toBe(0);
    // Hundreds of per-event requests listen to the run's stop signal: no Node warning on stderr
    // (it would tear the live display on a terminal).
    expect(first.stderr).not.toMatch(/MaxListenersExceededWarning/);
    const doc = await StateStore.read(statePathOf(d));
    expect(readsByParent(doc, traces)).toBe(true);
    expect(Object.values(await owedTraces(dbPathOf(d))).reduce((a, b) => a + b, 0)).toBe(0);
    expect(doc.streams['events:default']?.lateness?.records).toBeGreaterThan(0);

    clock.forward(ENRICH_MS + 200); // the fresh events' enrichment falls due
    emu.resetStats();
    const secondStart = Date.now();
    const second = await runCli(emu, ['sync', ...storage]);
    expect(second.code, second.stdout + second.stderr).toBe(0);
    await expectExact(d, emu, secondStart);
    const stats = emu.stats();
    // Nothing new: about one request per list (the lookback page of events, one page of the others).
    expect(stats.byEndpoint['/v1/events']).toBe(1);
    expect(stats.byEndpoint['/v1/users']).toBe(1);
    expect(stats.byEndpoint['/v1/conversations']).toBe(1);
    expect(stats.byEndpoint['/v1/traces'] ?? 0).toBe(0);
  });

  it('the settle re-read brings in fields enriched after the lookback has passed', async () => {
    const clock = movableClock();
    const emu = await emulator({
      flavor: 'real',
      seed: 32,
      eventsPerProject: 200,
      enrichAfterMs: ENRICH_MS,
      now: clock.now,
    });
    const d = dir();
    emu.addEvents('default', 40);
    // No lookback: only the settle pass can see the enrichment.
    const run = {
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      resources: [events],
      lookbackMs: 0,
      settleMs: ENRICH_MS + 500,
      clock,
    };
    const first = await syncOnce(run);
    expect(first.ok).toBe(true);
    const firstStart = Date.parse(first.startedAt);
    const rows = await readTable(d, 'events');
    expect(rows.some((r) => r.tool_calls === null || r.tool_calls === undefined)).toBe(true);

    clock.forward(ENRICH_MS + 1000); // the enrichment falls due, and the first run's window settles
    emu.resetStats();
    const second = await syncOnce(run);
    expect(second.ok).toBe(true);
    expect(emu.stats().byEndpoint['/v1/events']).toBe(2); // its own window, and the settle window once
    const expected = emu.snapshot('events', 'default').filter((e) => Date.parse(String(e.timestamp)) < firstStart);
    expectTableMatches(await readTable(d, 'events'), expected, 'id', 'events');
    const st = (await StateStore.read(statePathOf(d))).streams['events:default'];
    expect(Date.parse(st?.settled ?? '')).toBe(Date.parse(second.startedAt) - run.settleMs);
  });
});
