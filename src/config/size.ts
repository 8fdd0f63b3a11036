/**
 * Sizes as settings write them (`--duckdb-memory-limit 32MB`, `--batch-bytes 8MB`), read here once
 * for every reader: the configuration checks them (`config/values.ts` `parseSize`), DuckDB's memory
 * policy takes its shares of the limit (`load/duckdb/memory.ts`). Pure: imports nothing.
 */

/** A size in (decimal) megabytes, as DuckDB reads it: `MB` = 1000², `MiB` = 1024²; `undefined` when it is not a size. */
export function megabytes(size: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*(K|M|G|T)(i?)B$/i.exec(size);
  if (m === null) return undefined;
  const base = m[3] === '' ? 1000 : 1024;
  const power = { K: 1, M: 2, G: 3, T: 4 }[(m[2] ?? 'M').toUpperCase() as 'K' | 'M' | 'G' | 'T'];
  return (Number(m[1]) * base ** power) / 1e6;
}
