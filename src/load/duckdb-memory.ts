/** DuckDB's memory limit, and how a write tells it ran out of memory (see `DuckDbDestination.upsert`). */

/**
 * DuckDB's memory limit in query-sync's process. DuckDB's default, 80 % of RAM, lets its buffer
 * pool keep the whole table as it grows: a 1M-event backfill then peaked at 850 MB. Writes are one
 * batch at a time (a MERGE of a few thousand rows), for which this is ample; blocks of the table
 * are read back from the file as needed, and larger operations spill to `<file>.tmp`. 32MB keeps
 * a 1M-event backfill under 300 MB, as fast as at 64MB. A batch that does not fit is written in
 * parts, down to single rows (`DuckDbDestination.upsert`). The limit is never raised: memory
 * follows the settings, not the data; a row that does not fit alone fails naming the setting.
 */
export const DEFAULT_MEMORY_LIMIT = '32MB';

/** A DuckDB size setting such as `32MB` or `1GB`. */
export function isDuckDbSize(text: string): boolean {
  return megabytes(text) !== undefined;
}

/**
 * Text written since the last checkpoint that triggers one before the next write: this fraction of
 * the memory limit (8 MB at 32MB). DuckDB holds rows written since its last checkpoint in memory,
 * and strings over a few KB (kept in their own blocks) cannot spill: 200 KB rows filled 32MB after
 * about 150 rows. Checkpointing before a write once the rows since the last one, plus this batch,
 * would pass this share keeps that bounded by the setting, whatever the row size. With vacuum off
 * (`open`), each checkpoint writes only the row group of the rows since the previous one.
 */
export const CHECKPOINT_SHARE = 0.25;

/** Text bytes (strings by length, other cells 8) after which a checkpoint is due; undefined: never (no limit). */
export function checkpointBytes(memoryLimit: string): number | undefined {
  const mb = megabytes(memoryLimit);
  return mb === undefined ? undefined : mb * 1e6 * CHECKPOINT_SHARE;
}

/**
 * Memory DuckDB still holds for rows it *updated* after a checkpoint has written them out, above
 * which the file is reattached to release it: this fraction of the memory limit (2 MB at 32MB).
 * DuckDB 1.5 keeps an updated row's new values (tagged ALLOCATOR, never spilled) after the
 * checkpoint, until the table is loaded again (duckdb/duckdb#25162, a regression from 1.4): a
 * re-read of 15,000 events into existing rows ran 32MB out after ~10,400 of them. Writing new rows
 * leaves none of this behind (but see `PINNED_SHARE`).
 */
export const RELEASE_SHARE = 1 / 16;

/** ALLOCATOR bytes held after a checkpoint above which the file is reattached; undefined: never (no limit). */
export function releaseBytes(memoryLimit: string): number | undefined {
  const mb = megabytes(memoryLimit);
  return mb === undefined ? undefined : mb * 1e6 * RELEASE_SHARE;
}

/**
 * Memory of the warehouse file's table blocks (tagged BASE_TABLE) after a checkpoint above which the
 * file is reattached: this fraction of the memory limit (4 MB at 32MB). Measured with DuckDB 1.5.5
 * at 32MB: each row group a checkpoint writes keeps a 256 KB block that DuckDB does not evict
 * (lowering the limit could not free it; only detaching the file did), and with vacuum off every
 * checkpoint starts a new row group in each table written since the last one. So that memory grew
 * with the number of checkpoints: a 1M-event backfill failed after ~280,000 events with 19 MB of
 * it ("could not allocate block of size 256.0 KiB (30.7 MiB/30.5 MiB used)"), and a two-year
 * backfill of small windows sooner. The tag also counts blocks DuckDB cached and could evict
 * (the MERGE's scan of the key columns), so past this share the file is reattached after nearly
 * every checkpoint of a large table: one DETACH/ATTACH per ~8 MB written, a few ms each.
 */
export const PINNED_SHARE = 1 / 8;

/** BASE_TABLE bytes held after a checkpoint above which the file is reattached; undefined: never (no limit). */
export function pinnedBytes(memoryLimit: string): number | undefined {
  const mb = megabytes(memoryLimit);
  return mb === undefined ? undefined : mb * 1e6 * PINNED_SHARE;
}

/** DuckDB's error when an operation needs more than its memory limit. */
export function isOutOfMemory(error: unknown): boolean {
  // The Appender says it differently ("Failed to append: could not allocate block of size …").
  return /Out of Memory|could not allocate block|failed to pin block/i.test((error as Error)?.message ?? '');
}
/** DuckDB's error when a failure (such as a checkpoint out of memory) made it close the file to use. */
export function isInvalidated(error: unknown): boolean {
  return /has been invalidated/i.test((error as Error)?.message ?? '');
}
/** Times one write reopens a file DuckDB invalidated (see `DuckDbDestination.recoverInvalidated`). */
export const MAX_REATTACH_PER_WRITE = 2;

/** A DuckDB size setting in (decimal) megabytes, as DuckDB reads it: `MB` = 1000², `MiB` = 1024². */
export function megabytes(size: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*(K|M|G|T)(i?)B$/i.exec(size);
  if (m === null) return undefined;
  const base = m[3] === '' ? 1000 : 1024;
  const power = { K: 1, M: 2, G: 3, T: 4 }[(m[2] ?? 'M').toUpperCase() as 'K' | 'M' | 'G' | 'T'];
  return (Number(m[1]) * base ** power) / 1e6;
}
