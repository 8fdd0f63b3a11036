import { describe, expect, it } from 'vitest';
import type { TraceRead } from '../../src/core/state-table.js';
import type { BigQueryDestination } from '../../src/load/bigquery/destination.js';
import type { OwedTraces } from '../../src/load/destination-capabilities.js';
import { capturedLogger, bigQueryDoubles, type testBigQueryDestination } from '../fixtures/bigquery/destination.js';
import type { FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';
import { eventRow, eventsTable } from '../fixtures/bigquery/tables.js';

/**
 * The owed listing after a complete one (`listedThrough`): only the days whose events or book
 * partition `INFORMATION_SCHEMA.PARTITIONS` says changed since the mark (less 10 minutes), and
 * those within the settle horizon; every day when that view is refused (said once). Through the
 * real client and the double, which stamps each partition its writes change.
 */

const doubles = bigQueryDoubles();

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** The events below are written (and their partitions stamped) at this instant. */
const WRITTEN = Date.parse('2024-05-03T06:00:00Z');
const MARK = WRITTEN + HOUR;

const query = (
  nowMs: number,
  settleMs: number,
  listedAtMs?: number,
): OwedTraces & {
  project: string;
  limit: number;
} => ({
  resource: 'traces',
  eventTable: 'events',
  eventKey: 'id',
  eventTime: 'timestamp',
  nowMs,
  settleMs,
  project: 'alpha',
  limit: 100,
  ...(listedAtMs === undefined ? {} : { listedThrough: { listedAtMs, fullAtMs: listedAtMs - DAY } }),
});

const read = (id: string, eventAt: string, traces: number, readAt: string): TraceRead => ({
  resource: 'traces',
  projectId: 'alpha',
  eventId: id,
  eventAt,
  traces,
  readAt,
});

async function setup(
  options: Parameters<typeof testBigQueryDestination>[0] = {},
): Promise<{ fake: FakeBigQuery; dest: BigQueryDestination }> {
  const { fake, dest } = doubles.open(options);
  fake.now = () => WRITTEN;
  await dest.write({
    table: eventsTable,
    rows: [
      eventRow('a', '2024-04-20T08:00:00Z'),
      eventRow('b', '2024-05-01T08:00:00Z'),
      eventRow('c', '2024-05-03T05:30:00Z'),
    ],
  });
  // Every event read: `c` empty while young (final only once read after 07:30 with --settle 2 h).
  await dest.writeState({
    rows: [{ key: 'version', value: '1' }],
    traceReads: [
      read('a', '2024-04-20T08:00:00.000Z', 1, '2024-05-03T05:50:00.000Z'),
      read('b', '2024-05-01T08:00:00.000Z', 2, '2024-05-03T05:50:00.000Z'),
      read('c', '2024-05-03T05:30:00.000Z', 0, '2024-05-03T05:50:00.000Z'),
    ],
  });
  return { fake, dest };
}

const lastJob = (fake: FakeBigQuery): { query: string; bytes: number } => {
  const job = fake.queries.at(-1);
  return { query: job?.query ?? '', bytes: fake.processed.get(job?.jobId ?? '') ?? 0 };
};

describe('the owed listing after a complete one', () => {
  it('lists no partition when nothing changed: the metadata query alone', async () => {
    const { fake, dest } = await setup();
    const before = fake.queries.length;
    expect(await dest.owedTraces(query(MARK + 15 * 60_000, 0, MARK))).toEqual([]);
    expect(fake.queries.slice(before).map((q) => q.query)).toEqual([
      "SELECT table_name, partition_id, last_modified_time FROM `proj`.`sync`.INFORMATION_SCHEMA.PARTITIONS WHERE table_name IN ('events', '_query_sync_children')",
    ]);
    expect(lastJob(fake).bytes).toBe(10 * 1024 * 1024);
  });

  it('finds an event backfilled into an old partition, reading that day only', async () => {
    const { fake, dest } = await setup();
    await dest.owedTraces(query(MARK, 0));
    const full = lastJob(fake).bytes;
    fake.now = () => MARK + 5 * 60_000;
    await dest.write({ table: eventsTable, rows: [eventRow('old', '2024-04-20T09:00:00Z')] });
    expect(await dest.owedTraces(query(MARK + 15 * 60_000, 0, MARK))).toEqual([
      { id: 'old', at: Date.parse('2024-04-20T09:00:00Z') },
    ]);
    const { query: sql, bytes } = lastJob(fake);
    expect(sql).toContain("DATE(p.`timestamp`) IN (DATE '2024-04-20')");
    expect(bytes).toBeGreaterThan(0);
    expect(bytes).toBeLessThan(full);
  });

  it('asks again at settle an event read empty while young, though no partition changed', async () => {
    const { dest } = await setup();
    const settle = 2 * HOUR;
    // At the mark (07:00) `c` is young; at 07:29 still; once settle-old (07:30) it is due.
    expect(await dest.owedTraces(query(Date.parse('2024-05-03T07:29:00Z'), settle, MARK))).toEqual([]);
    expect(await dest.owedTraces(query(Date.parse('2024-05-03T07:30:00Z'), settle, MARK))).toEqual([
      { id: 'c', at: Date.parse('2024-05-03T05:30:00Z') },
    ]);
  });

  it('reads every day with no mark (as after a reset), or when the last full listing is a week old', async () => {
    const { fake, dest } = await setup();
    fake.now = () => MARK + 5 * 60_000;
    await dest.forgetTraces('traces', 'alpha');
    // The DELETE empties the book's partitions, which then leave INFORMATION_SCHEMA.PARTITIONS:
    // nothing there says those days changed, so `reset` must drop the mark (no mark: every day).
    expect(await dest.owedTraces(query(MARK + 15 * 60_000, 0, MARK))).toEqual([]);
    expect((await dest.owedTraces(query(MARK + 15 * 60_000, 0))).map((u) => u.id)).toEqual(['c', 'b', 'a']);
    const before = fake.queries.length;
    const old = { ...query(MARK + 15 * 60_000, 0), listedThrough: { listedAtMs: MARK, fullAtMs: MARK - 7 * DAY } };
    expect((await dest.owedTraces(old)).map((u) => u.id)).toEqual(['c', 'b', 'a']);
    expect(fake.queries.slice(before).some((q) => q.query.includes('INFORMATION_SCHEMA'))).toBe(false);
  });

  it('reads every day when INFORMATION_SCHEMA.PARTITIONS is refused, and says so once', async () => {
    const { logger, logs } = capturedLogger();
    const { fake, dest } = await setup({ logger });
    fake.now = () => MARK + 5 * 60_000;
    await dest.write({ table: eventsTable, rows: [eventRow('old', '2024-04-20T09:00:00Z')] });
    fake.refusePartitions = true;
    expect((await dest.owedTraces(query(MARK + 15 * 60_000, 0, MARK))).map((u) => u.id)).toEqual(['old']);
    expect((await dest.owedTraces(query(MARK + 16 * 60_000, 0, MARK))).map((u) => u.id)).toEqual(['old']);
    const warned = logs.filter((l) => String(l['msg']).includes('INFORMATION_SCHEMA.PARTITIONS not readable'));
    expect(warned).toHaveLength(1);
    expect(lastJob(fake).query).not.toContain('DATE(p.');
  });
});
