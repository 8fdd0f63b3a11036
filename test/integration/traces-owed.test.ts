import { copyFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { traces } from '../../connectors/traces.js';
import { backfillOnce } from '../fakes/backfill-harness.js';
import { dbPathOf, syncEngineOnce, syncOnce } from '../fakes/harness.js';
import { dir } from '../fakes/lifecycle.js';
import { DAY_MS, expectEverySpan, realShape, traceReads } from '../fakes/real-shape-traces.js';

/**
 * Traces follow the events table (issue 31, item 1): on the real service's shape (spans read
 * one event at a time, `event_id` required), every event in the warehouse gets its spans read,
 * whoever wrote it: a sync that did not read traces, a backfill, `verify --repair`, reconcile's
 * repair, a warehouse restored from a copy, or after `reset --resources traces`. The owed events
 * are derived from the warehouse (the events table and the trace book), not from what one run stored.
 * In process here; the CLI's reset, verify --repair and backfill: traces-owed-cli.test.ts (a slow file).
 */

describe('traces owed by every event in the warehouse (real-service shape)', () => {
  it('a stream added later: a sync of events, then one with traces, reads the spans of every event already stored', async () => {
    const emu = await realShape(61);
    const d = dir();
    expect((await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [events] })).ok).toBe(true);
    emu.resetStats();
    const run = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [events, traces] });
    expect(run.ok, JSON.stringify(run.streams.map((s) => s.error?.message))).toBe(true);
    await expectEverySpan(emu, d);
    // One read per event (and the probe), none twice.
    expect(traceReads(emu)).toBe(emu.snapshot('events', 'default').length + 1);
    expect(run.streams.find((s) => s.resource === 'traces')?.owed).toBe(0);
  });

  it('a run that cannot drain them all says how many are still owed (traces alone, no drain time), and the next run reads the rest', async () => {
    const emu = await realShape(62);
    const d = dir();
    const total = emu.snapshot('events', 'default').length;
    expect((await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [events] })).ok).toBe(true);
    emu.resetStats();
    // Traces alone (their parents' table named by the declared resources), with no drain time:
    // the drain ends before its first read, and the run says what is still owed. The engine alone:
    // no flag sets the drain time.
    const cut = await syncEngineOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      resources: [traces],
      declared: [events, traces],
      traceDrainMs: 0,
    });
    expect(cut.ok).toBe(true);
    const owed = cut.streams.find((s) => s.resource === 'traces')?.owed ?? 0;
    expect(owed).toBe(total);
    expect(traceReads(emu)).toBe(1); // the probe
    emu.resetStats();
    const rest = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [events, traces] });
    expect(rest.ok).toBe(true);
    expect(traceReads(emu)).toBe(owed);
    expect(rest.streams.find((s) => s.resource === 'traces')?.owed).toBe(0);
    await expectEverySpan(emu, d);
  });

  it('a warehouse restored from a copy (no state file, a fresh container): the next sync reads the spans still owed', async () => {
    const emu = await realShape(63);
    const d = dir();
    // The engine alone: no flag sets the drain time (none here, so spans are left owed).
    await syncEngineOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      resources: [events, traces],
      traceDrainMs: 0,
    });
    const restored = dir();
    copyFileSync(dbPathOf(d), dbPathOf(restored));
    const run = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: restored, resources: [events, traces] });
    expect(run.ok).toBe(true);
    expect(run.streams.find((s) => s.resource === 'traces')?.owed).toBe(0);
    await expectEverySpan(emu, restored);
  });

  it('a first backfill on the real shape exits 0 and leaves the spans owed, saying how many; the next sync reads them all', async () => {
    const emu = await realShape(64);
    const d = dir();
    const now = Date.now();
    const backfill = await backfillOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      resources: [events, traces],
      fromMs: now - 40 * DAY_MS,
      toMs: now,
      windowMs: 10 * DAY_MS,
    });
    expect(backfill.ok, JSON.stringify(backfill.streams.map((s) => s.error?.message))).toBe(true);
    expect(backfill.owed?.[0]?.total).toBe(emu.snapshot('events', 'default').length);
    emu.resetStats();
    const sync = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [events, traces] });
    expect(sync.ok).toBe(true);
    await expectEverySpan(emu, d);
  });

  it('a backfill of older history after a recent sync: the next sync reads the spans of the backfilled events', async () => {
    const emu = await realShape(65);
    const d = dir();
    const now = Date.now();
    const recent = now - 5 * DAY_MS;
    const run = { baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [events, traces] };
    expect((await syncOnce({ ...run, startMs: recent })).ok).toBe(true);
    const backfill = await backfillOnce({ ...run, fromMs: now - 40 * DAY_MS, toMs: recent, windowMs: 10 * DAY_MS });
    expect(backfill.ok, JSON.stringify(backfill)).toBe(true);
    const older = emu.snapshot('events', 'default').filter((e) => Date.parse(String(e.timestamp)) < recent).length;
    expect(backfill.owed?.[0]?.total).toBe(older);
    emu.resetStats();
    expect((await syncOnce(run)).ok).toBe(true);
    expect(traceReads(emu)).toBe(older);
    await expectEverySpan(emu, d);
  });
});
