import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { conversations } from '../../connectors/conversations.js';
import { events } from '../../connectors/events.js';
import type { ApiRecord } from '../../src/core/types.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { isolateNock, testBigQueryDestination } from '../fixtures/bigquery/destination.js';
import { FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';
import { SchemaTracker } from '../../src/normalize/normalize.js';
import { defineViews } from '../../src/analysts/views.js';
import { dir } from '../fakes/lifecycle.js';

/** A DuckDB file in a folder removed after the test. */
const dbPath = (): string => join(dir(), 'w.duckdb');

const ts = '2026-11-20T10:00:00.000Z';
const sig = (id: string, score: number): ApiRecord => ({ id, name: `name of ${id}`, score });

/** Normalize first: the schema passed with the rows must name every column they use. */
function write(
  db: DuckDbDestination,
  t: SchemaTracker,
  records: readonly ApiRecord[],
  project: string,
): Promise<unknown> {
  const rows = records.map((r) => t.normalize(r, project, ts));
  return db.write({ table: t.schema, rows });
}

/** The bridge as it must be: every stored event's signals array, unnested, in order. */
async function expectedBridge(db: DuckDbDestination): Promise<unknown[]> {
  const rows = await db.query(`SELECT project_id, id, signals FROM events ORDER BY project_id, id`);
  const out: unknown[] = [];
  for (const row of rows) {
    const list =
      row.signals === null ? [] : (JSON.parse(String(row.signals)) as { id?: string; name?: string; score?: number }[]);
    for (const [i, s] of list.entries()) {
      out.push([row.project_id, row.id, BigInt(i), s.id ?? null, s.name ?? null, s.score ?? null]);
    }
  }
  return out;
}

async function bridge(db: DuckDbDestination): Promise<unknown[]> {
  // Made once the events table has a signals column (before, it could hold nothing).
  if ((await db.describe('event_signals')) === undefined) return [];
  const rows = await db.query(
    `SELECT project_id, event_id, ordinal, signal_id, signal_name, score FROM event_signals ORDER BY project_id, event_id, ordinal`,
  );
  return rows.map((r) => [r.project_id, r.event_id, r.ordinal, r.signal_id, r.signal_name, r.score]);
}

describe('event_signals: the bridge written with the events, in the same transaction', () => {
  it('holds the unnested signals arrays, and a re-read event with fewer (or no) signals keeps exactly its new ones', async () => {
    const db = await DuckDbDestination.open(dbPath());
    try {
      const t = new SchemaTracker(events, undefined, 'run-1');
      // e0 has no signals field at all (a recent event not yet enriched): no bridge rows, no error.
      await write(db, t, [{ id: 'e0', timestamp: ts }], 'alpha');
      expect(await bridge(db)).toEqual([]);
      const first = [
        { id: 'e1', timestamp: ts, signals: [sig('s1', 0.5), sig('s2', 1), sig('s3', 0.25)] },
        { id: 'e2', timestamp: ts, signals: [sig('s2', 0.75)] },
        { id: 'e3', timestamp: ts, signals: [] },
      ] as ApiRecord[];
      await write(db, t, first, 'alpha');
      // The same event key in another project is another event.
      await write(db, t, [{ id: 'e1', timestamp: ts, signals: [sig('s9', 0.1)] }], 'beta');
      expect(await bridge(db)).toEqual(await expectedBridge(db));
      expect((await bridge(db)).length).toBe(5);

      // Re-read: e1 with one signal left, e2 with none, e3 gains two; a replayed batch changes nothing.
      const t2 = new SchemaTracker(events, await db.describe('events'), 'run-2');
      const again = [
        { id: 'e1', timestamp: ts, signals: [sig('s3', 0.3)] },
        { id: 'e2', timestamp: ts },
        { id: 'e3', timestamp: ts, signals: [sig('s1', 0.9), 'a bare string'] },
      ] as ApiRecord[];
      for (let i = 0; i < 2; i++) await write(db, t2, again, 'alpha');
      expect(await bridge(db)).toEqual([
        ['alpha', 'e1', 0n, 's3', 'name of s3', 0.3],
        ['alpha', 'e3', 0n, 's1', 'name of s1', 0.9],
        ['alpha', 'e3', 1n, null, null, null],
        ['beta', 'e1', 0n, 's9', 'name of s9', 0.1],
      ]);
      // Whatever an element carries stays in `signal` (JSON); the rows carry their event's run.
      const rows = await db.query(
        `SELECT event_id, signal, _run_id FROM event_signals WHERE project_id = 'alpha' ORDER BY event_id, ordinal`,
      );
      expect(rows.map((r) => [r.event_id, JSON.parse(String(r.signal)), r._run_id])).toEqual([
        ['e1', { id: 's3', name: 'name of s3', score: 0.3 }, 'run-2'],
        ['e3', { id: 's1', name: 'name of s1', score: 0.9 }, 'run-2'],
        ['e3', 'a bare string', 'run-2'],
      ]);
    } finally {
      await db.close();
    }
  });

  it('a batch of stored and new events (insert clause first, then the whole MERGE) keeps rows and bridge exact', async () => {
    const db = await DuckDbDestination.open(dbPath());
    try {
      const t = new SchemaTracker(events, undefined, 'run-1');
      await write(db, t, [{ id: 'e1', timestamp: ts, signals: [sig('s1', 0.5), sig('s2', 1)] }], 'alpha');
      await write(db, t, [{ id: 'e2', timestamp: ts, signals: [sig('s2', 0.75)] }], 'alpha');
      const t2 = new SchemaTracker(events, await db.describe('events'), 'run-2');
      // e1 changed (one signal left), e2 the same, e3 and e4 new.
      const mixed = [
        { id: 'e1', timestamp: ts, signals: [sig('s3', 0.3)] },
        { id: 'e2', timestamp: ts, signals: [sig('s2', 0.75)] },
        { id: 'e3', timestamp: ts, signals: [sig('s1', 0.9)] },
        { id: 'e4', timestamp: ts },
      ] as ApiRecord[];
      const rows = mixed.map((r) => t2.normalize(r, 'alpha', ts));
      const result = await db.write({ table: t2.schema, rows });
      expect(result.changed).toBeUndefined();
      expect(await db.query(`SELECT id, _run_id FROM events ORDER BY id`)).toEqual([
        { id: 'e1', _run_id: 'run-2' },
        { id: 'e2', _run_id: 'run-1' },
        { id: 'e3', _run_id: 'run-2' },
        { id: 'e4', _run_id: 'run-2' },
      ]);
      expect(await bridge(db)).toEqual(await expectedBridge(db));
      expect(await bridge(db)).toEqual([
        ['alpha', 'e1', 0n, 's3', 'name of s3', 0.3],
        ['alpha', 'e2', 0n, 's2', 'name of s2', 0.75],
        ['alpha', 'e3', 0n, 's1', 'name of s1', 0.9],
      ]);
      // The same batch again (all stored, nothing new): nothing changes.
      const replay = await db.write({ table: t2.schema, rows: mixed.map((r) => t2.normalize(r, 'alpha', ts)) });
      expect(replay.changed).toBe(0);
      expect(await bridge(db)).toEqual(await expectedBridge(db));
    } finally {
      await db.close();
    }
  });

  it('a failing bridge write rolls the events back with it', async () => {
    const db = await DuckDbDestination.open(dbPath());
    try {
      const t = new SchemaTracker(events, undefined, 'run-1');
      await write(db, t, [{ id: 'e1', timestamp: ts, signals: [sig('s1', 0.5)] }], 'alpha');
      // Make the bridge insert fail: a signal may appear once per project.
      await db.query(`CREATE UNIQUE INDEX event_signals_once ON event_signals (project_id, signal_id)`);
      const clash = { id: 'e2', timestamp: ts, signals: [sig('s1', 0.7)] } as ApiRecord;
      await expect(write(db, t, [clash], 'alpha')).rejects.toThrow(/event_signals|constraint|Duplicate/i);
      expect((await db.query(`SELECT id FROM events ORDER BY id`)).map((r) => r.id)).toEqual(['e1']);
      expect(await bridge(db)).toEqual([['alpha', 'e1', 0n, 's1', 'name of s1', 0.5]]);
    } finally {
      await db.close();
    }
  });
});

describe('event_signals in BigQuery (the real client, the strict double): rewritten right after the events MERGE', () => {
  isolateNock();

  it('holds the unnested arrays; a re-read event with fewer or no signals keeps exactly its new ones, in one script after the MERGE', async () => {
    const fake = new FakeBigQuery('proj');
    fake.install();
    const dest = testBigQueryDestination();
    const bridgeRows = (): unknown[] =>
      fake
        .rows('sync', 'event_signals')
        .map((r) => [
          String(r.project_id),
          String(r.event_id),
          Number(String(r.ordinal)),
          r.signal_id ?? null,
          r.signal_name ?? null,
          r.score === null || r.score === undefined ? null : Number(String(r.score)),
          r._run_id,
        ])
        .sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));
    const t = new SchemaTracker(events, undefined, 'run-1');
    const write = async (tracker: SchemaTracker, records: readonly ApiRecord[], project: string): Promise<void> => {
      const rows = records.map((r) => tracker.normalize(r, project, ts));
      await dest.write({ table: tracker.schema, rows });
    };
    await write(
      t,
      [
        { id: 'e1', timestamp: ts, signals: [sig('s1', 0.5), sig('s2', 1)] },
        { id: 'e2', timestamp: ts, signals: [sig('s2', 0.75)] },
      ] as ApiRecord[],
      'alpha',
    );
    expect(bridgeRows()).toEqual([
      ['alpha', 'e1', 0, 's1', 'name of s1', 0.5, 'run-1'],
      ['alpha', 'e1', 1, 's2', 'name of s2', 1, 'run-1'],
      ['alpha', 'e2', 0, 's2', 'name of s2', 0.75, 'run-1'],
    ]);
    const t2 = new SchemaTracker(events, await dest.describe('events'), 'run-2');
    await write(
      t2,
      [
        { id: 'e1', timestamp: ts, signals: [sig('s3', 0.25)] },
        { id: 'e2', timestamp: ts },
      ] as ApiRecord[],
      'alpha',
    );
    expect(bridgeRows()).toEqual([['alpha', 'e1', 0, 's3', 'name of s3', 0.25, 'run-2']]);
    // The script ran after the MERGE, as one transaction.
    const scripts = fake.queries.map((q) => q.query).filter((q) => q.startsWith('BEGIN TRANSACTION;'));
    expect(scripts).toHaveLength(2);
    expect(scripts[1]).toMatch(
      /^BEGIN TRANSACTION;\nDELETE FROM `proj`\.`sync`\.`event_signals` AS B WHERE EXISTS[\s\S]*UNNEST\(JSON_QUERY_ARRAY\(T\.`signals`\)\) AS E WITH OFFSET AS O[\s\S]*COMMIT TRANSACTION;$/,
    );

    // The conversation_events view, over the tables as they are (its columns follow theirs).
    const c = new SchemaTracker(conversations, undefined, 'run-2');
    const convo = [c.normalize({ id: 'c1', started_at: ts, last_message_at: ts, message_count: 2 }, 'alpha', ts)];
    await dest.write({ table: c.schema, rows: convo });
    await write(t2, [{ id: 'e3', timestamp: ts, convo_id: 'c1' }] as ApiRecord[], 'alpha');
    expect(await defineViews(dest, pino({ level: 'silent' }))).toEqual(['conversation_events']);
    // (conversations is itself a view, over its change log: this finds the view built on it.)
    const view = fake.queries
      .map((q) => q.query)
      .find((q) => q.startsWith('CREATE OR REPLACE VIEW `proj`.`sync`.`conversation_events`'));
    expect(view).toMatch(
      /^CREATE OR REPLACE VIEW `proj`\.`sync`\.`conversation_events` AS SELECT e\.`project_id`, [\s\S]*ROW_NUMBER\(\) OVER \(PARTITION BY e\.`project_id`, e\.`convo_id` ORDER BY e\.`timestamp`, e\.`id`\) AS `turn`, c\.`started_at` AS `convo_started_at`[\s\S]* LEFT JOIN `proj`\.`sync`\.`conversations` AS c ON /,
    );
    const columns = (await dest.describe('conversation_events'))?.map((col) => `${col.name}:${col.type}`);
    expect(columns).toEqual(
      expect.arrayContaining([
        'convo_id:string',
        'turn:int64',
        'convo_started_at:timestamp',
        'convo_message_count:int64',
        '_run_id:string',
      ]),
    );
    await dest.close();
  });

  it("reads the stored events only in the batch's partitions (as the MERGE does), and still rewrites exactly their signals", async () => {
    const fake = new FakeBigQuery('proj');
    fake.install();
    const dest = testBigQueryDestination();
    const t = new SchemaTracker(events, undefined, 'run-1');
    // 30 days of events with signals, then one event of the last day re-read with other signals.
    const days = Array.from({ length: 30 }, (_, i) =>
      new Date(Date.parse('2026-10-01T12:00:00Z') + i * 86_400_000).toISOString(),
    );
    const first = days.flatMap((day, i) =>
      [0, 1, 2].map((n) => ({ id: `e${i}-${n}`, timestamp: day, signals: [sig(`s${n}`, n)] })),
    );
    const rows = first.map((r) => t.normalize(r as ApiRecord, 'alpha', ts));
    await dest.write({ table: t.schema, rows });
    const last = days[days.length - 1] as string;
    const again = [
      t.normalize({ id: 'e29-0', timestamp: last, signals: [sig('s7', 7), sig('s8', 8)] } as ApiRecord, 'alpha', ts),
    ];
    await dest.write({ table: t.schema, rows: again });

    const bridgeJobs = [...fake.processed.keys()].filter((id) => id.startsWith('qs_bridge_event_signals_'));
    const script = fake.queries
      .map((q) => q.query)
      .filter((q) => q.startsWith('BEGIN TRANSACTION;'))
      .at(-1);
    expect(script).toMatch(
      /WHERE EXISTS \(SELECT 1 FROM [^;]+\) AND DATE\(T\.`timestamp`\) IN \(DATE '2026-10-30'\);\nCOMMIT TRANSACTION;$/,
    );
    const bytes = (table: string): number =>
      fake.rows('sync', table).reduce((n, r) => n + Buffer.byteLength(JSON.stringify(r)), 0);
    // The job reads the stage, the bridge (not partitioned by day) and the events it unnests.
    const lastBridgeBytes = fake.processed.get(bridgeJobs.at(-1) as string) ?? 0;
    expect(lastBridgeBytes, 'one day of 30 of events read, not the whole table').toBeLessThan(
      bytes('event_signals') + bytes('events') / 5,
    );
    const bridge = fake
      .rows('sync', 'event_signals')
      .filter((r) => r.event_id === 'e29-0')
      .map((r) => [Number(String(r.ordinal)), r.signal_id]);
    expect(bridge.sort()).toEqual([
      [0, 's7'],
      [1, 's8'],
    ]);
    expect(fake.rows('sync', 'event_signals')).toHaveLength(89 + 2);
    await dest.close();
  });
});
