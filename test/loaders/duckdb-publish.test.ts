import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { users } from '../../connectors/users.js';
import { systemClock } from '../../src/core/clock.js';
import type { ApiRecord } from '../../src/core/types.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { SchemaTracker } from '../../src/normalize/normalize.js';
import { layoutOf, takeOverOldLayout, workingPathForReading } from '../../src/publish/layout.js';
import { readManifest } from '../../src/publish/manifest.js';
import { RESOURCES } from '../../connectors/index.js';
import { partitionedTables, partitionFilter, partitionOfRow } from '../../src/publish/partitions.js';

// The tables cut by day, as the CLI reads them from the resources (their `partitionColumn`).
const PARTITIONED = partitionedTables(RESOURCES);
import { Publisher } from '../../src/publish/publisher.js';
import { trackWrites } from '../../src/publish/tracking.js';
import { dir } from '../fakes/lifecycle.js';

/** Rows of `sql` on a DuckDB file opened read-only, as a reader would. */
async function read(path: string, sql: string): Promise<unknown[][]> {
  const instance = await DuckDBInstance.create(path, { access_mode: 'READ_ONLY' });
  try {
    const c = await instance.connect();
    await c.run("SET TimeZone = 'UTC'");
    const rows = (await c.runAndReadAll(sql)).getRows();
    c.closeSync();
    return rows;
  } finally {
    instance.closeSync();
  }
}

/** A batch: rows normalized first, so the schema passed with them names their columns. */
function batch(
  tracker: SchemaTracker,
  records: readonly ApiRecord[],
  at = '2026-11-26T12:00:00.000Z',
): { table: SchemaTracker['schema']; rows: ReturnType<SchemaTracker['normalize']>[] } {
  const rows = records.map((r) => tracker.normalize(r, 'alpha', at));
  return { table: tracker.schema, rows };
}

const event = (id: string, day: string, text = 'x'): ApiRecord => ({
  id,
  timestamp: `${day}T10:00:00.000Z`,
  user_input: text,
  signals: [{ id: `s-${id}`, name: 'n' }],
});

