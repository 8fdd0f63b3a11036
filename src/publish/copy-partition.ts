import type { DuckDBConnection } from '@duckdb/node-api';
import { isOutOfMemory } from '../load/duckdb/memory.js';
import { sqlString } from '../load/duckdb/sql.js';

/**
 * Writing one partition of a working table to a Parquet file within DuckDB's memory limit.
 *
 * What needs memory (measured at the sync's 32MB default with 300 events of 200 KB): the Parquet
 * writer's row group is bounded by `ROW_GROUP_SIZE_BYTES` (with one thread and rows in any order,
 * `withPublishSettings`), but the table scan is not. A scan reads a vector of up to 2,048 rows of
 * the row group at a time, and for rows this process wrote (their strings still in blocks it
 * holds), each scanned row's string block stays pinned until the vector is done, whatever the
 * WHERE keeps: a day of 10 rows failed inside a row group of 300 × 200 KB (60 MB). Closing and
 * reopening the file frees that, which is why `query-sync publish` in a fresh process succeeded
 * where the sync's own publish failed.
 *
 * The bound: a `rowid` range is pushed into the scan itself, so a scan limited to `n` rowids pins
 * at most `n` rows. When the whole-partition COPY runs out of memory, the partition is written as
 * one COPY over a UNION ALL of rowid slices (each branch a pipeline of its own, run one after the
 * other), 64 rows each, then fewer: one file per partition still, every row once. Last, a page of
 * very large strings is written uncompressed (zstd wants a buffer of its own for it).
 */

/** Rowid slices tried in turn after the whole-partition COPY ran out of memory; 1 row fits whenever the row itself does. */
const ATTEMPTS: readonly { readonly per: number; readonly compression: 'zstd' | 'uncompressed' }[] = [
  { per: 64, compression: 'zstd' },
  { per: 8, compression: 'zstd' },
  { per: 1, compression: 'zstd' },
  { per: 1, compression: 'uncompressed' },
];

/** Parquet row groups: at most this many rows and bytes (see `withPublishSettings` in `snapshot.ts`). */
const PARQUET_ROW_GROUP_ROWS = 8_192;
const PARQUET_ROW_GROUP_BYTES = '2MB';

export interface PartitionCopy {
  /** `main."events"` */
  readonly table: string;
  /** SQL condition selecting the partition's rows (`partitions.ts`). */
  readonly filter: string;
  /** The Parquet file to write (absolute). */
  readonly path: string;
}

/** Rows written, and how many rowid slices it took (0: one COPY of the partition). */
export interface CopyResult {
  readonly rows: number;
  readonly slices: number;
}

export async function copyPartition(connection: DuckDBConnection, copy: PartitionCopy): Promise<CopyResult> {
  try {
    return {
      rows: await copyFrom(connection, `SELECT * FROM ${copy.table} WHERE ${copy.filter}`, copy.path),
      slices: 0,
    };
  } catch (error) {
    if (!isOutOfMemory(error)) throw error;
    let last: unknown = error;
    for (const { per, compression } of ATTEMPTS) {
      const ranges = await rowidRanges(connection, copy, per);
      if (ranges.length === 0) throw error;
      const union = ranges
        .map(
          ([from, to]) => `SELECT * FROM ${copy.table} WHERE rowid >= ${from} AND rowid < ${to} AND (${copy.filter})`,
        )
        .join('\nUNION ALL\n');
      try {
        return { rows: await copyFrom(connection, union, copy.path, compression), slices: ranges.length };
      } catch (sliced) {
        if (!isOutOfMemory(sliced)) throw sliced;
        last = sliced;
      }
    }
    throw last;
  }
}

async function copyFrom(
  connection: DuckDBConnection,
  query: string,
  path: string,
  compression: 'zstd' | 'uncompressed' = 'zstd',
): Promise<number> {
  const reader = await connection.runAndReadAll(
    `COPY (${query}) TO ${sqlString(path)} (FORMAT parquet, COMPRESSION ${compression}, ROW_GROUP_SIZE ${PARQUET_ROW_GROUP_ROWS}, ROW_GROUP_SIZE_BYTES '${PARQUET_ROW_GROUP_BYTES}')`,
  );
  return Number(reader.getRows()[0]?.[0] ?? 0);
}

/**
 * The rowid ranges `[from, to)` of `per` rowids that hold rows of the partition: only the
 * partition's own slices are scanned (reading rowid and the day column pins no strings), so a day
 * scattered through a large table costs its own rows, not the table's. Adjacent slices stay
 * separate UNION branches: a merged range would scan more than `per` rows at once.
 */
async function rowidRanges(
  connection: DuckDBConnection,
  copy: PartitionCopy,
  per: number,
): Promise<[bigint, bigint][]> {
  const reader = await connection.runAndReadAll(
    `SELECT DISTINCT rowid // ${per} AS s FROM ${copy.table} WHERE ${copy.filter} ORDER BY s`,
  );
  const ranges: [bigint, bigint][] = [];
  const step = BigInt(per);
  for (const [s] of reader.getRows()) {
    const from = BigInt(s as bigint) * step;
    ranges.push([from, from + step]);
  }
  return ranges;
}
