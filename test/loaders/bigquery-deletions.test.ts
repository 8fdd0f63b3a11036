import { describe, expect, it } from 'vitest';
import { tableSchema } from '../../src/core/table-schema.js';
import type { Row } from '../../src/core/types.js';
import type { BigQueryDestination } from '../../src/load/bigquery/destination.js';
import type { DeletionChange } from '../../src/load/destination.js';
import { deletionOfE2 } from '../fakes/deletions.js';
import { bigQueryDoubles } from '../fixtures/bigquery/destination.js';
import type { FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';
import { eventRow, eventsTable } from '../fixtures/bigquery/tables.js';

/**
 * Reconcile's deletions on BigQuery (issue 31), against the strict double: the keys of a window,
 * then one transaction of MERGEs that marks, clears or deletes an event with its spans and bridge
 * rows, each pruned to its partitions (the bytes it processes are the window's days, not the table).
 */

const traces = tableSchema(
  'traces',
  ['project_id', 'span_id'],
  { project_id: 'string', span_id: 'string', event_id: 'string', start_time_ns: 'int64', _synced_at: 'timestamp' },
  { partitionColumn: 'start_time_ns' },
);
const bridge = tableSchema('event_signals', ['project_id', 'event_id', 'ordinal'], {
  project_id: 'string',
  event_id: 'string',
  ordinal: 'int64',
  _synced_at: 'timestamp',
});
const ns = (iso: string): bigint => BigInt(Date.parse(iso)) * 1_000_000n;
const span = (id: string, event: string, at: string): Row => ({
  project_id: 'alpha',
  span_id: id,
  event_id: event,
  start_time_ns: ns(at),
  _synced_at: '2024-05-03T00:00:00Z',
});

const doubles = bigQueryDoubles();

async function setup(): Promise<{ fake: FakeBigQuery; dest: BigQueryDestination }> {
  const { fake, dest } = doubles.open();
  await dest.write({
    table: eventsTable,
    rows: [
      eventRow('e1', '2024-05-01T10:00:00Z'),
      eventRow('e2', '2024-05-01T10:30:00Z'),
      eventRow('e3', '2024-04-20T10:00:00Z'),
      { ...eventRow('e2', '2024-05-01T10:30:00Z'), project_id: 'beta' },
    ],
  });
  await dest.write({
    table: traces,
    rows: [
      span('s1', 'e2', '2024-05-01T10:30:01Z'),
      span('s2', 'e2', '2024-05-01T10:30:02Z'),
      span('s3', 'e1', '2024-05-01T10:00:01Z'),
    ],
  });
  await dest.write({
    table: bridge,
    rows: [
      { project_id: 'alpha', event_id: 'e2', ordinal: 0n, _synced_at: '2024-05-03T00:00:00Z' },
      { project_id: 'alpha', event_id: 'e1', ordinal: 0n, _synced_at: '2024-05-03T00:00:00Z' },
    ],
  });
  return { fake, dest };
}

const window = {
  projectId: 'alpha',
  column: 'timestamp',
  fromIso: '2024-05-01T10:00:00.000Z',
  toIso: '2024-05-01T11:00:00.000Z',
};
const change = (action: DeletionChange['action'], atIso = '2024-05-03T12:00:00.000Z'): DeletionChange =>
  deletionOfE2(action, window, atIso);
const marked = (fake: FakeBigQuery, table: string): string[] =>
  (fake.data.get(`sync.${table}`) ?? [])
    .filter((r) => r['_deleted_at'] != null)
    .map((r) => `${String(r['project_id'])}/${String(r['span_id'] ?? r['id'] ?? r['event_id'])}`)
    .sort();

describe('BigQuery: deletions found by reconcile', () => {
  it('marks an event with its spans and bridge rows in one transaction pruned to the window, once; clears it; deletes', async () => {
    const { fake, dest } = await setup();
    expect(await dest.keysInWindow('events', { ...window, key: 'id' })).toEqual({ live: ['e1', 'e2'], marked: [] });

    const before = fake.queries.length;
    const result = await dest.applyDeletions(change('mark'));
    const script = fake.queries.slice(before).find((q) => q.query.startsWith('BEGIN TRANSACTION;'))?.query ?? '';
    // The parent is read only on the window's day, the spans a day either side, the bridge whole.
    expect(script).toContain("DATE(T.`timestamp`) IN (DATE '2024-05-01')");
    expect(script).toMatch(/DATE\(T\.`start_time_ts`\) IN \(DATE '2024-04-30', DATE '2024-05-01', DATE '2024-05-02'\)/);
    expect(marked(fake, 'events')).toEqual(['alpha/e2']);
    expect(marked(fake, 'traces')).toEqual(['alpha/s1', 'alpha/s2']);
    expect(marked(fake, 'event_signals')).toEqual(['alpha/e2']);
    // Bytes: the events statement read May 1 only (e1, e2), not April 20 nor the other project's day.
    expect(result.bytesProcessed).toBeGreaterThan(0);
    const all = ['events', 'traces', 'event_signals'].flatMap((t) => fake.data.get(`sync.${t}`) ?? []);
    const whole = all.reduce(
      (n, r) => n + Buffer.byteLength(JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))),
      0,
    );
    expect(result.bytesProcessed).toBeLessThan(whole);
    expect(await dest.countWindow('events', window)).toBe(1);
    expect(await dest.keysInWindow('events', { ...window, key: 'id' })).toEqual({ live: ['e1'], marked: ['e2'] });

    // Set once: a second mark keeps the first instant.
    await dest.applyDeletions(change('mark', '2024-05-04T00:00:00.000Z'));
    const e2 = fake.data.get('sync.events')?.find((r) => r['id'] === 'e2' && r['project_id'] === 'alpha');
    expect(String(e2?.['_deleted_at'])).toMatch(/^2024-05-03T12:00:00/);

    await dest.applyDeletions(change('unmark'));
    expect([...marked(fake, 'events'), ...marked(fake, 'traces'), ...marked(fake, 'event_signals')]).toEqual([]);
    expect(await dest.countWindow('events', window)).toBe(2);

    await dest.applyDeletions(change('delete'));
    expect(
      (fake.data.get('sync.events') ?? []).map((r) => `${String(r['project_id'])}/${String(r['id'])}`).sort(),
    ).toEqual(['alpha/e1', 'alpha/e3', 'beta/e2']);
    expect((fake.data.get('sync.traces') ?? []).map((r) => r['span_id'])).toEqual(['s3']);
    expect((fake.data.get('sync.event_signals') ?? []).map((r) => r['event_id'])).toEqual(['e1']);
  });

  it('the strict double refuses a mark on a table without _deleted_at, as BigQuery does', async () => {
    const { fake } = await setup();
    const { deletionScript } = await import('../../src/load/bigquery/deletions.js');
    const sql = deletionScript({ projectId: 'proj', dataset: 'sync' }, change('mark'), [
      { table: 'events', column: 'id', dayField: 'timestamp', meta: [], parent: true },
    ]);
    // Through the client, as the destination sends it: the job fails naming the column.
    const { BigQuery } = await import('@google-cloud/bigquery');
    const { PassThroughClient } = await import('google-auth-library');
    const client = new BigQuery({ projectId: 'proj', authClient: new PassThroughClient() });
    const [job] = await client.createQueryJob({ query: sql, jobId: 'refused', location: 'US', useLegacySql: false });
    const [metadata] = await job.getMetadata();
    expect(JSON.stringify(metadata.status?.errorResult)).toContain('_deleted_at');
    expect(fake.data.get('sync.events')?.some((r) => r['_deleted_at'] != null)).toBe(false);
  });
});
