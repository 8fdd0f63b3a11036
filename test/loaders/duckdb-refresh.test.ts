import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { assertCanRefresh, refreshedTables, shadowTable, ShadowDestination } from '../../src/run/refresh.js';
import { SchemaTracker } from '../../src/normalize/normalize.js';
import { ConfigError } from '../../src/core/errors.js';
import type { ApiRecord, TableSchema } from '../../src/core/types.js';
import { keyedTable } from '../fixtures/bigquery/tables.js';
import type { Destination } from '../../src/load/destination.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { tempDir } from '../fakes/tmp.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const users: TableSchema = keyedTable('users', [{ name: 'plan', type: 'string' }]);

async function open(): Promise<DuckDbDestination> {
  const d = tempDir();
  cleanups.push(d.cleanup);
  const db = await DuckDbDestination.open(join(d.dir, 'w.duckdb'));
  cleanups.push(() => db.close());
  return db;
}

describe('full refresh in DuckDB', () => {
  it('writes go to the shadow table; the swap replaces the table in one step and leaves no shadow', async () => {
    const db = await open();
    await db.write({
      table: users,
      rows: [
        { project_id: 'p', id: 'old', plan: 'free' },
        { project_id: 'p', id: 'gone', plan: 'free' },
      ],
    });
    const shadow = new ShadowDestination(db);
    await shadow.write({ table: users, rows: [{ project_id: 'p', id: 'old', plan: 'pro' }] });
    expect(await db.count('users'), 'the table is untouched until the swap').toBe(2);
    expect(await db.count(shadowTable('users'))).toBe(1);
    await db.replaceTables([{ table: 'users', shadow: shadowTable('users') }]);
    expect(await db.query('SELECT id, plan FROM users')).toEqual([{ id: 'old', plan: 'pro' }]);
    expect(await db.describe(shadowTable('users'))).toBeUndefined();
    // The table keeps working for ordinary merges after the swap.
    await db.write({ table: users, rows: [{ project_id: 'p', id: 'new', plan: 'free' }] });
    expect(await db.count('users')).toBe(2);
  });

  it('a refresh that read nothing empties the table; a leftover shadow is dropped', async () => {
    const db = await open();
    await db.write({ table: users, rows: [{ project_id: 'p', id: 'a', plan: 'free' }] });
    await db.replaceTables([{ table: 'users', shadow: shadowTable('users') }]);
    expect(await db.count('users')).toBe(0);
    await new ShadowDestination(db).write({ table: users, rows: [{ project_id: 'p', id: 'b', plan: 'free' }] });
    await db.dropTable(shadowTable('users'));
    expect(await db.describe(shadowTable('users'))).toBeUndefined();
  });

  it('events and their event_signals bridge are refreshed together: the old bridge stays until the swap, then holds exactly the re-read signals', async () => {
    const db = await open();
    const ts = '2026-11-20T10:00:00.000Z';
    const signal = (id: string): ApiRecord => ({ id, name: `name of ${id}` });
    const old = new SchemaTracker(events, undefined, 'run-1');
    const oldRows = [
      { id: 'kept', timestamp: ts, signals: [signal('s1'), signal('s2')] },
      { id: 'deleted-at-source', timestamp: ts, signals: [signal('s9')] },
    ].map((r) => old.normalize(r, 'p', ts));
    await db.write({ table: old.schema, rows: oldRows });
    const bridge = (table: string): Promise<Record<string, unknown>[]> =>
      db.query(`SELECT event_id, signal_id FROM ${table} ORDER BY event_id, ordinal`);
    expect(await bridge('event_signals')).toHaveLength(3);

    const fresh = new SchemaTracker(events, undefined, 'run-2');
    const shadow = new ShadowDestination(db);
    const freshRows = [fresh.normalize({ id: 'kept', timestamp: ts, signals: [signal('s2')] }, 'p', ts)];
    await shadow.write({ table: fresh.schema, rows: freshRows });
    expect(await bridge('event_signals'), 'the live bridge is untouched until the swap').toHaveLength(3);
    expect(await bridge(shadowTable('event_signals'))).toEqual([{ event_id: 'kept', signal_id: 's2' }]);

    const swaps = refreshedTables(events);
    expect(swaps.map((t) => t.table)).toEqual(['events', 'event_signals']);
    await db.replaceTables(swaps);
    expect(await db.query('SELECT id FROM events')).toEqual([{ id: 'kept' }]);
    expect(await bridge('event_signals'), 'no bridge row of an event the refresh no longer saw').toEqual([
      { event_id: 'kept', signal_id: 's2' },
    ]);
    expect(await db.describe(shadowTable('event_signals'))).toBeUndefined();
  });

  it('a destination that cannot swap tables is refused before anything is read, saying what to do instead', () => {
    const withoutSwaps = { kind: 'custom', can: {} } as unknown as Destination;
    expect(() => assertCanRefresh(withoutSwaps)).toThrow(ConfigError);
    expect(() => assertCanRefresh(withoutSwaps)).toThrow(
      /custom destination cannot do \(DuckDB and BigQuery can\).*query-sync reset --resources <names> --yes, then sync/,
    );
  });
});
