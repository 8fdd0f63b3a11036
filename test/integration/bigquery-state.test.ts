import { rmSync } from 'node:fs';
import { PassThroughClient } from 'google-auth-library';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { users } from '../../connectors/users.js';
import type { Emulator } from '../../emulator/index.js';
import type { BigQueryDestination } from '../../src/load/bigquery/destination.js';
import { isolateNock, testBigQueryDestination } from '../fixtures/bigquery/destination.js';
import { FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';
import { statePathOf, syncOnce } from '../fakes/harness.js';
import { dir, emulator as startTestEmulator } from '../fakes/lifecycle.js';

/**
 * State in BigQuery: each batch's MERGE and the state's MERGE go in one multi-statement transaction
 * (one query job), the strict double executes it (and rolls it back whole on a failure), and a run
 * without its state file restores the state from the dataset.
 */

isolateNock();

/** An emulator without rate limits, closed after the test. */
const emulator = (seed: number, eventsPerProject: number): Promise<Emulator> =>
  startTestEmulator({ seed, eventsPerProject, limits: false });

// The merge layout explicitly: these tests are about a batch's MERGE and its state in one
// transaction (the change-log layout appends with a load job, then writes the state).
const destination = (): (() => Promise<BigQueryDestination>) => async () =>
  testBigQueryDestination({ upsert: 'merge' });

/** The first query job whose SQL starts with `prefix` ends with `message` (as if BigQuery aborted it); `failed()` says whether it has. */
function failFirstQuery(fake: FakeBigQuery, prefix: string, message: string): { readonly failed: () => boolean } {
  let failed = false;
  fake.outcome = (job) => {
    const sql = String((job.configuration['query'] as { query?: string } | undefined)?.query ?? '');
    if (failed || !sql.startsWith(prefix)) return undefined;
    failed = true;
    return { errorResult: { reason: 'invalidQuery', message } };
  };
  return { failed: () => failed };
}

/** A stream's entry of the state as the dataset holds it (`{}`: none). */
function storedStream(
  fake: FakeBigQuery,
  key: string,
): { readonly mark?: string; readonly pending?: { readonly cursor?: string } } {
  const row = fake.rows('sync', '_query_sync_state').find((r) => r['key'] === key);
  return row === undefined
    ? {}
    : (JSON.parse(String(row['value'])) as { mark?: string; pending?: { cursor?: string } });
}

describe('state in BigQuery', () => {
  it('writes each batch and its checkpoint in one transaction, and a sync without its state file restores the state from the dataset', async () => {
    const emu = await emulator(71, 300);
    const d = dir();
    const fake = new FakeBigQuery('proj');
    fake.install();
    const first = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      resources: [events, users],
      destination: destination(),
      batchRows: 100,
    });
    expect(first.ok, JSON.stringify(first.streams.map((s) => s.error?.message))).toBe(true);
    // The two tables' batches commit at once; their jobs that change `_query_sync_state` take turns
    // in the destination (of two transactions changing one table at once, BigQuery aborts the later).
    const aborted = [...fake.jobs.values()].filter(
      (job) =>
        job.done !== undefined &&
        'errorResult' in job.done &&
        /concurrent update/i.test(job.done.errorResult.message ?? ''),
    );
    expect(aborted.map((job) => job.jobId)).toEqual([]);

    const transactions = fake.queries.filter(
      (q) => q.query.startsWith('BEGIN TRANSACTION;') && q.query.includes('`_query_sync_state`'),
    );
    expect(transactions.length).toBeGreaterThan(0);
    // The batch's MERGE, then the state's, committed as one.
    expect(transactions[0]?.query).toMatch(
      /^BEGIN TRANSACTION;\nMERGE `proj`\.`sync`\.`(events|users)` AS T[\s\S]*;\nMERGE `proj`\.`sync`\.`_query_sync_state` AS T[\s\S]*\nCOMMIT TRANSACTION;$/,
    );
    const keys = fake.rows('sync', '_query_sync_state').map((r) => String(r['key']));
    expect(keys).toEqual(expect.arrayContaining(['version', 'stream:events:default', 'stream:users:default']));
    expect(storedStream(fake, 'stream:events:default').mark).toBeDefined();

    emu.addEvents('default', 30);
    rmSync(statePathOf(d));
    emu.resetStats();
    const startedAt = Date.now();
    const second = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      resources: [events, users],
      destination: destination(),
      batchRows: 100,
    });
    expect(second.ok).toBe(true);
    // Restored: only the new window (a first sync of 300 events takes at least 3 events pages).
    expect(emu.stats().byEndpoint['/v1/events'] ?? 0).toBeLessThanOrEqual(2);
    // Every event once: none lost, none twice.
    const stored = fake
      .rows('sync', 'events')
      .filter((r) => Date.parse(String(r['timestamp'])) < startedAt)
      .map((r) => String(r['id']));
    const expected = emu
      .snapshot('events', 'default')
      .filter((r) => Date.parse(String(r['timestamp'])) < startedAt)
      .map((r) => String(r['id']));
    expect(stored.length).toBe(new Set(stored).size);
    expect(new Set(stored)).toEqual(new Set(expected));
  }, 60_000);

  it('a failure inside the transaction rolls back the batch and its state together', async () => {
    const emu = await emulator(72, 120);
    const d = dir();
    const fake = new FakeBigQuery('proj');
    fake.install();
    // The first transaction fails at its end (say BigQuery aborted it): neither rows nor state stay.
    // (users: a table without a bridge, whose batch and state share one transaction.)
    const transaction = failFirstQuery(fake, 'BEGIN TRANSACTION;', 'Query error: division by zero at [12:3]');
    const run = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      resources: [users],
      destination: destination(),
      batchRows: 50,
    });
    expect(transaction.failed()).toBe(true);
    expect(run.ok).toBe(false);
    expect(fake.rows('sync', 'users')).toHaveLength(0);
    const stream = storedStream(fake, 'stream:users:default');
    expect(stream.mark).toBeUndefined();
    expect(stream.pending).toBeUndefined();
  }, 60_000);

  it('with a bridge table the state is written last: a failed bridge rewrite leaves the batch unacknowledged, and the next sync makes the bridge exact', async () => {
    const emu = await emulator(73, 120);
    const d = dir();
    const fake = new FakeBigQuery('proj');
    fake.install();
    const bridgeRewrite = failFirstQuery(
      fake,
      'BEGIN TRANSACTION;\nDELETE FROM `proj`.`sync`.`event_signals`',
      'Query error: the bridge rewrite failed',
    );
    const first = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      resources: [events],
      destination: destination(),
      batchRows: 50,
    });
    expect(bridgeRewrite.failed()).toBe(true);
    expect(first.ok).toBe(false);
    // The MERGE had committed, but the state did not move past it.
    const stream = storedStream(fake, 'stream:events:default');
    expect(stream.mark).toBeUndefined();
    expect(stream.pending?.cursor).toBeUndefined();

    const second = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      resources: [events],
      destination: destination(),
      batchRows: 50,
    });
    expect(second.ok, JSON.stringify(second.streams.map((s) => s.error?.message))).toBe(true);
    // The bridge equals the unnested signals of the stored events: none missing, none extra.
    const stored = fake.rows('sync', 'events');
    const expected = stored.flatMap((e) => {
      const raw = e['signals'];
      const signals =
        raw === null || raw === undefined || raw === ''
          ? []
          : typeof raw === 'string'
            ? (JSON.parse(raw) as unknown)
            : raw;
      if (!Array.isArray(signals)) return [];
      return signals.map((_, i) => `${String(e['id'])}#${i}`);
    });
    expect(expected.length).toBeGreaterThan(0);
    const bridge = fake.rows('sync', 'event_signals').map((r) => `${String(r['event_id'])}#${String(r['ordinal'])}`);
    expect(bridge.sort()).toEqual(expected.sort());
  }, 60_000);

  it('the double refuses a transaction the script never commits, and a state MERGE without its parameter', async () => {
    const fake = new FakeBigQuery('proj');
    fake.install();
    fake.addDataset('sync');
    fake.addTable('sync', '_query_sync_state', [
      { name: 'key', type: 'STRING', mode: 'REQUIRED' },
      { name: 'value', type: 'STRING' },
      { name: 'updated_at', type: 'TIMESTAMP' },
    ]);
    const { BigQuery } = await import('@google-cloud/bigquery');
    const client = new BigQuery({
      projectId: 'proj',
      authClient: new PassThroughClient(),
      retryOptions: { autoRetry: false, maxRetries: 0 },
    });
    const { stateMergeSql } = await import('../../src/load/bigquery/state.js');
    const merge = stateMergeSql({ projectId: 'proj', dataset: 'sync' });
    const run = async (query: string): Promise<string | undefined> => {
      const [job] = await client.createQueryJob({ query, location: 'US' });
      const [metadata] = await job.getMetadata();
      return (metadata as { status?: { errorResult?: { message?: string } } }).status?.errorResult?.message;
    };
    expect(await run(`BEGIN TRANSACTION;\n${merge}`)).toMatch(/not committed/);
    expect(await run(merge)).toMatch(/Query parameter 'state_rows' not found/);
  }, 30_000);
});
