/**
 * Sizes as settings write them (`--duckdb-memory-limit 32MB`, `--batch-bytes 8MB`), read here once
 * into bytes for every reader: the configuration checks them (`config/values.ts` `parseSize`) and
 * hands on bytes; DuckDB's memory policy takes its shares of the limit in bytes
 * (`load/duckdb/memory.ts`); where DuckDB wants a size as text (its `memory_limit`), `sizeText`
 * writes it there. Pure: imports nothing.
 */

const UNITS = { K: 1, M: 2, G: 3, T: 4 } as const;

/**
 * A size in bytes, as DuckDB reads its text: `MB` = 1000², `MiB` = 1024² (rounded to a whole byte);
 * `undefined` when it is not a size.
 */
export function bytesOf(size: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*(K|M|G|T)(i?)B$/i.exec(size);
  if (m === null) return undefined;
  const base = m[3] === '' ? 1000 : 1024;
  const power = UNITS[(m[2] ?? 'M').toUpperCase() as keyof typeof UNITS];
  return Math.round(Number(m[1]) * base ** power);
}

/**
 * Bytes as DuckDB reads a size (`32MB`, `512MiB`, `1500B`): the largest unit that holds them
 * whole, so a size written `32MB` reads back `32MB` in DuckDB's settings and in messages.
 */
export function sizeText(bytes: number): string {
  for (const power of [4, 3, 2, 1] as const) {
    const unit = 'KMGT'[power - 1] ?? '';
    if (bytes >= 1000 ** power && bytes % 1000 ** power === 0) return `${bytes / 1000 ** power}${unit}B`;
    if (bytes >= 1024 ** power && bytes % 1024 ** power === 0) return `${bytes / 1024 ** power}${unit}iB`;
  }
  return `${bytes}B`;
}
