import type { LogicalType, TableSchema } from './types.js';

/**
 * A table's schema from its columns written as `{ name: type }`, in creation order (object keys
 * keep their order; a column name is never an integer, which would not).
 */
export function tableSchema(
  name: string,
  key: readonly string[],
  columns: Readonly<Record<string, LogicalType>>,
  more: Omit<TableSchema, 'name' | 'key' | 'columns'> = {},
): TableSchema {
  return { name, key, columns: Object.entries(columns).map(([column, type]) => ({ name: column, type })), ...more };
}

/** The columns query-sync adds to every row it writes: when, and by which run (`_query_sync_runs`). */
export const SYNC_METADATA_COLUMNS: Readonly<Record<string, LogicalType>> = Object.freeze({
  _synced_at: 'timestamp',
  _run_id: 'string',
});

/** Metadata column: when this run wrote the row (ISO instant); the loaders partition and order on it. */
export const SYNCED_AT_COLUMN = '_synced_at';
