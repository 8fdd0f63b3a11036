import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { traces } from '../../connectors/traces.js';
import type { Emulator } from '../../emulator/index.js';
import { PIPELINE_DEFAULTS } from '../../src/config/index.js';
import type { BigQueryDestination } from '../../src/load/bigquery/destination.js';
import { owedTraces } from '../../src/reports/owed.js';
import { owedQuery } from '../../src/sync/traces/queue.js';
import { backfillOnce } from '../fakes/backfill-harness.js';
import {
  expectTableMatches,
  syncEngineOnce,
  syncOnce,
  verifyRepairOnce,
  withPipeline,
  type HarnessRun,
  type HarnessSummary,
} from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';
import { DAY_MS, eventsToForget } from '../fakes/real-shape-traces.js';
import { isolateNock, testBigQueryDestination } from '../fixtures/bigquery/destination.js';
import type { FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';
import { bigqueryTarget, doubleFor } from '../fixtures/bigquery/pipeline-target.js';

/**
 * Traces follow the events table on BigQuery (issue 31, item 1; DuckDB's paths are in
 * traces-owed.test.ts): the dataset keeps the trace book (`_query_sync_children`, appended in
 * the transaction of each traces batch), and the events that owe their spans are derived from the
 * events table and the book, through the real client and the strict double. Every path an event
 * reaches the table by (a stream added later, a backfill, `verify --repair`, reconcile's repair, a
 * dataset restored from a copy, `reset --resources traces`) gets its spans read by the next sync.
 */

isolateNock();

const realShape = (seed: number): Promise<Emulator> =>
  emulator({ flavor: 'real', seed, eventsPerProject: 60, projects: ['default'], enrichAfterMs: 0 });

const traceReads = (emu: Emulator): number => emu.stats().byEndpoint['/v1/traces'] ?? 0;

/** A run's target: the emulator, the test's folder (its state file) and the double of that folder. */
function target(emu: Emulator, d: string) {
  doubleFor(d);
  return {
    baseUrl: emu.url,
    apiKey: emu.apiKey,
    dir: d,
    destination: bigqueryTarget.destination(d),
  };
}

async function expectEverySpan(emu: Emulator, d: string): Promise<void> {
  expectTableMatches(
    await bigqueryTarget.readTable(d, 'traces'),
    emu.snapshot('traces', 'default'),
    'span_id',
    'traces',
  );
}

/** Events in the dataset that owe their spans, per project, as the book says (at the default settle). */
async function owedInDataset(): Promise<Readonly<Record<string, number>>> {
  const destination: BigQueryDestination = testBigQueryDestination();
  try {
    const query = owedQuery(
      traces,
      events,
      { selection: 'all', settleMs: PIPELINE_DEFAULTS.sync.settleMs },
      Date.now(),
    );
    return await destination.countOwedTraces(query);
  } finally {
    await destination.close();
  }
}

/** Take events (their spans and book rows) out of the dataset, as if they had never been stored. */
function forgetEvents(fake: FakeBigQuery, ids: readonly string[]): void {
  const gone = new Set(ids);
  fake.data.set(
    'sync.events',
    fake.rows('sync', 'events').filter((r) => !gone.has(String(r['id']))),
  );
  fake.data.set(
    'sync.traces',
    fake.rows('sync', 'traces').filter((r) => !gone.has(String(r['event_id']))),
  );
  fake.data.set(
    'sync._query_sync_children',
    fake.rows('sync', '_query_sync_children').filter((r) => !gone.has(String(r['parent_id']))),
  );
}

/** The SQL of the owed queries the double ran, and the bytes each processed. */
function owedQueries(fake: FakeBigQuery): { readonly sql: string; readonly bytes: number }[] {
  return fake.queries
    .filter((q) => q.query.includes('AS p') && q.query.includes('UNIX_MILLIS'))
    .map((q) => ({ sql: q.query, bytes: fake.processed.get(q.jobId) ?? 0 }));
}

/**
 * A sync through the run object as `query-sync sync` runs it (`syncOnce`): the walk, then
 * reconcile's repair of its recent windows in the same run (`run/sync.ts`), which must have checked some.
 */
async function syncAndReconcile(opts: HarnessRun): Promise<HarnessSummary> {
  const summary = await syncOnce(opts);
  expect(summary.output.join('\n')).toMatch(/reconcile \(repair\): [1-9]\d* resource-project ranges? checked/);
  return summary;
}

describe('traces owed by every event in the BigQuery dataset (real-service shape)', () => {
  it('a stream added later: a sync of events, then one with traces, reads the spans of every event already stored; the reads are booked with the spans', async () => {
    const emu = await realShape(61);
    const d = dir();
    const run = target(emu, d);
    expect((await syncOnce({ ...run, resources: [events] })).ok).toBe(true);
    emu.resetStats();
    const fake = doubleFor(d);
    const second = await syncOnce({ ...run, resources: [events, traces] });
    expect(second.ok, JSON.stringify(second.streams.map((s) => s.error?.message))).toBe(true);
    await expectEverySpan(emu, d);
    const total = emu.snapshot('events', 'default').length;
    // One read per event (and the probe), none twice.
    expect(traceReads(emu)).toBe(total + 1);
    expect(second.streams.find((s) => s.resource === 'traces')?.owed).toBe(0);
    // The book has a read per event, appended in the transaction of the spans' MERGE and the state.
    expect(new Set(fake.rows('sync', '_query_sync_children').map((r) => r['parent_id'])).size).toBe(total);
    const withBook = fake.queries.filter((q) => q.query.includes('INSERT INTO `proj`.`sync`.`_query_sync_children`'));
    expect(withBook.length).toBeGreaterThan(0);
    for (const q of withBook) expect(q.query).toMatch(/^BEGIN TRANSACTION;\n[\s\S]*\nCOMMIT TRANSACTION;$/);
    expect(withBook.some((q) => q.query.includes('MERGE `proj`.`sync`.`traces` AS T'))).toBe(true);
    expect(fake.tables.get('sync._query_sync_children')?.timePartitioning).toEqual({ type: 'DAY', field: 'parent_at' });
    expect(await owedInDataset()).toEqual({});
    // Each owed query reads only the columns it needs, from the events and the book.
    const queries = owedQueries(fake);
    expect(queries.length).toBeGreaterThan(0);
    for (const q of queries) expect(q.sql).not.toMatch(/SELECT \*|p\.\*/);
  });

  it('a run that cannot drain them all says how many are still owed, and the next run reads the rest', async () => {
    const emu = await realShape(62);
    const d = dir();
    const run = target(emu, d);
    const total = emu.snapshot('events', 'default').length;
    expect((await syncOnce({ ...run, resources: [events] })).ok).toBe(true);
    emu.resetStats();
    // The engine alone: no flag sets the drain time (none here, so the drain ends before its first read).
    const cut = await syncEngineOnce({ ...run, resources: [traces], declared: [events, traces], traceDrainMs: 0 });
    expect(cut.ok).toBe(true);
    expect(cut.streams.find((s) => s.resource === 'traces')?.owed).toBe(total);
    expect(traceReads(emu)).toBe(1); // the probe
    expect(await owedInDataset()).toEqual({ default: total });
    // What `status` and `plan` count (reports/owed.ts), from the dataset's book.
    const counted = await withPipeline(run, 'sync', (deps) =>
      owedTraces(deps.destination, deps.state.document, [events, traces], { nowMs: Date.now() }),
    );
    expect(counted).toEqual({ traces: { default: total } });
    emu.resetStats();
    const rest = await syncOnce({ ...run, resources: [events, traces] });
    expect(rest.ok).toBe(true);
    expect(traceReads(emu)).toBe(total);
    expect(rest.streams.find((s) => s.resource === 'traces')?.owed).toBe(0);
    await expectEverySpan(emu, d);
  });

  it('a dataset restored from a copy (no state file): the next sync reads the spans still owed', async () => {
    const emu = await realShape(63);
    const d = dir();
    const run = target(emu, d);
    // The engine alone: no flag sets the drain time (none here, so spans are left owed).
    await syncEngineOnce({ ...run, resources: [events, traces], traceDrainMs: 0 });
    const copy = doubleFor(d);
    const tables = new Map(copy.tables);
    const data = new Map([...copy.data].map(([k, rows]) => [k, rows.map((r) => ({ ...r }))]));
    // A fresh folder (no state file), its own double holding the copied dataset.
    const restored = dir();
    const fake = doubleFor(restored);
    for (const [k, t] of tables) fake.tables.set(k, t);
    for (const [k, rows] of data) fake.data.set(k, rows);
    emu.resetStats();
    const next = await syncOnce({ ...target(emu, restored), resources: [events, traces] });
    expect(next.ok).toBe(true);
    expect(next.streams.find((s) => s.resource === 'traces')?.owed).toBe(0);
    await expectEverySpan(emu, restored);
  });

  it('a first backfill leaves the spans owed and says how many; the next sync reads them all', async () => {
    const emu = await realShape(64);
    const d = dir();
    const run = { ...target(emu, d), resources: [events, traces] };
    const now = Date.now();
    const backfill = await backfillOnce({ ...run, fromMs: now - 40 * DAY_MS, toMs: now, windowMs: 10 * DAY_MS });
    expect(backfill.ok, JSON.stringify(backfill.streams.map((s) => s.error?.message))).toBe(true);
    expect(backfill.owed?.[0]?.total).toBe(emu.snapshot('events', 'default').length);
    emu.resetStats();
    const sync = await syncOnce(run);
    expect(sync.ok).toBe(true);
    // One read per event (the backfill learned how the server serves spans: no probe).
    expect(traceReads(emu)).toBe(emu.snapshot('events', 'default').length);
    await expectEverySpan(emu, d);
  });

  it('a backfill of older history after a recent sync: the next sync reads the spans of the backfilled events', async () => {
    const emu = await realShape(65);
    const d = dir();
    const now = Date.now();
    const recent = now - 5 * DAY_MS;
    const run = { ...target(emu, d), resources: [events, traces] };
    expect((await syncOnce({ ...run, startMs: recent })).ok).toBe(true);
    const backfill = await backfillOnce({ ...run, fromMs: now - 40 * DAY_MS, toMs: recent, windowMs: 10 * DAY_MS });
    expect(backfill.ok, JSON.stringify(backfill)).toBe(true);
    const older = emu.snapshot('events', 'default').filter((e) => Date.parse(String(e.timestamp)) < recent).length;
    expect(older).toBeGreaterThan(0);
    expect(backfill.owed?.[0]?.total).toBe(older);
    emu.resetStats();
    expect((await syncOnce(run)).ok).toBe(true);
    expect(traceReads(emu)).toBe(older);
    await expectEverySpan(emu, d);
  });

  it('a sync after one that drained every owed event lists only the days changed since (INFORMATION_SCHEMA.PARTITIONS)', async () => {
    const emu = await realShape(71);
    const d = dir();
    const run = { ...target(emu, d), resources: [events, traces] };
    // The first run's writes stamped an hour ago (beyond the 10 min margin before its mark).
    const fake = doubleFor(d);
    fake.now = () => Date.now() - 3_600_000;
    expect((await syncOnce(run)).ok).toBe(true);
    fake.now = Date.now;
    const state = fake.rows('sync', '_query_sync_state').find((r) => r['key'] === 'section:owed-listed:traces');
    expect(state, 'the mark kept in state').toBeDefined();
    const before = fake.queries.length;
    emu.resetStats();
    expect((await syncOnce(run)).ok).toBe(true);
    const later = fake.queries.slice(before);
    expect(later.some((q) => q.query.includes('INFORMATION_SCHEMA.PARTITIONS'))).toBe(true);
    // What a full listing reads now, against what the run's listings read: the days modified since
    // the mark or within the settle horizon, never the whole table.
    const destination = testBigQueryDestination();
    await destination.owedTraces({
      ...owedQuery(traces, events, { selection: 'all', settleMs: PIPELINE_DEFAULTS.sync.settleMs }, Date.now()),
      project: 'default',
      limit: 2000,
    });
    await destination.close();
    const full = owedQueries(fake).at(-1)?.bytes ?? 0;
    const listings = owedQueries({ ...fake, queries: later } as FakeBigQuery);
    for (const q of listings) {
      expect(q.sql).toContain('DATE(p.`timestamp`) IN (');
      expect(q.bytes).toBeLessThan(full);
    }
    expect(traceReads(emu)).toBe(0);
  });

  it('a sync with --start reads only the owed events from then on, and its owed queries are pruned to those days', async () => {
    const emu = await realShape(69);
    const d = dir();
    const now = Date.now();
    const startMs = now - 3 * DAY_MS;
    const run = { ...target(emu, d), resources: [events, traces] };
    expect((await syncOnce(run)).ok).toBe(true);
    const destination = testBigQueryDestination();
    await destination.forgetTraces('traces');
    await destination.close();
    const fake = doubleFor(d);
    const before = fake.queries.length;
    emu.resetStats();
    const since = await syncOnce({ ...run, startMs });
    expect(since.ok).toBe(true);
    const recent = emu.snapshot('events', 'default').filter((e) => Date.parse(String(e.timestamp)) >= startMs).length;
    expect(recent).toBeGreaterThan(0);
    expect(traceReads(emu)).toBe(recent);
    expect(since.streams.find((s) => s.resource === 'traces')?.owed).toBe(0);
    const queries = owedQueries({ ...fake, queries: fake.queries.slice(before) } as FakeBigQuery);
    expect(queries.length).toBeGreaterThan(0);
    // Pruned: the events' days from --start on (the book's a day earlier), never the whole table.
    const whole = owedQueries(fake)[0]?.bytes ?? 0;
    for (const q of queries) {
      expect(q.sql).toMatch(/p\.`timestamp` >= TIMESTAMP '/);
      expect(q.sql).toMatch(/`parent_at` >= TIMESTAMP '/);
      expect(q.bytes).toBeLessThan(whole);
    }
  });
});

describe('traces owed after the dataset is changed by another writer (real-service shape)', () => {
  it('reset --resources traces (the book forgotten): the next sync reads every event again', async () => {
    const emu = await realShape(66);
    const d = dir();
    const run = { ...target(emu, d), resources: [events, traces] };
    expect((await syncOnce(run)).ok).toBe(true);
    const fake = doubleFor(d);
    expect(fake.rows('sync', '_query_sync_children').length).toBeGreaterThan(0);
    // What `reset --resources traces` does to the warehouse (`forgetTraceReads`): the book's reads of traces dropped.
    const destination = testBigQueryDestination();
    await destination.can.traceBook?.forgetTraces('traces');
    await destination.close();
    expect(fake.rows('sync', '_query_sync_children')).toEqual([]);
    expect(await owedInDataset()).toEqual({ default: emu.snapshot('events', 'default').length });
    emu.resetStats();
    expect((await syncOnce(run)).ok).toBe(true);
    expect(traceReads(emu)).toBe(emu.snapshot('events', 'default').length);
    await expectEverySpan(emu, d);
  });

  it("events written by verify --repair and by reconcile's repair get their spans on the next run", async () => {
    const emu = await realShape(67);
    const d = dir();
    const run = { ...target(emu, d), resources: [events, traces] };
    expect((await syncOnce(run)).ok).toBe(true);
    const fake = doubleFor(d);
    // Older events for verify (outside reconcile's recent two days), recent ones for reconcile.
    const { all, now, old, recent } = eventsToForget(emu);
    forgetEvents(
      fake,
      [...old, ...recent].map((e) => String(e.id)),
    );
    // verify --repair through the run object: count the windows, re-read those that differ (the events only).
    const verified = await verifyRepairOnce({
      ...run,
      resources: [events],
      range: { fromMs: now - 40 * DAY_MS, toMs: now - 2 * DAY_MS, windowMs: DAY_MS },
      concurrency: 2,
      batchRows: 500,
    });
    expect(verified.code, verified.output.join('\n')).toBe(0);
    expect(verified.output.join('\n')).toMatch(/repair: re-reading [1-9]\d* windows?/);
    // A writing run of its own: its row in _query_sync_runs beside the sync's.
    const runs = await bigqueryTarget.readTable(d, '_query_sync_runs');
    expect(runs.map((r) => r.command).sort()).toEqual(['sync', 'verify']);
    expect(fake.rows('sync', 'events').length).toBe(all.length - recent.length);
    // The spans of the repaired events are owed; the sync's reconcile repairs the recent events,
    // and the run after reads the spans still owed.
    expect((await owedInDataset())['default']).toBeGreaterThanOrEqual(old.length);
    emu.resetStats();
    const repaired = await syncAndReconcile(run);
    expect(repaired.ok).toBe(true);
    const next = await syncOnce(run);
    expect(next.ok).toBe(true);
    expect(next.streams.find((s) => s.resource === 'traces')?.owed).toBe(0);
    expectTableMatches(await bigqueryTarget.readTable(d, 'events'), all, 'id');
    await expectEverySpan(emu, d);
  });
});
