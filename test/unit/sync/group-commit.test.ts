import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { events } from '../../../connectors/events.js';
import { systemClock } from '../../../src/core/clock.js';
import type { ApiRecord } from '../../../src/core/types.js';
import { DuckDbDestination } from '../../../src/load/duckdb/destination.js';
import type { Destination, LoadBatch } from '../../../src/load/destination.js';
import { SchemaTracker } from '../../../src/normalize/normalize.js';
import { keepStateIn } from '../../../src/run/state-home.js';
import { StateStore } from '../../../src/state/store.js';
import { GroupCommit } from '../../../src/sync/group-commit.js';
import { tempDir } from '../../fakes/tmp.js';

/**
 * A split's parts commit through their stream's `GroupCommit` (a real DuckDB file, the state in
 * it): the batches handed over while one is written go in the next write, their state in its
 * transaction; each walk's `commit` resolves once its batch is durable, and a write that fails
 * fails every batch it held, with none of their state.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const ts = '2026-11-20T10:00:00.000Z';

async function open(): Promise<{ dir: string; state: StateStore; db: DuckDbDestination; writes: LoadBatch[] }> {
  const d = tempDir();
  cleanups.push(d.cleanup);
  const db = await DuckDbDestination.open(join(d.dir, 'w.duckdb'));
  const state = await StateStore.open(join(d.dir, 'state.json'), { clock: systemClock, purpose: 'sync' });
  cleanups.push(async () => {
    await state.close();
    await db.close().catch(() => undefined);
  });
  await keepStateIn(state, db);
  return { dir: d.dir, state, db, writes: [] };
}

/** The real destination, each write it is handed kept (to count them). */
function counted(db: DuckDbDestination, writes: LoadBatch[]): Destination {
  const destination = Object.create(db) as DuckDbDestination;
  destination.write = (batch) => {
    writes.push(batch);
    return db.write(batch);
  };
  return destination;
}

describe('GroupCommit: a stream’s parts share its commits', () => {
  it('twenty parts handing batches at once: fewer writes, every row and every part’s state stored, each resolved once durable', async () => {
    const { dir, state, db, writes } = await open();
    const tracker = new SchemaTracker(events, undefined, 'run-1');
    const commits = new GroupCommit({
      tracker,
      batchRows: 5_000,
      batchBytes: 8_000_000,
      deps: { destination: counted(db, writes), state },
    });
    const durable: number[] = [];
    await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const rows = [0, 1].map((j) => tracker.normalize({ id: `e${i}-${j}`, timestamp: ts } as ApiRecord, 'a', ts));
        const result = await commits.commit(rows, (batch) =>
          batch.updateSection<Record<string, number>>('parts', (current = {}) => ({ ...current, [`p${i}`]: i })),
        );
        expect(result.rows).toBe(2);
        // Resolved once durable: its rows are in the table.
        const stored = await db.query(`SELECT COUNT(*) AS n FROM events WHERE id LIKE 'e${i}-%'`);
        expect(Number(stored[0]?.n)).toBe(2);
        durable.push(i);
      }),
    );
    expect(durable.length).toBe(20);
    // The first write alone (nothing waited yet), the nineteen handed over meanwhile in the next.
    expect(writes.map((w) => w.rows.length)).toEqual([2, 38]);
    expect(Number((await db.query('SELECT COUNT(*) AS n FROM events'))[0]?.n)).toBe(40);
    const restored = await StateStore.readWith(join(dir, 'nowhere.json'), db.can.state);
    expect(restored.sections.parts).toEqual(Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`p${i}`, i])));
  });

  it('a write that fails fails every batch it held, with none of their rows or state; the next write goes on', async () => {
    const { dir, state, db, writes } = await open();
    const tracker = new SchemaTracker(events, undefined, 'run-1');
    const commits = new GroupCommit({
      tracker,
      batchRows: 5_000,
      batchBytes: 8_000_000,
      deps: { destination: counted(db, writes), state },
    });
    const part = (i: number, timestamp = ts) =>
      commits.commit([tracker.normalize({ id: `e${i}`, timestamp } as ApiRecord, 'a', ts)], (batch) =>
        batch.updateSection<Record<string, number>>('parts', (current = {}) => ({ ...current, [`p${i}`]: i })),
      );
    await part(0);
    // Make a write fail: one event per timestamp.
    await db.query('CREATE UNIQUE INDEX events_once ON events (timestamp)');
    const at = (i: number): string => `2026-11-20T10:00:0${i}.000Z`;
    const alone = part(5, at(5));
    // Handed over while e5 is written: one write, which fails on e2's timestamp (e0's).
    const held = [part(1, at(1)), part(2), part(3, at(3))];
    await alone;
    const settled = await Promise.allSettled(held);
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect(writes.map((w) => w.rows.length)).toEqual([1, 1, 3]);
    expect((await db.query('SELECT id FROM events ORDER BY id')).map((r) => r.id)).toEqual(['e0', 'e5']);
    expect((await StateStore.readWith(join(dir, 'nowhere.json'), db.can.state)).sections.parts).toEqual({
      p0: 0,
      p5: 5,
    });
    await part(4, at(4));
    expect((await db.query('SELECT id FROM events ORDER BY id')).map((r) => r.id)).toEqual(['e0', 'e4', 'e5']);
    expect((await StateStore.readWith(join(dir, 'nowhere.json'), db.can.state)).sections.parts).toEqual({
      p0: 0,
      p4: 4,
      p5: 5,
    });
  });
});
