import { copyFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { traces } from '../../connectors/traces.js';
import type { Emulator } from '../../emulator/index.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { workingPathForReading } from '../../src/publish/layout.js';
import { backfillOnce } from '../fakes/backfill-harness.js';
import { runCli } from '../fakes/cli.js';
import { dbPathOf, expectTableMatches, readTable, statePathOf, syncEngineOnce, syncOnce } from '../fakes/harness.js';
import { owedMarkSectionName } from '../../src/state/books/traces.js';
import { StateStore } from '../../src/state/store.js';
import { dir, emulator } from '../fakes/lifecycle.js';

/**
 * Children follow the parent's table (issue 31, item 1): on the real service's shape (spans read
 * one event at a time, `event_id` required), every event in the warehouse gets its spans read,
 * whoever wrote it: a sync that did not read traces, a backfill, `verify --repair`, reconcile's
 * repair, a warehouse restored from a copy, or after `reset --resources traces`. The owed parents
 * are derived from the warehouse (the events table and the children book), not from what one run stored.
 */

const DAY_MS = 86_400_000;

const realShape = (seed: number): Promise<Emulator> =>
  emulator({ flavor: 'real', seed, eventsPerProject: 120, projects: ['default'], enrichAfterMs: 0 });

const traceReads = (emu: Emulator): number => emu.stats().byEndpoint['/v1/traces'] ?? 0;

async function expectEverySpan(emu: Emulator, d: string): Promise<void> {
  expectTableMatches(await readTable(d, 'traces'), emu.snapshot('traces', 'default'), 'span_id', 'traces');
}

/** Take events (and what hangs off them) out of the warehouse, as if they had never been stored. */
async function forgetEvents(path: string, ids: readonly string[]): Promise<void> {
  const db = await DuckDbDestination.open(path);
  try {
    const list = ids.map((id) => `'${id}'`).join(', ');
    await db.query(`DELETE FROM events WHERE id IN (${list})`);
    await db.query(`DELETE FROM traces WHERE event_id IN (${list})`);
    await db.query(`DELETE FROM _query_sync_children WHERE parent_id IN (${list})`);
  } finally {
    await db.close();
  }
}

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
      childDrainMs: 0,
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
      childDrainMs: 0,
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

describe('traces owed after the warehouse is changed by the CLI (real-service shape)', {
  tags: ['slow'],
  timeout: 240_000,
}, () => {
  const storage = (d: string): string[] => [
    '--duckdb-path',
    dbPathOf(d),
    '--state',
    statePathOf(d),
    '--log-level',
    'error',
    '--max-rps',
    '1000',
    '--max-rpm',
    '100000',
  ];

  it('reset --resources traces forgets which spans were read: the next sync reads every event again', async () => {
    const emu = await realShape(66);
    const d = dir();
    const sync = ['sync', ...storage(d), '--resources', 'events,traces'];
    const first = await runCli(emu, sync);
    expect(first.code, first.stdout + first.stderr).toBe(0);
    // A drain that ended with nothing owed marks when its listing started (BigQuery lists only the
    // days changed since: load/bigquery/children.ts); reset drops the mark with the book's reads.
    const marks = async () => (await StateStore.read(statePathOf(d))).sections[owedMarkSectionName(traces)];
    expect(Object.keys((await marks()) ?? {})).toEqual(['default']);
    const reset = await runCli(emu, ['reset', '--resources', 'traces', '--yes', ...storage(d).slice(0, 4)]);
    expect(reset.code, reset.stdout + reset.stderr).toBe(0);
    expect(reset.stdout).toContain('forgot which events records had their traces read');
    expect(await marks()).toBeUndefined();
    emu.resetStats();
    const next = await runCli(emu, sync);
    expect(next.code, next.stdout + next.stderr).toBe(0);
    expect(traceReads(emu)).toBe(emu.snapshot('events', 'default').length);
    await expectEverySpan(emu, d);
  });

  it("events written by verify --repair and by reconcile's repair get their spans on the next run", async () => {
    const emu = await realShape(67);
    const d = dir();
    const sync = ['sync', ...storage(d), '--resources', 'events,traces'];
    expect((await runCli(emu, sync)).code).toBe(0);
    const all = emu.snapshot('events', 'default');
    const now = Date.now();
    // Older events for verify (outside reconcile's recent two days), recent ones for reconcile.
    const old = all.filter((e) => Date.parse(String(e.timestamp)) < now - 5 * DAY_MS).slice(0, 6);
    const recent = all.filter((e) => Date.parse(String(e.timestamp)) > now - DAY_MS).slice(0, 4);
    expect(old.length).toBe(6);
    expect(recent.length).toBeGreaterThan(0);
    await forgetEvents(
      workingPathForReading(dbPathOf(d)),
      [...old, ...recent].map((e) => String(e.id)),
    );
    const range = [
      '--from',
      new Date(now - 40 * DAY_MS).toISOString(),
      '--to',
      new Date(now - 2 * DAY_MS).toISOString(),
    ];
    const verify = await runCli(emu, ['verify', ...range, ...storage(d), '--resources', 'events', '--repair']);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    // The sync's reconcile repairs the recent events; the next run reads the spans still owed.
    const repaired = await runCli(emu, sync);
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    const next = await runCli(emu, sync);
    expect(next.code, next.stdout + next.stderr).toBe(0);
    expectTableMatches(await readTable(d, 'events'), all, 'id');
    await expectEverySpan(emu, d);
  });

  it('a first backfill through the CLI exits 0 and says how many events owe their spans', async () => {
    const emu = await realShape(68);
    const d = dir();
    const now = Date.now();
    const backfill = await runCli(emu, [
      'backfill',
      '--from',
      new Date(now - 40 * DAY_MS).toISOString(),
      '--to',
      new Date(now).toISOString(),
      ...storage(d),
      '--resources',
      'events,traces',
    ]);
    expect(backfill.code, backfill.stdout + backfill.stderr).toBe(0);
    expect(backfill.stdout).toContain(
      `${emu.snapshot('events', 'default').length} events records owe their traces (read one at a time on this server): the next sync reads them`,
    );
    const status = await runCli(emu, ['status', ...storage(d).slice(0, 4)]);
    expect(status.stdout).toContain(`backlog ${emu.snapshot('events', 'default').length} (default `);
  });
});
