import { afterEach, describe, expect, it } from 'vitest';
import { conversations } from '../../connectors/conversations.js';
import { users } from '../../connectors/users.js';
import { LoadError } from '../../src/core/errors.js';
import type { ApiRecord, Row, TableSchema } from '../../src/core/types.js';
import type { BigQueryDestination, BigQueryDestinationOptions } from '../../src/load/bigquery/destination.js';
import type { Destination } from '../../src/load/destination.js';
import { SchemaTracker } from '../../src/normalize/normalize.js';
import {
  capturedLogger,
  isolateNock,
  testBigQueryDestination,
  testBigQueryDryRun,
} from '../fixtures/bigquery/destination.js';
import { FakeBigQuery, type StoredRow } from '../fixtures/bigquery/fake-bigquery.js';

/**
 * users and conversations in the change-log layout (src/load/bigquery/log.ts): each write appends
 * with a load job (no MERGE, nothing billed), the table's name is a view of the latest row per key,
 * a compaction deletes the rows a later copy supersedes, an existing merge-layout table keeps working
 * and migrates only when asked. All through the real client and the strict double.
 */

isolateNock();

const open: Destination[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((d) => d.close()));
});

function fresh(): FakeBigQuery {
  const fake = new FakeBigQuery('proj');
  fake.addDataset('sync');
  fake.install();
  return fake;
}

function make(options: Partial<BigQueryDestinationOptions> = {}): {
  dest: BigQueryDestination;
  logs: Record<string, unknown>[];
} {
  const { logger, logs } = capturedLogger();
  const dest = testBigQueryDestination({ logger, ...options });
  open.push(dest);
  return { dest, logs };
}

const user = (id: string, lastSeen: string, eventCount: number): ApiRecord => ({
  id,
  first_seen: '2026-11-01T00:00:00Z',
  last_seen: lastSeen,
  event_count: eventCount,
});

/** A batch of users as the pipeline writes it (normalized, `_synced_at` = `syncedAt`). */
function usersBatch(
  records: readonly ApiRecord[],
  syncedAt: string,
  extra?: ApiRecord,
): { table: TableSchema; rows: Row[] } {
  const tracker = new SchemaTracker(users, undefined, `run-${syncedAt}`);
  const rows = [...records, ...(extra === undefined ? [] : [extra])].map((r) =>
    tracker.normalize(r, 'alpha', syncedAt),
  );
  return { table: tracker.schema, rows };
}

/** The view's rows as `id → [last_seen, event_count]`, sorted by id. */
function viewOf(fake: FakeBigQuery, table = 'users'): [string, unknown, unknown][] {
  return fake
    .rows('sync', table)
    .map((r: StoredRow): [string, unknown, unknown] => [String(r['id']), r['last_seen'], r['event_count']])
    .sort(([a], [b]) => (a < b ? -1 : 1));
}

const T1 = '2026-11-20T10:00:00.000Z';
const T2 = '2026-11-20T10:15:00.000Z';

