import type { DuckDBConnection } from '@duckdb/node-api';
import { ROW_GROUP_SIZE } from './connection.js';
import { ident, sqlString } from './sql.js';

/**
 * A run that writes little must not leave the file larger than what it wrote. With DuckDB's vacuum
 * off (`connection.ts`: it merged row groups in memory that cannot spill), every checkpoint
 * that writes a table starts a new row group in it, and a row group takes a block (256 KB) of its
 * own whatever it holds: a sync with nothing new wrote one run-history row, and the file grew by a
 * block a run (280 KB, 10 GB a year on a 15-minute schedule). Before the run's last checkpoint, the
 * tables it wrote have their trailing row groups (those not full) rewritten as one, where that is
 * cheaper than the blocks it frees: the vacuum DuckDB would do, bounded in memory by our own rule.
 */

/** DuckDB's block size: what a row group costs the file at least. */
const BLOCK_BYTES = 262_144;

/** The trailing row groups of `table` that are not full: how many, their first row id, their rows. */
async function tailOf(
  connection: DuckDBConnection,
  table: string,
): Promise<{ readonly groups: number; readonly start: number; readonly rows: number; readonly total: number }> {
  const reader = await connection.runAndReadAll(
    `SELECT row_group_id, MIN(start)::BIGINT, MAX(count)::BIGINT FROM pragma_storage_info(${sqlString(`main.${ident(table)}`)})
      WHERE column_id = 0 GROUP BY row_group_id ORDER BY row_group_id`,
  );
  const groups = reader.getRows().map(([, start, count]) => ({ start: Number(start), count: Number(count) }));
  let first = groups.length;
  while (first > 0 && (groups[first - 1]?.count ?? 0) < ROW_GROUP_SIZE) first -= 1;
  const tail = groups.slice(first);
  return {
    groups: tail.length,
    start: tail[0]?.start ?? 0,
    rows: tail.reduce((n, g) => n + g.count, 0),
    total: groups.reduce((n, g) => n + g.count, 0),
  };
}

/**
 * Rewrite the trailing row groups of `table` as one row group (in one transaction: the same rows,
 * deleted and appended again; a row group whose rows are all deleted is dropped at the next checkpoint),
 * when there are two or more and their rows, at the table's average size, are no more than the
 * blocks they hold and no more than `maxBytes` (they are held in memory until the checkpoint).
 * Returns whether it did. Any failure is rolled back and left for the next run.
 */
export async function compactTail(connection: DuckDBConnection, table: string, maxBytes: number): Promise<boolean> {
  const tail = await tailOf(connection, table);
  if (tail.groups < 2 || tail.rows === 0) return false;
  const size = await connection.runAndReadAll(
    `SELECT estimated_size FROM duckdb_tables() WHERE database_name = current_database() AND schema_name = 'main' AND table_name = $1`,
    [table],
  );
  const tableBytes = Number(size.getRows()[0]?.[0] ?? 0);
  const tailBytes = tail.total === 0 ? 0 : (tableBytes * tail.rows) / tail.total;
  if (tailBytes > Math.min(maxBytes, tail.groups * BLOCK_BYTES)) return false;
  const name = `main.${ident(table)}`;
  const held = ident(`_compact_${table}`);
  await connection.run('BEGIN TRANSACTION');
  try {
    await connection.run(`CREATE OR REPLACE TEMP TABLE ${held} AS SELECT * FROM ${name} WHERE rowid >= ${tail.start}`);
    await connection.run(`DELETE FROM ${name} WHERE rowid >= ${tail.start}`);
    await connection.run(`INSERT INTO ${name} SELECT * FROM temp.main.${held}`);
    await connection.run(`DROP TABLE temp.main.${held}`);
    await connection.run('COMMIT');
    return true;
  } catch {
    await connection.run('ROLLBACK').catch(() => undefined);
    return false;
  }
}
