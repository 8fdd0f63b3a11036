import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/core/log.js';
import { newCallStats } from '../../src/http/client.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import type { BigQueryDestination } from '../../src/load/bigquery/destination.js';
import { recordRun, RUNS_TABLE, type RunRecord } from '../../src/analysts/run-history.js';
import { billingJson, billingLine, formatBytes } from '../../src/run/billing.js';
import { isolateNock, testBigQueryDestination } from '../fixtures/bigquery/destination.js';
import { billedBytes, FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';
import { eventRows, eventsTable, traceRows, tracesTable } from '../fixtures/bigquery/tables.js';
import { readTable } from '../fakes/harness.js';

const MB = 1024 * 1024;

const run = (extra: Partial<RunRecord> = {}): RunRecord => ({
  command: 'sync',
  startedAt: '2026-11-26T07:00:00.000Z',
  endedAt: '2026-11-26T07:01:00.000Z',
  streams: [
    {
      resource: 'events',
      scope: '*',
      outcome: 'ok',
      rows: 3,
      pages: 1,
      windows: 1,
      seconds: 1,
      stats: { ...newCallStats(), requests: 1 },
    },
  ],
  settings: { project: '*' },
  secrets: [],
  ...extra,
});

isolateNock();

let open: BigQueryDestination | undefined;
afterEach(async () => {
  await open?.close();
  open = undefined;
});

/** What the double billed the query jobs it ran (its own statistics, as BigQuery reports them). */
function billedByDouble(fake: FakeBigQuery): number {
  const queryJobs = fake.calls('jobs.insert').map((c) => c.id ?? '');
  return queryJobs.reduce((n, id) => n + billedBytes(fake.processed.get(id) ?? 0), 0);
}

describe('bytes billed by the BigQuery destination', () => {
  it('adds up every DONE query job, per table, from the job statistics BigQuery returns', async () => {
    const fake = new FakeBigQuery('proj');
    fake.install();
    const dest = testBigQueryDestination({ logger: silentLogger() });
    open = dest;
    expect(dest.billing()).toEqual({ bytesBilled: 0, bytesProcessed: 0, queryJobs: 0, byTable: {} });

    await dest.write({ table: eventsTable, rows: eventRows });
    await dest.write({ table: tracesTable, rows: traceRows });
    const billing = dest.billing();

    // Each MERGE read its stage: billed at least BigQuery's 10 MB minimum, per table written.
    expect(billing.byTable['events']).toBeGreaterThanOrEqual(10 * MB);
    expect(billing.byTable['traces']).toBeGreaterThanOrEqual(10 * MB);
    expect(billing.bytesBilled).toBe(billedByDouble(fake));
    expect(billing.bytesBilled).toBe(Object.values(billing.byTable).reduce((n, b) => n + b, 0));
    expect(billing.bytesProcessed).toBeLessThan(billing.bytesBilled);
    expect(billing.queryJobs).toBe(fake.calls('jobs.insert').length);
  });

  it("writes the run's bytes billed into _query_sync_runs (BigQuery)", async () => {
    const fake = new FakeBigQuery('proj');
    fake.install();
    fake.addDataset('sync');
    const dest = testBigQueryDestination({ logger: silentLogger() });
    open = dest;
    await dest.write({ table: eventsTable, rows: eventRows });
    const billing = dest.billing();
    const runId = 'billed-run';
    await recordRun(dest, run({ billing }), [], silentLogger(), runId);

    const [row, ...more] = fake.rows('sync', RUNS_TABLE);
    expect(more).toEqual([]);
    expect(row).toMatchObject({ run_id: runId, bytes_billed: String(billing.bytesBilled) });
    expect(Number(row?.['bytes_billed'])).toBeGreaterThanOrEqual(10 * MB);
    expect(fake.tables.get(`sync.${RUNS_TABLE}`)?.schema?.fields).toContainEqual(
      expect.objectContaining({ name: 'bytes_billed', type: 'INT64' }),
    );
  });
});

describe('bytes billed where queries are free (DuckDB)', () => {
  it('leaves bytes_billed NULL in _query_sync_runs, and adds the column to a table from before it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'qs-billing-'));
    try {
      const dest = await DuckDbDestination.open(join(dir, 'warehouse.duckdb'));
      try {
        expect(dest.can.billing).toBeUndefined();
        // A runs table as an earlier version wrote it: no bytes_billed column.
        await dest.write({
          table: {
            name: RUNS_TABLE,
            key: ['run_id'],
            columns: [
              { name: 'run_id', type: 'string' },
              { name: 'command', type: 'string' },
            ],
          },
          rows: [{ run_id: 'old', command: 'sync' }],
        });
        await recordRun(dest, run(), [], silentLogger(), 'new');
      } finally {
        await dest.close();
      }
      const rows = await readTable(dir, RUNS_TABLE);
      expect(rows.map((r) => [r['run_id'], r['bytes_billed']]).sort()).toEqual([
        ['new', null],
        ['old', null],
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('bytes billed in the run summary', () => {
  const billing = {
    bytesBilled: 470_000_000,
    bytesProcessed: 469_000_000,
    queryJobs: 7,
    byTable: { users: 450_000_000, events: 10 * MB, signals: 0 },
  };

  it('prints one line for BigQuery, largest tables first, and none for DuckDB', () => {
    expect(billingLine(billing)).toEqual(['BigQuery: 448 MB billed by 7 query job(s) (users 429 MB, events 10.0 MB)']);
    expect(billingLine(undefined)).toEqual([]);
  });

  it('adds bytesBilled and bytesBilledByTable to --json for BigQuery only', () => {
    expect(billingJson(billing)).toEqual({ bytesBilled: 470_000_000, bytesBilledByTable: billing.byTable });
    expect(billingJson(undefined)).toEqual({});
  });

  it("formats bytes in binary units as BigQuery's console does", () => {
    expect([0, 512, 10 * MB, 1.5 * 1024 * MB, 3 * 1024 * 1024 * MB].map(formatBytes)).toEqual([
      '0 B',
      '512 B',
      '10.0 MB',
      '1.50 GB',
      '3.00 TB',
    ]);
  });
});