describe('the change-log layout (users, conversations)', () => {
  it('two syncs with overlapping users: the log holds every copy, the view exactly the latest row per key; no MERGE, nothing billed', async () => {
    const fake = fresh();
    const { dest } = make();
    await dest.write(usersBatch([user('u1', '2026-11-20T09:00:00Z', 1), user('u2', '2026-11-20T09:10:00Z', 4)], T1));
    // u1 seen again (newer), u2 re-read with an OLDER last_seen (a late copy: must not win), u3 new.
    await dest.write(
      usersBatch(
        [
          user('u1', '2026-11-20T10:05:00Z', 2),
          user('u2', '2026-11-20T08:00:00Z', 3),
          user('u3', '2026-11-20T10:01:00Z', 1),
        ],
        T2,
      ),
    );

    expect(fake.tables.get('sync.users')?.type).toBe('VIEW');
    const log = fake.tables.get('sync.users_changes');
    expect(log?.timePartitioning).toEqual({ type: 'DAY', field: '_synced_at' });
    expect(log?.clustering?.fields).toEqual(['project_id', 'id']);
    expect(fake.rows('sync', 'users_changes')).toHaveLength(5);
    expect(viewOf(fake)).toEqual([
      ['u1', '2026-11-20T10:05:00Z', '2'],
      ['u2', '2026-11-20T09:10:00Z', '4'],
      ['u3', '2026-11-20T10:01:00Z', '1'],
    ]);
    // Appended by load jobs (WRITE_APPEND into the log), never merged.
    expect(fake.queries.some((q) => q.query.startsWith('MERGE') && q.query.includes('`users'))).toBe(false);
    expect(
      fake.uploads
        .filter((u) => u.load.destinationTable.tableId === 'users_changes')
        .map((u) => u.load.writeDisposition),
    ).toEqual(['WRITE_APPEND', 'WRITE_APPEND']);
    expect(dest.billing().bytesBilled).toBe(0);
    // Counts (status, verify) read through the view.
    expect(await dest.count('users')).toBe(3);
    expect(await dest.countByProject('users')).toEqual({ alpha: 3 });
    expect((await dest.describe('users'))?.map((c) => c.name)).toEqual(
      expect.arrayContaining(['id', 'last_seen', 'event_count', '_synced_at']),
    );
  });

  it('a replayed batch (a crash after its load, before its state) leaves the view unchanged', async () => {
    const fake = fresh();
    const { dest } = make();
    const batch = usersBatch([user('u1', '2026-11-20T09:00:00Z', 1), user('u2', '2026-11-20T09:00:00Z', 7)], T1);
    await dest.write(batch);
    const before = fake.rows('sync', 'users');
    await dest.write(batch);
    expect(fake.rows('sync', 'users_changes')).toHaveLength(4);
    expect(fake.rows('sync', 'users')).toEqual(before);
  });

  it('a new column goes into the log and the view is redefined with it', async () => {
    const fake = fresh();
    const { dest } = make();
    await dest.write(usersBatch([user('u1', '2026-11-20T09:00:00Z', 1)], T1));
    await dest.write(usersBatch([], T2, { ...user('u2', '2026-11-20T10:00:00Z', 1), country: 'DE' }));
    expect(fake.tables.get('sync.users_changes')?.schema?.fields.map((f) => f.name)).toContain('country');
    expect(fake.tables.get('sync.users')?.schema?.fields.map((f) => f.name)).toContain('country');
    expect(fake.rows('sync', 'users').map((r) => [r['id'], r['country']])).toEqual(
      expect.arrayContaining([
        ['u1', null],
        ['u2', 'DE'],
      ]),
    );
  });

  it('compaction, once its interval has passed, keeps the view and deletes the superseded rows (one DELETE, billed), then stamps the label', async () => {
    const fake = fresh();
    let now = Date.parse(T1);
    const { dest } = make({ now: () => now, compactEveryMs: 60 * 60 * 1000 });
    await dest.write(usersBatch([user('u1', '2026-11-20T09:00:00Z', 1), user('u2', '2026-11-20T09:00:00Z', 1)], T1));
    await dest.write(usersBatch([user('u1', '2026-11-20T10:05:00Z', 2), user('u2', '2026-11-20T10:06:00Z', 2)], T2));
    expect(fake.rows('sync', 'users_changes')).toHaveLength(4);
    const view = viewOf(fake);
    const isCompaction = (q: { query: string }): boolean =>
      q.query.startsWith('DELETE FROM `proj`.`sync`.`users_changes` AS t');
    expect(fake.queries.some(isCompaction)).toBe(false);

    now += 2 * 60 * 60 * 1000;
    const { dest: later, logs } = make({ now: () => now, compactEveryMs: 60 * 60 * 1000 });
    await later.write(usersBatch([], '2026-11-20T12:00:00.000Z', user('u3', '2026-11-20T11:59:00Z', 1)));
    const compaction = fake.queries.find(isCompaction);
    expect(compaction?.query).toBe(
      'DELETE FROM `proj`.`sync`.`users_changes` AS t\n' +
        'WHERE TO_JSON_STRING(STRUCT(t.`project_id`, t.`id`, t.`last_seen`, t.`_synced_at`)) NOT IN (SELECT TO_JSON_STRING(STRUCT(c.`project_id`, c.`id`, c.`last_seen`, c.`_synced_at`)) ' +
        'FROM `proj`.`sync`.`users_changes` AS c WHERE TRUE QUALIFY ROW_NUMBER() OVER (PARTITION BY c.`project_id`, c.`id` ORDER BY c.`last_seen` DESC NULLS LAST, c.`_synced_at` DESC) = 1)',
    );
    // No rebuild: the table, its partitioning and clustering stay; u1, u2's older copies are gone, then u3 appended.
    expect(fake.queries.some((q) => q.query.startsWith('CREATE OR REPLACE TABLE'))).toBe(false);
    expect(fake.rows('sync', 'users_changes')).toHaveLength(3);
    expect(viewOf(fake)).toEqual([...view, ['u3', '2026-11-20T11:59:00Z', '1']]);
    expect(fake.tables.get('sync.users_changes')?.timePartitioning).toEqual({ type: 'DAY', field: '_synced_at' });
    expect(fake.tables.get('sync.users_changes')?.['labels']).toEqual({
      'query-sync': 'change-log',
      'query-sync-compacted-at': String(Math.floor(now / 1000)),
    });
    expect(later.billing().bytesBilled).toBeGreaterThan(0);
    expect(
      logs.find((l) => l['msg'] === 'bigquery change log compacted: superseded rows deleted')?.['rowsDeleted'],
    ).toBe('2');

    // Not again within the interval.
    const count = fake.queries.filter(isCompaction).length;
    await later.write(usersBatch([user('u4', '2026-11-20T12:01:00Z', 1)], '2026-11-20T12:01:00.000Z'));
    expect(fake.queries.filter(isCompaction).length).toBe(count);
  });

  it('conversations take the layout too, with last_message_at as the version', async () => {
    const fake = fresh();
    const { dest } = make();
    const batch = (records: ApiRecord[], at: string) => {
      const t = new SchemaTracker(conversations, undefined, 'r');
      return { table: t.schema, rows: records.map((r) => t.normalize(r, 'alpha', at)) };
    };
    await dest.write(batch([{ id: 'c1', user_id: 'u1', started_at: T1, last_message_at: T1, message_count: 1 }], T1));
    await dest.write(batch([{ id: 'c1', user_id: 'u1', started_at: T1, last_message_at: T2, message_count: 5 }], T2));
    expect(fake.tables.get('sync.conversations')?.type).toBe('VIEW');
    expect(fake.rows('sync', 'conversations').map((r) => [r['id'], r['message_count']])).toEqual([['c1', '5']]);
  });

  it('--dry-run says what the change-log layout would send instead of the MERGE, and sends nothing', async () => {
    const fake = fresh();
    const lines: string[] = [];
    const dest = testBigQueryDryRun({ print: (line) => void lines.push(line) });
    open.push(dest);
    await dest.write(usersBatch([user('u1', '2026-11-20T09:00:00Z', 1)], T1));
    expect(lines[0]).toMatch(
      /^-- users: in the change-log layout .* one load job appending to users_changes \(WRITE_APPEND\) and no MERGE/,
    );
    expect(fake.requests).toEqual([]);
  });

  it('sync --full-refresh replaces the log by the refreshed rows, and the view shows them', async () => {
    const fake = fresh();
    const { dest } = make();
    await dest.write(usersBatch([user('u1', '2026-11-20T09:00:00Z', 1), user('u2', '2026-11-20T09:00:00Z', 1)], T1));
    const shadow = usersBatch([user('u2', '2026-11-20T10:00:00Z', 9), user('u5', '2026-11-20T10:00:00Z', 1)], T2);
    await dest.write({ ...shadow, table: { ...shadow.table, name: '_query_sync_refresh_users' } });
    expect(fake.tables.get('sync._query_sync_refresh_users')?.type).toBeUndefined();
    await dest.replaceTables([{ table: 'users', shadow: '_query_sync_refresh_users' }]);
    expect(fake.tables.get('sync.users')?.type).toBe('VIEW');
    expect(viewOf(fake)).toEqual([
      ['u2', '2026-11-20T10:00:00Z', '9'],
      ['u5', '2026-11-20T10:00:00Z', '1'],
    ]);
    expect(fake.tables.has('sync._query_sync_refresh_users')).toBe(false);
  });

  it('a full refresh into a dataset without users creates the change-log layout', async () => {
    const fake = fresh();
    const { dest } = make();
    const shadow = usersBatch([user('u1', '2026-11-20T10:00:00Z', 1)], T2);
    await dest.write({ ...shadow, table: { ...shadow.table, name: '_query_sync_refresh_users' } });
    await dest.replaceTables([{ table: 'users', shadow: '_query_sync_refresh_users' }]);
    expect(fake.tables.get('sync.users')?.type).toBe('VIEW');
    expect(viewOf(fake)).toEqual([['u1', '2026-11-20T10:00:00Z', '1']]);
  });
});

