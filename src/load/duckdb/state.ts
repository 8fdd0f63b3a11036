import type { DuckDBConnection } from '@duckdb/node-api';
import { STATE_TABLE, type StateRow } from '../../core/state-table.js';
import type { LogicalType } from '../../core/types.js';
import { ident, sqlString } from './sql.js';

/**
 * query-sync's state in the DuckDB file: the `_query_sync_state` table (see `core/state-table.ts`),
 * read whole, its keys replaced inside the transaction of the batch they describe (or their own).
 */

/** State rows per INSERT statement (a state change touches a handful of keys). */
const STATE_ROWS_PER_INSERT = 100;

/** The state table's columns, as the destination's table cache records them. */
export const STATE_COLUMNS: ReadonlyMap<string, LogicalType> = new Map<string, LogicalType>([
  ['key', 'string'],
  ['value', 'string'],
  ['updated_at', 'timestamp'],
]);

/** Every row of the state table, by key (the caller knows the table exists). */
export async function readStateRows(connection: DuckDBConnection): Promise<readonly StateRow[]> {
  const reader = await connection.runAndReadAll(`SELECT key, value FROM main.${ident(STATE_TABLE)} ORDER BY key`);
  return reader.getRows().map(([key, value]) => ({ key: String(key), value: value === null ? null : String(value) }));
}

/** Create the state table when missing. */
export async function createStateTable(connection: DuckDBConnection): Promise<void> {
  // No primary key: DuckDB checks unique keys eagerly, and a key deleted then inserted in one
  // transaction can be refused. The writer keeps keys unique (delete, then insert, per key).
  await connection.run(
    `CREATE TABLE IF NOT EXISTS main.${ident(STATE_TABLE)} (key VARCHAR, value VARCHAR, updated_at TIMESTAMPTZ)`,
  );
}

/** Replace the given keys' rows (in the caller's transaction). */
export async function writeStateRows(connection: DuckDBConnection, rows: readonly StateRow[]): Promise<void> {
  const literal = stateRowsSql(rows);
  if (literal !== undefined) {
    if (literal.length > 0) await connection.run(literal.join(';\n'));
    return;
  }
  const table = `main.${ident(STATE_TABLE)}`;
  const keys = rows.map((r) => sqlString(r.key)).join(', ');
  await connection.run(`DELETE FROM ${table} WHERE key IN (${keys})`);
  const kept = rows.filter((r) => r.value !== null);
  for (let i = 0; i < kept.length; i += STATE_ROWS_PER_INSERT) {
    const chunk = kept.slice(i, i + STATE_ROWS_PER_INSERT);
    const values = chunk.map((_, j) => `($${2 * j + 1}, $${2 * j + 2}, now())`).join(', ');
    await connection.run(
      `INSERT INTO ${table} VALUES ${values}`,
      chunk.flatMap((r) => [r.key, r.value as string]),
    );
  }
}

/**
 * `writeStateRows` as statements with their values written in, so the caller can send them with
 * others in one call (each call is a round trip through the binding's thread pool); `undefined`
 * when a value holds a NUL character (then they go as parameters).
 */
export function stateRowsSql(rows: readonly StateRow[]): string[] | undefined {
  if (rows.length === 0) return [];
  if (rows.some((r) => r.key.includes('\u0000') || (r.value ?? '').includes('\u0000'))) return undefined;
  const table = `main.${ident(STATE_TABLE)}`;
  const statements = [`DELETE FROM ${table} WHERE key IN (${rows.map((r) => sqlString(r.key)).join(', ')})`];
  const kept = rows.filter((r) => r.value !== null);
  if (kept.length > 0)
    statements.push(
      `INSERT INTO ${table} VALUES ${kept.map((r) => `(${sqlString(r.key)}, ${sqlString(r.value as string)}, now())`).join(', ')}`,
    );
  return statements;
}

/** State rows' text (keys and values), as `textBytes` counts a batch's. */
export function stateBytes(rows: readonly StateRow[] | undefined): number {
  let n = 0;
  for (const row of rows ?? []) n += row.key.length + (row.value?.length ?? 0) + 8;
  return n;
}
