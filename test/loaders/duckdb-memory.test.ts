import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { SchemaTracker } from '../../src/normalize/normalize.js';
import { dir } from '../fakes/lifecycle.js';

/**
 * DuckDbDestination at a memory limit far below what it writes (a slow file: the data size is the
 * point). The row and batch rules under the limit that need no such size are in duckdb.test.ts.
 */

/** A DuckDB file in a folder removed after the test. */
const dbPath = (): string => join(dir(), 'w.duckdb');
const at = '2026-11-21T00:00:00.000Z';

describe('DuckDbDestination within its memory limit', () => {
  it('writes a batch too large for the memory limit in parts: every row lands once, nothing fails', {
    timeout: 180_000,
  }, async () => {
    const path = dbPath();
    const t = new SchemaTracker(events);
    const batch = (from: number, n: number): ReturnType<SchemaTracker['normalize']>[] =>
      Array.from({ length: n }, (_, i) =>
        t.normalize(
          {
            id: `e${from + i}`,
            timestamp: at,
            user_input: `${from + i} `.padEnd(4000, 'x'),
            properties: { i: from + i },
          },
          'p',
          at,
        ),
      );
    // 8,000 rows of ~4 KB: far more than 16MB once staged and merged.
    const db = await DuckDbDestination.open(path, { memoryLimitBytes: 16_000_000 });
    const first = batch(0, 8000);
    await db.write({ table: t.schema, rows: first });
    const second = batch(8000, 4000);
    await db.write({ table: t.schema, rows: second });
    expect(db.outOfMemorySplits).toBeGreaterThan(0);
    await db.close();
    // Checked with room to read it all back.
    const check = await DuckDbDestination.open(path, { memoryLimitBytes: 512_000_000 });
    const [summary] = await check.query(
      "SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS ids, MIN(properties::JSON->>'i')::INT AS lo FROM events",
    );
    expect(summary).toEqual({ n: 12_000n, ids: 12_000n, lo: 0 });
    expect(await check.query("SELECT id FROM events WHERE user_input NOT LIKE split_part(id, 'e', 2) || ' %'")).toEqual(
      [],
    );
    await check.close();
  });

  it('writes many times its memory limit of 200 KB rows, write after write, without raising the limit or splitting a batch', {
    timeout: 180_000,
  }, async () => {
    // 300 rows × 200 KB (60 MB) at 16MB, 5 rows a write. DuckDB keeps rows written since its last
    // checkpoint in memory (strings this large cannot spill): without a checkpoint every quarter
    // of the limit, and with DuckDB's vacuum re-merging small row groups, this failed after ~75 rows.
    const path = dbPath();
    const t = new SchemaTracker(events);
    const db = await DuckDbDestination.open(path, { memoryLimitBytes: 16_000_000 });
    const [before] = await db.query("SELECT current_setting('memory_limit') AS m");
    for (let w = 0; w < 60; w++) {
      const rows = Array.from({ length: 5 }, (_, i) =>
        t.normalize(
          { id: `big${w * 5 + i}`, timestamp: at, user_input: `${w * 5 + i} `.padEnd(200_000, 'y') },
          'p',
          at,
        ),
      );
      expect(await db.write({ table: t.schema, rows })).toEqual({ rows: 5 });
    }
    // Re-sent rows (a lookback re-read) update in place, also within the limit.
    const again = Array.from({ length: 5 }, (_, i) =>
      t.normalize({ id: `big${i}`, timestamp: at, user_input: `${i} again `.padEnd(200_000, 'w') }, 'p', at),
    );
    expect(await db.write({ table: t.schema, rows: again })).toEqual({ rows: 5 });
    expect(db.outOfMemorySplits).toBe(0);
    expect(await db.query("SELECT current_setting('memory_limit') AS m")).toEqual([before]);
    expect(await db.count('events')).toBe(300);
    await db.close();
    const check = await DuckDbDestination.open(path, { memoryLimitBytes: 512_000_000 });
    expect(
      await check.query(
        "SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS ids, COUNT(*) FILTER (WHERE user_input LIKE '% again %') AS updated FROM events",
      ),
    ).toEqual([{ n: 300n, ids: 300n, updated: 5n }]);
    expect(
      await check.query("SELECT id FROM events WHERE NOT starts_with(user_input, split_part(id, 'big', 2) || ' ')"),
    ).toEqual([]);
    await check.close();
  });

  it('never raises its memory limit: one batch of 72 MB at 16MB is written in parts within it', {
    timeout: 180_000,
  }, async () => {
    const t = new SchemaTracker(events);
    const rows = Array.from({ length: 120 }, (_, i) =>
      t.normalize({ id: `big${i}`, timestamp: at, user_input: `${i} `.padEnd(600_000, 'y') }, 'p', at),
    );
    const db = await DuckDbDestination.open(dbPath(), { memoryLimitBytes: 16_000_000 });
    const [before] = await db.query("SELECT current_setting('memory_limit') AS m");
    expect(await db.write({ table: t.schema, rows })).toEqual({ rows: 120 });
    expect(db.outOfMemorySplits).toBeGreaterThan(0);
    expect(await db.query("SELECT current_setting('memory_limit') AS m")).toEqual([before]);
    expect(await db.count('events')).toBe(120);
    await db.close();
  });
});
