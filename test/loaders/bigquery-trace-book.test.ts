import { describe, expect, it } from 'vitest';
import type { TraceRead, StateCommit } from '../../src/core/state-table.js';
import type { BigQueryDestination } from '../../src/load/bigquery/destination.js';
import type { OwedTraces } from '../../src/load/destination-capabilities.js';
import { bigQueryDoubles } from '../fixtures/bigquery/destination.js';
import type { FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';
import { eventRow, eventsTable } from '../fixtures/bigquery/tables.js';

/**
 * The trace book on BigQuery (`load/bigquery/trace-book.ts`), against the strict double: reads
 * appended with a state commit, and which events owe their traces by the same rule as DuckDB's
 * (never read; or no final read and settle-old now; `--start`, an upper bound, `_deleted_at`, the
 * `--traces traced` fields, one project), newest first, and what each query is billed.
 */

const doubles = bigQueryDoubles();

const NOW = Date.parse('2024-05-03T12:00:00Z');
const HOUR = 3_600_000;

const query = (extra: Partial<OwedTraces> = {}): OwedTraces => ({
  resource: 'traces',
  eventTable: 'events',
  eventKey: 'id',
  eventTime: 'timestamp',
  nowMs: NOW,
  settleMs: 2 * HOUR,
  ...extra,
});

/** A state commit that carries `reads` (and one state row). */
function commitOf(reads: readonly TraceRead[]): StateCommit {
  return { rows: [{ key: 'version', value: '1' }], traceReads: reads };
}

const read = (id: string, eventAt: string, traces: number, readAt: string, project = 'alpha'): TraceRead => ({
  resource: 'traces',
  projectId: project,
  eventId: id,
  eventAt,
  traces,
  readAt,
});

async function setup(): Promise<{ fake: FakeBigQuery; dest: BigQueryDestination }> {
  const { fake, dest } = doubles.open();
  await dest.write({
    table: eventsTable,
    rows: [
      // Old, read with spans: final.
      eventRow('spans', '2024-05-01T10:00:00Z', { properties: '{"a":1}' }),
      // Old, read empty once it was settle-old: final.
      eventRow('empty-old', '2024-05-01T11:00:00Z'),
      // Old, read empty while young: owed again.
      eventRow('empty-young-then', '2024-05-02T09:00:00Z', { properties: '[]' }),
      // Young (within settle), read empty: not due yet.
      eventRow('young-empty', '2024-05-03T11:00:00Z'),
      // Never read.
      eventRow('never', '2024-05-02T08:00:00Z', { properties: '{"b":2}' }),
      eventRow('never-old', '2024-04-20T08:00:00Z'),
      { ...eventRow('never', '2024-05-02T08:00:00Z'), project_id: 'beta' },
    ],
  });
  return { fake, dest };
}

describe('the trace book in BigQuery', () => {
  it('appends a commit’s reads in one transaction with its state, to a DAY-partitioned, clustered book', async () => {
    const { fake, dest } = await setup();
    expect(await dest.countOwedTraces(query())).toEqual({ alpha: 6, beta: 1 });
    const commit = commitOf([
      read('spans', '2024-05-01T10:00:00.000Z', 3, '2024-05-01T10:05:00.000Z'),
      read('empty-old', '2024-05-01T11:00:00.000Z', 0, '2024-05-01T14:00:00.000Z'),
      read('empty-young-then', '2024-05-02T09:00:00.000Z', 0, '2024-05-02T09:10:00.000Z'),
      read('young-empty', '2024-05-03T11:00:00.000Z', 0, '2024-05-03T11:30:00.000Z'),
    ]);
    // The write resolves once its transaction committed (and rejects otherwise).
    await expect(dest.writeState(commit)).resolves.toBeUndefined();
    const job = fake.queries.at(-1)?.query ?? '';
    expect(job).toMatch(
      /^BEGIN TRANSACTION;\nMERGE `proj`\.`sync`\.`_query_sync_state` AS T[\s\S]*;\nINSERT INTO `proj`\.`sync`\.`_query_sync_children` [\s\S]* FROM UNNEST\(@child_reads\) AS r;\nCOMMIT TRANSACTION;$/,
    );
    expect(fake.rows('sync', '_query_sync_children')).toHaveLength(4);
    const book = fake.tables.get('sync._query_sync_children');
    expect(book?.timePartitioning).toEqual({ type: 'DAY', field: 'parent_at' });
    expect(book?.clustering).toEqual({ fields: ['resource', 'project_id', 'parent_id'] });
    expect(book?.schema?.fields.every((f) => f.mode === 'REQUIRED')).toBe(true);

    // Owed: never read (3, one in beta), and read empty while young now settle-old; newest first.
    expect(await dest.countOwedTraces(query())).toEqual({ alpha: 3, beta: 1 });
    expect(await dest.owedTraces({ ...query(), project: 'alpha', limit: 10 })).toEqual([
      { id: 'empty-young-then', at: Date.parse('2024-05-02T09:00:00Z') },
      { id: 'never', at: Date.parse('2024-05-02T08:00:00Z') },
      { id: 'never-old', at: Date.parse('2024-04-20T08:00:00Z') },
    ]);
    expect((await dest.owedTraces({ ...query(), project: 'alpha', limit: 1 })).map((u) => u.id)).toEqual([
      'empty-young-then',
    ]);
    // --settle 0: every read is final.
    expect(await dest.countOwedTraces(query({ settleMs: 0 }))).toEqual({ alpha: 2, beta: 1 });
    // --start, and an upper bound (a stored batch's instants).
    expect(await dest.countOwedTraces(query({ fromIso: '2024-05-01T00:00:00.000Z' }))).toEqual({
      alpha: 2,
      beta: 1,
    });
    expect(
      await dest.owedTraces({
        ...query({ fromIso: '2024-05-02T08:00:00.000Z', toIso: '2024-05-02T08:00:00.001Z' }),
        project: 'alpha',
        limit: 10,
      }),
    ).toEqual([{ id: 'never', at: Date.parse('2024-05-02T08:00:00Z') }]);
    // --traces traced: only events whose declared fields show traces (`[]` and NULL do not).
    expect(await dest.countOwedTraces(query({ shownBy: ['properties'] }))).toEqual({ alpha: 1 });
  });

  it('prunes each owed query to the days from --start on, reading only the columns it names', async () => {
    const { fake, dest } = await setup();
    await dest.writeState(commitOf([read('spans', '2024-05-01T10:00:00.000Z', 3, '2024-05-01T10:05:00.000Z')]));
    await dest.countOwedTraces(query());
    const whole = fake.processed.get(fake.queries.at(-1)?.jobId ?? '') ?? 0;
    await dest.countOwedTraces(query({ fromIso: '2024-05-02T00:00:00.000Z' }));
    const pruned = fake.processed.get(fake.queries.at(-1)?.jobId ?? '') ?? 0;
    expect(pruned).toBeGreaterThan(0);
    expect(pruned).toBeLessThan(whole);
    // The events' id, timestamp and project (7 rows) and the book's six columns (1 row): no JSON column read.
    expect(whole).toBeLessThan(7 * 60 + 100);
  });

  it('leaves out events marked deleted at the source, and forgets the reads of a per-event resource (of one project)', async () => {
    const { fake, dest } = await setup();
    await dest.applyDeletions({
      action: 'mark',
      projectId: 'alpha',
      ids: ['never-old'],
      parent: {
        table: 'events',
        key: 'id',
        projectId: 'alpha',
        column: 'timestamp',
        fromIso: '2024-04-20T00:00:00.000Z',
        toIso: '2024-04-21T00:00:00.000Z',
      },
      followers: [],
      atIso: '2024-05-03T00:00:00.000Z',
      runId: 'r',
    });
    expect(await dest.countOwedTraces(query())).toEqual({ alpha: 5, beta: 1 });
    await dest.writeState(
      commitOf([
        read('never', '2024-05-02T08:00:00.000Z', 1, '2024-05-02T08:05:00.000Z'),
        read('never', '2024-05-02T08:00:00.000Z', 1, '2024-05-02T08:05:00.000Z', 'beta'),
      ]),
    );
    expect(await dest.countOwedTraces(query())).toEqual({ alpha: 4 });
    await dest.forgetTraces('traces', 'beta');
    expect(fake.rows('sync', '_query_sync_children').map((r) => r['project_id'])).toEqual(['alpha']);
    expect(await dest.countOwedTraces(query())).toEqual({ alpha: 4, beta: 1 });
    await dest.forgetTraces('traces');
    expect(fake.rows('sync', '_query_sync_children')).toEqual([]);
  });
});
