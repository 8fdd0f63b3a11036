import { DuckDBConnection } from '@duckdb/node-api';
import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { systemClock } from '../../../src/core/clock.js';
import { DuckDbDestination } from '../../../src/load/duckdb/destination.js';
import type { StateCommit } from '../../../src/core/state-table.js';
import type { Row } from '../../../src/core/types.js';
import { StateStore } from '../../../src/state/store.js';
import type { StateWriter } from '../../../src/state/batch.js';
import { keepStateIn } from '../../../src/run/state-home.js';
import { keyedTable } from '../../fixtures/bigquery/tables.js';
import { tempDir } from '../../fakes/tmp.js';

/**
 * Batches and their state in one DuckDB transaction (a real file): writers of one key that run at
 * once (a split walk's sub-windows) each see the others' commits, so none regresses another's
 * checkpoint; a batch whose write fails leaves its state unwritten.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function open(): Promise<{ dir: string; state: StateStore; db: DuckDbDestination }> {
  const d = tempDir();
  cleanups.push(d.cleanup);
  const db = await DuckDbDestination.open(join(d.dir, 'w.duckdb'));
  const state = await StateStore.open(join(d.dir, 'state.json'), { clock: systemClock, purpose: 'sync' });
  cleanups.push(async () => {
    await state.close();
    await db.close().catch(() => undefined);
  });
  await keepStateIn(state, db);
  return { dir: d.dir, state, db };
}

const table = keyedTable('parts');
const typedTable = keyedTable('typed', [{ name: 'n', type: 'int64' }]);

describe('state committed with its batch', () => {
  it("a change made with each commit (withEachCommit) rides in every batch's transaction, asked anew each time", async () => {
    const { dir, state, db } = await open();
    let asked = 0;
    state.withEachCommit(() => {
      asked += 1;
      const n = asked;
      return (doc) => ({ ...doc, sections: { ...doc.sections, rider: { n } } });
    });
    for (const i of [1, 2]) {
      await state.withBatch(
        (batch) => batch.updateSection('parts', () => ({ i })),
        (commit) =>
          db.write({
            table,
            rows: [{ project_id: 'a', id: String(i) }],
            ...(commit === undefined ? {} : { state: commit }),
          }),
      );
      // What a process killed now leaves in the warehouse: the rider as of this batch, with it.
      const restored = await StateStore.readWith(join(dir, 'nowhere.json'), db.can.state);
      expect(restored.sections).toMatchObject({ parts: { i }, rider: { n: asked } });
    }
    expect(asked).toBe(2);
  });

  it('twenty concurrent batches changing one section all land, each with its rows', async () => {
    const { dir, state, db } = await open();
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        state.withBatch(
          (batch) =>
            batch.updateSection<Record<string, number>>('parts', (current = {}) => ({ ...current, [`p${i}`]: i })),
          (commit) =>
            db.write({
              table,
              rows: [{ project_id: 'a', id: String(i) }],
              ...(commit === undefined ? {} : { state: commit }),
            }),
        ),
      ),
    );
    expect(Object.keys(state.document.sections['parts'] as object)).toHaveLength(20);
    const restored = await StateStore.readWith(join(dir, 'nowhere.json'), db.can.state);
    expect(Object.keys(restored.sections['parts'] as object).sort()).toEqual(
      Array.from({ length: 20 }, (_, i) => `p${i}`).sort(),
    );
    expect(await db.count('parts')).toBe(20);
  });

  it('state values of any text (quotes, SQL, 100 KB) commit with their batch and read back exactly; a failed batch leaves them as they were', async () => {
    const { dir, state, db } = await open();
    const tricky = `it's a cursor with 'quotes', a backslash \\, a semicolon; COMMIT; -- and ${'é'.repeat(3)} \u2028 $1`;
    const big = `${'x'.repeat(100_000)}'`;
    const write = (rows: Row[]) => (commit: StateCommit | undefined) =>
      db.write({ table: typedTable, rows, ...(commit === undefined ? {} : { state: commit }) });
    await state.withBatch(
      async (batch) => {
        await batch.updateSection('small', () => ({ tricky }));
        await batch.updateSection('large', () => ({ big }));
      },
      write([{ project_id: 'a', id: '1', n: '1' }]),
    );
    const restored = async (): Promise<readonly unknown[]> => {
      const doc = await StateStore.readWith(join(dir, 'nowhere.json'), db.can.state);
      return [doc.sections['small'], doc.sections['large']];
    };
    expect(await restored()).toEqual([{ tricky }, { big }]);
    // A batch that fails (text that is no BIGINT) with a bound value in its state leaves both as they were.
    const failed = await state
      .withBatch(
        async (batch) => {
          await batch.updateSection('small', () => ({ tricky: 'changed' }));
          await batch.updateSection('large', () => ({ big: 'y'.repeat(100_000) }));
        },
        write([{ project_id: 'a', id: '2', n: 'abc' }]),
      )
      .catch((e: unknown) => e);
    expect((failed as Error).message).toMatch(/DuckDB write to table typed failed/);
    expect(await restored()).toEqual([{ tricky }, { big }]);
    expect(await db.count('typed')).toBe(1);
  });

  it('a batch whose write fails leaves its state as it was, in memory and in the warehouse', async () => {
    const { dir, state, db } = await open();
    await state.updateStream('events:*', () => ({ mark: '2026-01-01T00:00:00.000Z' }));
    const typed = keyedTable('typed', [{ name: 'n', type: 'int64' }]);
    await db.write({ table: typed, rows: [{ project_id: 'a', id: '0', n: '1' }] });
    // The MERGE itself fails (text that is no BIGINT), after the state rows were prepared.
    const failed = await state
      .withBatch(
        (batch) => batch.updateStream('events:*', () => ({ mark: '2026-02-01T00:00:00.000Z' })),
        (commit) =>
          db.write({
            table: typed,
            rows: [
              { project_id: 'a', id: '1', n: '2' },
              { project_id: 'a', id: '2', n: 'abc' },
            ],
            ...(commit === undefined ? {} : { state: commit }),
          }),
      )
      .catch((e: unknown) => e);
    expect((failed as Error).message).toMatch(/DuckDB write to table typed failed/);
    expect(await db.count('typed')).toBe(1);
    expect(state.stream('events:*').mark).toBe('2026-01-01T00:00:00.000Z');
    const restored = await StateStore.readWith(join(dir, 'nowhere.json'), db.can.state);
    expect(restored.streams['events:*']?.mark).toBe('2026-01-01T00:00:00.000Z');
  });

  it('in order: the rows and their state commit, then the callbacks the changes left run; the batch then takes no more', async () => {
    const { state, db } = await open();
    const seen: string[] = [];
    let kept: StateWriter | undefined;
    await state.withBatch(
      async (batch) => {
        kept = batch;
        await batch.updateStream('events:*', () => ({ mark: '2026-03-01T00:00:00.000Z' }));
        batch.whenCommitted(() => seen.push(`hook sees mark ${state.stream('events:*').mark ?? 'none'}`));
      },
      async (commit) => {
        seen.push(`write sees mark ${state.stream('events:*').mark ?? 'none'}`);
        return db.write({
          table,
          rows: [{ project_id: 'a', id: 'x' }],
          ...(commit === undefined ? {} : { state: commit }),
        });
      },
    );
    expect(seen).toEqual(['write sees mark none', 'hook sees mark 2026-03-01T00:00:00.000Z']);
    await expect(kept?.updateStream('events:*', () => ({}))).rejects.toThrow(/batch already committed/);
  });
  it('state writes queued one right behind another share one transaction; one queued after a batch does not join those before it', async () => {
    const { db } = await open();
    await db.writeState({ rows: [{ key: 'seed', value: '0' }] });
    // The statements the real connection runs (the destination's own, counted, not replaced).
    const run = DuckDBConnection.prototype.run;
    const statements: string[] = [];
    DuckDBConnection.prototype.run = function (this: DuckDBConnection, sql: string, ...rest: unknown[]) {
      statements.push(sql);
      return (run as (...a: unknown[]) => ReturnType<typeof run>).call(this, sql, ...rest);
    } as typeof run;
    try {
      const writes = [
        db.writeState({ rows: [{ key: 'a', value: '1' }] }),
        db.writeState({ rows: [{ key: 'b', value: '1' }] }),
        db.write({ table, rows: [{ project_id: 'p', id: '1' }] }),
        db.writeState({ rows: [{ key: 'a', value: '2' }] }),
        db.writeState({ rows: [{ key: 'seed', value: null }], traceReads: [] }),
      ];
      await Promise.all(writes);
    } finally {
      DuckDBConnection.prototype.run = run;
    }
    const stateWrites = statements.filter((sql) => sql.includes('DELETE FROM main."_query_sync_state"'));
    // Two transactions for four state writes: a and b together, then (after the batch) a and seed.
    // Had the third joined the first, there would be one, committed ahead of the batch queued before it.
    expect(stateWrites).toHaveLength(2);
    const rows = await db.readState();
    expect(Object.fromEntries(rows.map((r) => [r.key, r.value]))).toEqual({ a: '2', b: '1' });
    expect(await db.count(table.name)).toBe(1);
  });
});