describe('an existing users table of the merge layout', () => {
  async function mergeLayout(): Promise<FakeBigQuery> {
    const fake = fresh();
    const { dest } = make({ upsert: 'merge' });
    await dest.write(usersBatch([user('u1', '2026-11-20T09:00:00Z', 1), user('u2', '2026-11-20T09:00:00Z', 2)], T1));
    await dest.close();
    expect(fake.tables.get('sync.users')?.rangePartitioning?.field).toBe('key_bucket');
    return fake;
  }

  it('keeps working unchanged (one MERGE), with a warning that says how to migrate', async () => {
    const fake = await mergeLayout();
    const { dest, logs } = make();
    await dest.write(usersBatch([user('u1', '2026-11-20T10:00:00Z', 3)], T2));
    expect(fake.tables.get('sync.users')?.type).toBeUndefined();
    expect(fake.tables.has('sync.users_changes')).toBe(false);
    expect(fake.queries.at(-1)?.query).toMatch(/^MERGE `proj`\.`sync`\.`users` AS T/);
    expect(viewOf(fake)).toEqual([
      ['u1', '2026-11-20T10:00:00Z', '3'],
      ['u2', '2026-11-20T09:00:00Z', '2'],
    ]);
    expect(logs.find((l) => String(l['msg']).startsWith('bigquery table users has the merge layout'))?.['msg']).toMatch(
      /--bq-upsert log/,
    );
  });

  it('--bq-upsert log migrates it: the log seeded from it, the table kept aside, the view in its place', async () => {
    const fake = await mergeLayout();
    const old = viewOf(fake);
    const { dest } = make({ upsert: 'log' });
    await dest.write(usersBatch([user('u3', '2026-11-20T10:00:00Z', 1)], T2));
    expect(fake.tables.get('sync.users')?.type).toBe('VIEW');
    expect(fake.tables.get('sync.users_merge_layout')?.rangePartitioning?.field).toBe('key_bucket');
    expect(viewOf(fake, 'users_merge_layout')).toEqual(old);
    expect(viewOf(fake)).toEqual([...old, ['u3', '2026-11-20T10:00:00Z', '1']]);
    expect(fake.tables.get('sync.users_changes')?.clustering?.fields).toEqual(['project_id', 'id']);
  });

  it('--bq-upsert log refuses, changing nothing, when the name the table would move to is taken', async () => {
    const fake = await mergeLayout();
    fake.addTable('sync', 'users_merge_layout', [{ name: 'id', type: 'STRING' }]);
    const { dest } = make({ upsert: 'log' });
    const error = await dest.write(usersBatch([user('u3', '2026-11-20T10:00:00Z', 1)], T2)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LoadError);
    expect((error as LoadError).message).toMatch(
      /would move table users of proj\.sync aside to users_merge_layout, but users_merge_layout exists.*nothing was changed/,
    );
    expect(fake.tables.get('sync.users')?.type).toBeUndefined();
    expect(fake.tables.has('sync.users_changes')).toBe(false);
  });
});

