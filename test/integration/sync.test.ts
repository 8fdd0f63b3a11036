import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { traces } from '../../connectors/traces.js';
import { StateStore } from '../../src/state/store.js';
import { expectTableMatches, statePathOf, syncOnce } from '../fakes/harness.js';
import { PIPELINE_DESTINATIONS, pipelineHarness } from '../fixtures/bigquery/pipeline-target.js';
import { dir, emulator } from '../fakes/lifecycle.js';

describe.each(PIPELINE_DESTINATIONS)('sync against the emulator into $name', (target) => {
  const { syncOnce, readTable, expectWarehouseMatches } = pipelineHarness(target);

  it('a * sync of three projects loads every resource exactly, then a second sync reads only the new window', async () => {
    // 150 a project (was 400): every resource of three projects still, one unsplit * walk either way.
    const emu = await emulator({ seed: 7, eventsPerProject: 150 });
    const d = dir();
    const first = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, project: '*' });
    expect(first.ok, JSON.stringify(first.streams.map((s) => [s.resource, s.scope, s.outcome, s.error?.message]))).toBe(
      true,
    );
    // Events, users, conversations: one * walk each; traces, signals and signal groups: one walk per discovered project.
    expect(first.streams.map((s) => `${s.resource}:${s.scope}`).sort()).toEqual(
      [
        'conversations:*',
        'events:*',
        'users:*',
        'signals:alpha',
        'signals:beta',
        'signals:default',
        'signal_groups:alpha',
        'signal_groups:beta',
        'signal_groups:default',
        'traces:alpha',
        'traces:beta',
        'traces:default',
      ].sort(),
    );
    await expectWarehouseMatches(d, emu, first);

    // Ids repeated across projects are distinct rows; nanosecond integers are exact.
    const eventRows = await readTable(d, 'events');
    const ids = new Map<string, Set<string>>();
    for (const row of eventRows)
      ids.set(String(row.id), (ids.get(String(row.id)) ?? new Set()).add(String(row.project_id)));
    expect([...ids.values()].some((projects) => projects.size > 1)).toBe(true);
    const spans = await readTable(d, 'traces');
    expect(spans.length).toBeGreaterThan(0);
    expect(spans.every((s) => typeof s.start_time_ns === 'bigint')).toBe(true);
    expect(spans.some((s) => (s.start_time_ns as bigint) % 1_000_000n !== 0n)).toBe(true);

    for (const p of ['default', 'alpha', 'beta']) emu.addEvents(p, 10);
    emu.resetStats();
    const second = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, project: '*' });
    expect(second.ok).toBe(true);
    const ev = second.streams.find((s) => s.resource === 'events');
    expect(ev?.rows).toBeLessThan(100); // the lookback window, not all history
    expect(ev?.pages).toBe(1);
    await expectWarehouseMatches(d, emu, second);
  });

  it('reads one project without the header and fills project_id with "default"', async () => {
    const emu = await emulator({ seed: 3, eventsPerProject: 120 });
    const d = dir();
    const summary = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [events, traces] });
    expect(summary.ok).toBe(true);
    const rows = await readTable(d, 'events');
    expect(new Set(rows.map((r) => r.project_id))).toEqual(new Set(['default']));
    expectTableMatches(rows, emu.snapshot('events', 'default'), 'id');
  });

  it('narrows * with --project-ids and uses that list for per-project endpoints', async () => {
    const emu = await emulator({ seed: 4, eventsPerProject: 100 });
    const d = dir();
    const summary = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      project: '*',
      projectIds: ['beta', 'alpha'],
    });
    expect(summary.ok).toBe(true);
    expect(summary.streams.map((s) => `${s.resource}:${s.scope}`).sort()).toContain('events:*[alpha,beta]');
    expect(summary.streams.map((s) => `${s.resource}:${s.scope}`)).not.toContain('traces:default');
    const rows = await readTable(d, 'events');
    expect(new Set(rows.map((r) => r.project_id))).toEqual(new Set(['alpha', 'beta']));
    expectTableMatches(rows, [...emu.snapshot('events', 'alpha'), ...emu.snapshot('events', 'beta')], 'id');
  });

  it('a page repeating a row loads it once', async () => {
    const emu = await emulator({ seed: 5, eventsPerProject: 300, faults: { rate: 1, kinds: ['duplicate_row'] } });
    const d = dir();
    const summary = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, project: '*', resources: [events] });
    expect(summary.ok).toBe(true);
    expect(emu.stats().faults.duplicate_row).toBeGreaterThan(0);
    expectTableMatches(await readTable(d, 'events'), emu.snapshot('events'), 'id');
  });

  it('oldest-first order gives the same tables as newest-first', async () => {
    const emu = await emulator({ seed: 6, eventsPerProject: 250, order: 'asc' });
    const d = dir();
    const summary = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, project: '*' });
    expect(summary.ok).toBe(true);
    await expectWarehouseMatches(d, emu, summary);
  });

  it('rows sharing one timestamp at the window edge, and late rows inside the lookback, are neither lost nor duplicated', async () => {
    const emu = await emulator({ seed: 8, eventsPerProject: 50 });
    const d = dir();
    await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [events] });
    const mark = Date.parse((await StateStore.read(statePathOf(d))).streams['events:default']?.mark ?? '');
    expect(Number.isNaN(mark)).toBe(false);
    // Exactly at the edge (the first sync read [.., mark)), just before it (indexed late), and after.
    emu.addEvents('default', 4, { timestamp: mark });
    emu.addEvents('default', 3, { timestamp: mark - 1 });
    emu.addEvents('default', 2, { timestamp: mark - 60_000 });
    const second = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [events] });
    expect(second.ok).toBe(true);
    expectTableMatches(await readTable(d, 'events'), emu.snapshot('events', 'default'), 'id');
  });

  it('users and conversations that changed since the last sync are replaced by their new version', async () => {
    const emu = await emulator({ seed: 9, eventsPerProject: 200 });
    const d = dir();
    await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, project: '*' });
    // Stamped after the first run's start and before the second's (no wait for the clock to move).
    const between = Date.now() - 1;
    for (const p of ['default', 'alpha']) emu.addEvents(p, 30, { timestamp: between });
    await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, project: '*' });
    expectTableMatches(await readTable(d, 'users'), emu.snapshot('users'), 'id');
    expectTableMatches(await readTable(d, 'conversations'), emu.snapshot('conversations'), 'id');
  });

  it('the real service header name is a setting', async () => {
    const emu = await emulator({ seed: 10, eventsPerProject: 60, projectHeader: 'X-Raindrop-Project-Id' });
    const d = dir();
    const summary = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      project: 'alpha',
      resources: [events],
      projectHeader: 'X-Raindrop-Project-Id',
    });
    expect(summary.ok).toBe(true);
    expectTableMatches(await readTable(d, 'events'), emu.snapshot('events', 'alpha'), 'id');
  });
});

describe('authentication and project scope errors', () => {
  it('the write key gets a clear 401 message, no retry, and nothing moves', async () => {
    const emu = await emulator({ seed: 1, eventsPerProject: 20 });
    const d = dir();
    const summary = await syncOnce({ baseUrl: emu.url, apiKey: emu.writeKey, dir: d, resources: [events] });
    expect(summary.ok).toBe(false);
    const err = summary.streams[0]?.error;
    expect(err?.message).toMatch(/API key was rejected \(401\).*Organization API Key/);
    expect(err?.message).not.toContain(emu.writeKey);
    // No retry: a first sync's one round trip (the timeseries over all history and over its last
    // two months, sent at once), each request once.
    expect(emu.stats().byEndpoint).toEqual({ '/v1/events/timeseries': 2 });
  });

  it('an archived project gets a 403 message naming the slug', async () => {
    const emu = await emulator({ seed: 1, eventsPerProject: 20 });
    const summary = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: dir(),
      project: 'legacy',
      resources: [events],
    });
    expect(summary.streams[0]?.error?.message).toMatch(/project "legacy" was refused \(403\)/);
    expect(emu.stats().byEndpoint).toEqual({ '/v1/events/timeseries': 2 }); // one round trip, no retry
  });
});
