import { BigQuery } from '@google-cloud/bigquery';
import { PassThroughClient } from 'google-auth-library';
import { afterEach, describe, expect, it } from 'vitest';
import { users } from '../../connectors/users.js';
import type { ApiRecord, Row, TableSchema } from '../../src/core/types.js';
import type { BigQueryDestination, BigQueryDestinationOptions } from '../../src/load/bigquery/destination.js';
import { compactLogSql, seedLogSql } from '../../src/load/bigquery/log.js';
import { SchemaTracker } from '../../src/normalize/normalize.js';
import { isolateNock, testBigQueryDestination } from '../fixtures/bigquery/destination.js';
import { FakeBigQuery, type StoredRow, type SubmittedQuery } from '../fixtures/bigquery/fake-bigquery.js';

/**
 * A change log's compaction racing another process's appends (a `sync` and a `backfill` hold
 * different leases, so both may write users at once). The compaction is a DELETE of superseded rows
 * (src/load/bigquery/log.ts, `compactLogSql`): rows a load job appends while it runs survive, and
 * the view (latest row per key) is the same before and after it. The double reads a job's tables
 * as of the job's creation, as BigQuery does; the interleaving is driven by events (the compaction
 * job's creation, a gate on the compacting process's poll), not by clocks.
 */

isolateNock();

const open: BigQueryDestination[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((d) => d.close()));
});

function make(options: Partial<BigQueryDestinationOptions> = {}): BigQueryDestination {
  const dest = testBigQueryDestination(options);
  open.push(dest);
  return dest;
}

const user = (id: string, lastSeen: string, eventCount: number): ApiRecord => ({
  id,
  first_seen: '2026-11-01T00:00:00Z',
  last_seen: lastSeen,
  event_count: eventCount,
});

function usersBatch(records: readonly ApiRecord[], syncedAt: string): { table: TableSchema; rows: Row[] } {
  const tracker = new SchemaTracker(users, undefined, `run-${syncedAt}`);
  return { table: tracker.schema, rows: records.map((r) => tracker.normalize(r, 'alpha', syncedAt)) };
}

/** Rows as sorted `id|last_seen|event_count|_synced_at` strings (`_synced_at` as an ISO instant). */
const lines = (rows: readonly StoredRow[]): string[] =>
  rows
    .map((r) => [r['id'], r['last_seen'], r['event_count'], new Date(String(r['_synced_at'])).toISOString()].join('|'))
    .sort();

const HOUR = 60 * 60 * 1000;
const T1 = '2026-11-20T10:00:00.000Z';
const T2 = '2026-11-20T10:15:00.000Z';
const T3 = '2026-11-20T12:00:00.000Z';
const T4 = '2026-11-20T12:01:00.000Z';
const isCompaction = (q: SubmittedQuery | undefined): boolean =>
  q?.query.startsWith('DELETE FROM `proj`.`sync`.`users_changes` AS t') === true;

/**
 * A log with superseded rows and exact copies (a replayed batch: rows tied on key, version and
 * `_synced_at`, all kept by the compaction; a batch holds one row per key, so a tie is always a copy).
 */
async function seeded(fake: FakeBigQuery): Promise<void> {
  const first = make({ now: () => Date.parse(T1), compactEveryMs: HOUR });
  await first.write(
    usersBatch(
      [
        user('u1', '2026-11-20T09:00:00Z', 1),
        user('u2', '2026-11-20T09:00:00Z', 1),
        user('u4', '2026-11-20T09:00:00Z', 1),
      ],
      T1,
    ),
  );
  const second = usersBatch(
    [
      user('u1', '2026-11-20T10:05:00Z', 2),
      user('u4', '2026-11-20T09:30:00Z', 3),
      user('u5', '2026-11-20T10:00:00Z', 1),
    ],
    T2,
  );
  await first.write(second);
  await first.write(second);
  expect(fake.rows('sync', 'users_changes')).toHaveLength(9);
}