describe('what the double refuses, as BigQuery does', () => {
  it('a view under the name of a table, and QUALIFY without a WHERE beside it', async () => {
    const fake = fresh();
    const { dest } = make({ upsert: 'merge' });
    await dest.write(usersBatch([user('u1', '2026-11-20T09:00:00Z', 1)], T1));
    const collision = await dest
      .defineView('users', (sql) => `SELECT u.${sql.column('id')} FROM ${sql.table('users')} AS u`)
      .catch((e: unknown) => e);
    expect((collision as Error).message).toMatch(
      /proj:sync\.users is not allowed for this operation because it is currently a TABLE/,
    );
    expect(fake.tables.get('sync.users')?.type).toBeUndefined();
    const qualify = await dest
      .defineView(
        'users_latest',
        (sql) =>
          `SELECT c.${sql.column('id')} FROM ${sql.table('users')} AS c QUALIFY ROW_NUMBER() OVER (PARTITION BY c.\`id\` ORDER BY TO_JSON_STRING(c) DESC) = 1`,
      )
      .catch((e: unknown) => e);
    expect((qualify as Error).message).toMatch(/QUALIFY clause requires GROUP BY, WHERE or HAVING clause/);
    expect(fake.tables.has('sync.users_latest')).toBe(false);
  });

  it('a change log clustered on more than four columns or on a JSON column, or partitioned on a STRING', async () => {
    const fake = fresh();
    const { BigQuery } = await import('@google-cloud/bigquery');
    const { PassThroughClient } = await import('google-auth-library');
    const client = new BigQuery({
      projectId: 'proj',
      authClient: new PassThroughClient(),
      retryOptions: { autoRetry: false, maxRetries: 0 },
    });
    const fields = ['a', 'b', 'c', 'd', 'e'].map((name) => ({ name, type: 'STRING' }));
    const create = (metadata: Record<string, unknown>): Promise<string> =>
      client
        .dataset('sync')
        .createTable('t', metadata)
        .then(
          () => 'created',
          (e: unknown) => (e as Error).message,
        );
    expect(await create({ schema: { fields }, clustering: { fields: ['a', 'b', 'c', 'd', 'e'] } })).toMatch(
      /Too many clustering fields: 5, only 4 allowed/,
    );
    expect(
      await create({ schema: { fields: [...fields, { name: 'j', type: 'JSON' }] }, clustering: { fields: ['j'] } }),
    ).toMatch(/Field j is of type JSON which is not supported for clustering/);
    expect(await create({ schema: { fields }, timePartitioning: { type: 'DAY', field: 'a' } })).toMatch(
      /Partitioning field a has type STRING/,
    );
    expect(fake.tables.has('sync.t')).toBe(false);
  });
});
