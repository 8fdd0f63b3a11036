import type { DuckDBConnection } from '@duckdb/node-api';
import { DELETED_AT_COLUMN } from '../../core/deletions.js';
import type { ColumnDef } from '../../core/types.js';
import type { DeletionChange, WindowCount, WindowKeys } from '../destination.js';
import { ident, sqlString } from './sql.js';

/**
 * DuckDB's side of reconcile's id comparison and deletion mark (`core/deletions.ts`): the keys of a
 * window, and one window's deletions applied to the parent and the tables that follow it (spans,
 * bridge rows) in one transaction. The destination runs these inside its serial queue.
 */

const PROJECT_ID = 'project_id';
const DELETED = ident(DELETED_AT_COLUMN);

/** `describe` as the destination answers it (its cache), for the tables and columns a statement names. */
type Describe = (table: string) => Promise<readonly ColumnDef[] | undefined>;

const has = (columns: readonly ColumnDef[] | undefined, name: string): boolean =>
  columns?.some((c) => c.name === name) === true;

/** The rows `countWindow` and `keysInWindow` see: one project, the window, and (when the table has the mark) not deleted. */
export function windowWhere(window: WindowCount): string {
  const c = ident(window.column);
  return `${ident(PROJECT_ID)} = $1 AND ${c} >= CAST($2 AS TIMESTAMPTZ) AND ${c} < CAST($3 AS TIMESTAMPTZ)`;
}

export function notDeleted(columns: readonly ColumnDef[] | undefined): string {
  return has(columns, DELETED_AT_COLUMN) ? ` AND ${DELETED} IS NULL` : '';
}

export async function keysInWindow(
  connection: DuckDBConnection,
  describe: Describe,
  table: string,
  window: WindowCount & { readonly key: string },
): Promise<WindowKeys> {
  const columns = await describe(table);
  if (columns === undefined) return { live: [], marked: [] };
  const marked = has(columns, DELETED_AT_COLUMN) ? `${DELETED} IS NOT NULL` : 'false';
  const reader = await connection.runAndReadAll(
    `SELECT CAST(${ident(window.key)} AS VARCHAR), ${marked} FROM main.${ident(table)} WHERE ${windowWhere(window)}`,
    [window.projectId, window.fromIso, window.toIso],
  );
  const out = { live: [] as string[], marked: [] as string[] };
  for (const [id, isMarked] of reader.getRows()) (isMarked === true ? out.marked : out.live).push(String(id));
  return out;
}

/**
 * Apply `change` to its parent table and every follower that has the parent-key column, in one
 * transaction (readers never see an event marked while its spans are not). `mark` adds the column
 * where missing (DuckDB's DDL is transactional too) and sets it only where unset, so the first
 * instant stays; `unmark` clears it. Marked and unmarked rows take this run's `_synced_at` and
 * `_run_id`: the run wrote them, and a publish finds them by it. Returns the rows changed per table.
 */
export async function applyDeletions(
  connection: DuckDBConnection,
  describe: Describe,
  change: DeletionChange,
): Promise<Record<string, number>> {
  const targets: { table: string; column: string; columns: readonly ColumnDef[] }[] = [];
  for (const t of [{ table: change.parent.table, column: change.parent.key }, ...change.followers]) {
    const columns = await describe(t.table);
    if (columns !== undefined && has(columns, t.column) && has(columns, PROJECT_ID)) targets.push({ ...t, columns });
  }
  const rows: Record<string, number> = {};
  if (change.ids.length === 0 || targets.length === 0) return rows;
  // Inline literals: a window holds at most a few thousand ids, and one statement per table stays simple.
  const ids = change.ids.map(sqlString).join(', ');
  await connection.run('BEGIN TRANSACTION');
  try {
    for (const t of targets) {
      const table = `main.${ident(t.table)}`;
      const where = `${ident(PROJECT_ID)} = ${sqlString(change.projectId)} AND CAST(${ident(t.column)} AS VARCHAR) IN (${ids})`;
      const meta = [
        has(t.columns, '_synced_at') ? `${ident('_synced_at')} = CAST(${sqlString(change.atIso)} AS TIMESTAMPTZ)` : '',
        has(t.columns, '_run_id') ? `${ident('_run_id')} = ${sqlString(change.runId)}` : '',
      ].filter((x) => x !== '');
      let sql: string;
      if (change.action === 'delete') sql = `DELETE FROM ${table} WHERE ${where}`;
      else if (change.action === 'mark') {
        if (!has(t.columns, DELETED_AT_COLUMN))
          await connection.run(`ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS ${DELETED} TIMESTAMPTZ`);
        const set = [`${DELETED} = CAST(${sqlString(change.atIso)} AS TIMESTAMPTZ)`, ...meta];
        sql = `UPDATE ${table} SET ${set.join(', ')} WHERE ${where} AND ${DELETED} IS NULL`;
      } else {
        if (!has(t.columns, DELETED_AT_COLUMN)) continue;
        sql = `UPDATE ${table} SET ${[`${DELETED} = NULL`, ...meta].join(', ')} WHERE ${where} AND ${DELETED} IS NOT NULL`;
      }
      rows[t.table] = Number((await connection.run(sql)).rowsChanged);
    }
    await connection.run('COMMIT');
  } catch (error) {
    await connection.run('ROLLBACK').catch(() => undefined);
    throw error;
  }
  return rows;
}