describe('compaction of a change log while another process appends to it', () => {
  it("rows appended between the compaction's start and end survive, and the view is unchanged by the compaction", async () => {
    const fake = new FakeBigQuery('proj');
    fake.addDataset('sync');
    fake.install();
    await seeded(fake);
    const viewBefore = lines(fake.rows('sync', 'users'));
    expect(viewBefore).toHaveLength(4);

    // The compaction job answers RUNNING once; the compacting process then waits on `released`.
    let started: () => void = () => undefined;
    const compactionStarted = new Promise<void>((resolve) => (started = resolve));
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    fake.pollsBeforeDone = ({ type }) => {
      if (type !== 'query' || !isCompaction(fake.queries.at(-1))) return 0;
      started();
      return 1;
    };

    // The sync: its interval has passed, so it compacts before appending u7.
    const sync = make({ now: () => Date.parse(T4), compactEveryMs: HOUR, sleep: () => released });
    const syncWrite = sync.write(usersBatch([user('u7', '2026-11-20T12:00:00Z', 1)], T4));
    await compactionStarted;
    const read = fake.rows('sync', 'users_changes').length;

    // The backfill appends while the compaction job runs: a newer u1 and a new u6.
    const backfill = make({ now: () => Date.parse(T3), compactEveryMs: 720 * HOUR });
    await backfill.write(
      usersBatch([user('u1', '2026-11-20T11:00:00Z', 9), user('u6', '2026-11-20T11:00:00Z', 1)], T3),
    );
    expect(fake.queries.filter((q) => isCompaction(q))).toHaveLength(1);
    const viewMid = lines(fake.rows('sync', 'users'));
    const logMid = lines(fake.rows('sync', 'users_changes'));
    expect(logMid).toHaveLength(read + 2);

    release();
    await syncWrite;

    const log = lines(fake.rows('sync', 'users_changes'));
    // The backfill's rows are in the log.
    expect(log).toEqual(expect.arrayContaining([`u1|2026-11-20T11:00:00Z|9|${T3}`, `u6|2026-11-20T11:00:00Z|1|${T3}`]));
    // Exactly the two superseded rows of the snapshot went (u1 and u4 of 09:00); u7 was appended after.
    expect(fake.timeline).toContain(
      `table sync.users_changes: compaction deleted 2 of the ${read} rows it read (2 appended since it started kept)`,
    );
    expect(log).toEqual(
      [
        ...logMid.filter((l) => l !== `u1|2026-11-20T09:00:00Z|1|${T1}` && l !== `u4|2026-11-20T09:00:00Z|1|${T1}`),
        `u7|2026-11-20T12:00:00Z|1|${T4}`,
      ].sort(),
    );
    // The view: what it was with the backfill's rows, plus the sync's u7; the compaction changed nothing in it.
    expect(lines(fake.rows('sync', 'users'))).toEqual([...viewMid, `u7|2026-11-20T12:00:00Z|1|${T4}`].sort());
    expect(viewMid.filter((l) => !l.startsWith('u1|') && !l.startsWith('u6|'))).toEqual(
      viewBefore.filter((l) => !l.startsWith('u1|')),
    );
  });

  it('the double models why: a CREATE OR REPLACE TABLE of the log from itself, racing the same append, loses the appended rows', async () => {
    const fake = new FakeBigQuery('proj');
    fake.addDataset('sync');
    fake.install();
    await seeded(fake);
    const client = new BigQuery({
      projectId: 'proj',
      authClient: new PassThroughClient(),
      retryOptions: { autoRetry: false, maxRetries: 0 },
    });
    const columns = (fake.tables.get('sync.users_changes')?.schema?.fields ?? []).map((f) => f.name);
    const ctas = seedLogSql(
      { projectId: 'proj', dataset: 'sync' },
      usersBatch([], T1).table,
      'users_changes',
      columns,
      Date.parse(T3),
    );
    const [job] = await client.createQueryJob({ query: ctas, location: 'US' });
    const backfill = make({ now: () => Date.parse(T3), compactEveryMs: 720 * HOUR });
    await backfill.write(usersBatch([user('u6', '2026-11-20T11:00:00Z', 1)], T3));
    expect(lines(fake.rows('sync', 'users_changes'))).toContain(`u6|2026-11-20T11:00:00Z|1|${T3}`);
    await job.getMetadata();
    expect(fake.rows('sync', 'users_changes')).toHaveLength(9);
    expect(lines(fake.rows('sync', 'users_changes'))).not.toContain(`u6|2026-11-20T11:00:00Z|1|${T3}`);
  });

  it("the double refuses the compaction's DELETE as BigQuery does: no WHERE, QUALIFY without WHERE, a column the log lacks; over a view", async () => {
    const fake = new FakeBigQuery('proj');
    fake.addDataset('sync');
    fake.install();
    await seeded(fake);
    const client = new BigQuery({
      projectId: 'proj',
      authClient: new PassThroughClient(),
      retryOptions: { autoRetry: false, maxRetries: 0 },
    });
    const run = async (query: string): Promise<string> => {
      const [job] = await client.createQueryJob({ query, location: 'US' });
      const [metadata] = await job.getMetadata();
      return String(metadata.status?.errorResult?.message ?? 'ran');
    };
    const table = usersBatch([], T1).table;
    const sql = compactLogSql({ projectId: 'proj', dataset: 'sync' }, table);
    expect(await run(sql.slice(0, sql.indexOf('\n')))).toMatch(/DELETE must have a WHERE clause/);
    expect(await run(sql.replace('AS c WHERE TRUE QUALIFY', 'AS c QUALIFY'))).toMatch(
      /QUALIFY clause requires GROUP BY, WHERE or HAVING clause/,
    );
    expect(await run(sql.replaceAll('`last_seen`', '`seen_last`'))).toMatch(/Unrecognized name: seen_last/);
    expect(
      await run(
        compactLogSql({ projectId: 'proj', dataset: 'sync' }, { ...table, name: 'users_changes_x' }).replaceAll(
          'users_changes_x_changes',
          'users',
        ),
      ),
    ).toMatch(/proj:sync\.users is not allowed for this operation because it is currently a VIEW/);
    expect(fake.rows('sync', 'users_changes')).toHaveLength(9);
  });
});
