import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { tableSchema } from '../../src/core/table-schema.js';
import type { DeletionChange } from '../../src/load/destination.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { deletionOfE2 } from '../fakes/deletions.js';
import { tempDir } from '../fakes/tmp.js';

/** Reconcile's deletions in a real DuckDB file (issue 31): keys, mark once, clear, delete, followers. */

const events = tableSchema(
  'events',
  ['project_id', 'id'],
  { project_id: 'string', id: 'string', timestamp: 'timestamp', _synced_at: 'timestamp', _run_id: 'string' },
  { versionColumn: 'timestamp' },
);
const traces = tableSchema('traces', ['project_id', 'span_id'], {
  project_id: 'string',
  span_id: 'string',
  event_id: 'string',
  _synced_at: 'timestamp',
});
const synced = '2026-11-01T00:00:00.000Z';
const window = {
  projectId: 'a',
  column: 'timestamp',
  fromIso: '2026-11-01T10:00:00.000Z',
  toIso: '2026-11-01T11:00:00.000Z',
};
// event_signals is absent here: a follower the warehouse does not hold is skipped.
const change = (action: DeletionChange['action'], atIso: string): DeletionChange =>
  deletionOfE2(action, window, atIso, 'r2');

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('DuckDB: deletions found by reconcile', () => {
  it('marks once (with its spans), excludes marked rows from the window counts, clears, deletes; a re-write keeps the mark', async () => {
    const d = tempDir();
    cleanups.push(d.cleanup);
    const db = await DuckDbDestination.open(join(d.dir, 'w.duckdb'));
    cleanups.push(() => db.close());
    const row = (id: string, project = 'a') => ({
      project_id: project,
      id,
      timestamp: '2026-11-01T10:15:00Z',
      _synced_at: synced,
      _run_id: 'r1',
    });
    await db.write({ table: events, rows: [row('e1'), row('e2'), row('e2', 'b')] });
    await db.write({ table: traces, rows: [{ project_id: 'a', span_id: 's1', event_id: 'e2', _synced_at: synced }] });

    expect(await db.keysInWindow('events', { ...window, key: 'id' })).toEqual({ live: ['e1', 'e2'], marked: [] });
    expect((await db.applyDeletions(change('mark', '2026-11-02T00:00:00.000Z'))).rows).toEqual({
      events: 1,
      traces: 1,
    });
    expect((await db.applyDeletions(change('mark', '2026-11-03T00:00:00.000Z'))).rows).toEqual({
      events: 0,
      traces: 0,
    });
    const marked = await db.query(
      `SELECT project_id, id, _deleted_at, _run_id FROM events WHERE _deleted_at IS NOT NULL`,
    );
    expect(marked).toEqual([{ project_id: 'a', id: 'e2', _deleted_at: '2026-11-02T00:00:00.000Z', _run_id: 'r2' }]);
    expect(await db.countWindow('events', window)).toBe(1);
    expect((await db.keysInWindow('events', { ...window, key: 'id' })).marked).toEqual(['e2']);

    // A write of the row (a window re-read) leaves the mark to reconcile.
    await db.write({ table: events, rows: [row('e2')] });
    expect(await db.countWindow('events', window)).toBe(1);

    expect((await db.applyDeletions(change('unmark', '2026-11-04T00:00:00.000Z'))).rows).toEqual({
      events: 1,
      traces: 1,
    });
    expect(await db.countWindow('events', window)).toBe(2);
    expect((await db.applyDeletions(change('delete', '2026-11-04T00:00:00.000Z'))).rows).toEqual({
      events: 1,
      traces: 1,
    });
    expect(await db.query('SELECT project_id, id FROM events ORDER BY 1, 2')).toEqual([
      { project_id: 'a', id: 'e1' },
      { project_id: 'b', id: 'e2' },
    ]);
    expect(await db.count('traces')).toBe(0);
  });
});