describe('publishing the read copy (real DuckDB files)', () => {
  it('a row is in the partition its SQL filter selects (the JS and SQL sides agree on days, in UTC)', () => {
    // Read from the resources' one declaration (connectors/events.ts, connectors/traces.ts).
    expect(PARTITIONED).toEqual({
      events: { column: 'timestamp', kind: 'timestamp' },
      traces: { column: 'start_time_ns', kind: 'ns' },
    });
    const spec = PARTITIONED.events;
    if (spec === undefined) throw new Error('events are partitioned');
    expect(partitionOfRow(spec, { timestamp: '2026-11-26T23:59:59.999+00:00' })).toBe('dt=2026-11-26');
    expect(partitionOfRow(spec, { timestamp: '2026-11-27T00:30:00+02:00' })).toBe('dt=2026-11-26');
    expect(partitionOfRow(spec, { timestamp: null })).toBe('dt=null');
    expect(partitionOfRow(spec, { timestamp: 'not a time' })).toBeUndefined();
    const ns = PARTITIONED.traces;
    if (ns === undefined) throw new Error('traces are partitioned');
    expect(partitionOfRow(ns, { start_time_ns: 1795674998118555731n })).toBe(
      `dt=${new Date(1795674998118).toISOString().slice(0, 10)}`,
    );
    expect(partitionFilter(spec, 'dt=2026-11-26', (n) => `"${n}"`)).toBe(
      `"timestamp" >= TIMESTAMPTZ '2026-11-26T00:00:00.000Z' AND "timestamp" < TIMESTAMPTZ '2026-11-27T00:00:00.000Z'`,
    );
  });

  it('publishes every table as views over day-partitioned Parquet; a later publish rewrites only the days written since; the Parquet set equals the tables', async () => {
    const layout = layoutOf(join(dir(), 'warehouse.duckdb'));
    const db = await DuckDbDestination.open(layout.work);
    const publisher = new Publisher(layout.published, db, systemClock, { partitioned: PARTITIONED });
    const tracked = trackWrites(db, publisher);
    const ev = new SchemaTracker(events);
    const us = new SchemaTracker(users);
    const at = '2026-11-26T12:00:00.000Z';
    await tracked.write(
      batch(
        ev,
        ['2026-11-20', '2026-11-21', '2026-11-22'].flatMap((day, i) => [event(`a${i}`, day), event(`b${i}`, day)]),
        at,
      ),
    );
    await tracked.write(batch(us, [{ id: 'u1', last_seen: at }], at));
    const first = await publisher.publish(false);
    expect(first.rewritten).toBeGreaterThanOrEqual(5); // three days of events, event_signals, users
    const before = readManifest(layout.manifest);
    expect(Object.keys(before?.tables.events?.partitions ?? {})).toEqual([
      'dt=2026-11-20',
      'dt=2026-11-21',
      'dt=2026-11-22',
    ]);

    // One event changed on the 21st, one new on the 23rd: two event partitions, and the bridge.
    await tracked.write(batch(ev, [event('a1', '2026-11-21', 'changed'), event('c', '2026-11-23')], at));
    const second = await publisher.publish(true);
    expect(second.rewritten).toBe(3);
    const after = readManifest(layout.manifest);
    expect(after?.tables.events?.partitions['dt=2026-11-20']?.version).toBe(
      before?.tables.events?.partitions['dt=2026-11-20']?.version,
    );
    expect(after?.tables.users?.partitions['']?.version).toBe(before?.tables.users?.partitions['']?.version);
    expect(after?.tables.events?.partitions['dt=2026-11-21']?.version).not.toBe(
      before?.tables.events?.partitions['dt=2026-11-21']?.version,
    );
    expect(after?.tables.events?.rows).toBe(7);
    expect(await read(layout.published, `SELECT user_input FROM events WHERE id = 'a1'`)).toEqual([['changed']]);
    expect(await read(layout.published, 'SELECT count(*) FROM event_signals')).toEqual([[7n]]);
    // The superseded file stays for readers of the older catalog.
    expect(
      existsSync(join(layout.files, before?.tables.events?.partitions['dt=2026-11-21']?.version ?? 'missing')),
    ).toBe(true);
    await db.close();

    // The Parquet set, read with a glob, equals the working tables.
    const instance = await DuckDBInstance.create(':memory:');
    const c = await instance.connect();
    await c.run(`ATTACH '${layout.work}' AS w (READ_ONLY)`);
    for (const table of ['events', 'event_signals', 'users']) {
      const glob = `read_parquet('${layout.files}/${table}/**/*.parquet', hive_partitioning = false)`;
      const diff = (
        await c.runAndReadAll(
          `SELECT (SELECT count(*) FROM (SELECT * FROM w.main.${table} EXCEPT ALL SELECT * FROM ${glob})) + (SELECT count(*) FROM (SELECT * FROM ${glob} EXCEPT ALL SELECT * FROM w.main.${table}))`,
        )
      ).getRows();
      expect(diff, table).toEqual([[0n]]);
    }
    c.closeSync();
    instance.closeSync();
  });

  it('a new process catches up what an earlier one wrote after its last publish (by _synced_at), and a row removed outside a run is noticed by the count', async () => {
    const layout = layoutOf(join(dir(), 'warehouse.duckdb'));
    const ev = new SchemaTracker(events);
    let db = await DuckDbDestination.open(layout.work);
    let publisher = new Publisher(layout.published, db, systemClock, { partitioned: PARTITIONED });
    await trackWrites(db, publisher).write(batch(ev, [event('a', '2026-11-20'), event('b', '2026-11-21')]));
    await publisher.publish(false); // mid-run: not final
    // Written after that publish by the same run, then the process died (no mark survives it).
    await db.write(batch(ev, [event('b', '2026-11-21', 'late')]));
    await db.close();

    db = await DuckDbDestination.open(layout.work);
    publisher = new Publisher(layout.published, db, systemClock, { partitioned: PARTITIONED });
    await publisher.publish(true);
    expect(await read(layout.published, `SELECT user_input FROM events WHERE id = 'b'`)).toEqual([['late']]);

    // A row deleted outside any run (no mark, no _synced_at change): the counts disagree, the table is rewritten.
    await db.query(`DELETE FROM events WHERE id = 'a'`);
    await publisher.publish(true);
    expect(await read(layout.published, 'SELECT id FROM events ORDER BY id')).toEqual([['b']]);
    await db.close();
  });

  it('an old-layout warehouse is taken over by rename, with a line saying so; readers find it where it is until then', async () => {
    const path = join(dir(), 'warehouse.duckdb');
    const old = await DuckDbDestination.open(path);
    await old.query('CREATE TABLE t AS SELECT 1 AS x');
    await old.close();
    expect(workingPathForReading(path)).toBe(layoutOf(path).published);
    const { work, note } = takeOverOldLayout(path);
    expect(work).toBe(layoutOf(path).work);
    expect(note).toMatch(/took over the warehouse .*warehouse\.duckdb.*now writes .*warehouse\.work\.duckdb/);
    expect(existsSync(path)).toBe(false);
    expect(await read(work, 'SELECT x FROM t')).toEqual([[1]]);
    expect(takeOverOldLayout(path).note).toBeUndefined(); // once
  });
});
