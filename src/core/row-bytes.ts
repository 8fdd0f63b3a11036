import type { Row } from './types.js';

/**
 * A row's text, roughly: strings by length, other cells as 8 bytes. Cheap; what `--batch-bytes`
 * caps while a walk buffers rows (`sync/walk.ts`) and what DuckDB's memory policy counts as
 * written since its last checkpoint (`load/duckdb/destination.ts`).
 */
export function rowBytes(row: Row): number {
  let n = 0;
  // `for … in`, not `Object.values`: no array per row (every row is measured once or twice).
  for (const column in row) {
    const value = row[column];
    n += typeof value === 'string' ? value.length : 8;
  }
  return n;
}
