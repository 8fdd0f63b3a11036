/** DuckDB's memory limit, and how a write tells it ran out of memory (see `DuckDbDestination.upsert`). */

/**
 * DuckDB's memory limit in query-sync's process. DuckDB's default, 80 % of RAM, lets its buffer
 * pool keep the whole table as it grows: a 1M-event backfill then peaked at 850 MB. Writes are one
 * batch at a time (a MERGE of a few thousand rows), for which this is ample; blocks of the table
 * are read back from the file as needed, and larger operations spill to `<file>.tmp`. 32MB keeps
 * a 1M-event backfill under 300 MB, as fast as at 64MB. A batch that does not fit is written in
 * parts, and rows too large for the limit raise it (`DuckDbDestination.upsert`): a low limit costs
 * speed, never a failed run.
 */
export const DEFAULT_MEMORY_LIMIT = '32MB';

/** A DuckDB size setting such as `32MB` or `1GB`. */
export function isDuckDbSize(text: string): boolean {
  return megabytes(text) !== undefined;
}

/** DuckDB's error when an operation needs more than its memory limit. */
export function isOutOfMemory(error: unknown): boolean {
  return /Out of Memory/i.test((error as Error)?.message ?? '');
}
/** DuckDB's error when a failure (such as a checkpoint out of memory) made it close the file to use. */
export function isInvalidated(error: unknown): boolean {
  return /has been invalidated/i.test((error as Error)?.message ?? '');
}
/** A batch that runs out of memory is split in halves down to this many rows. */
export const MIN_SPLIT_ROWS = 50;
/** How far a write may raise DuckDB's memory limit on its own (see `DuckDbDestination.upsert`). */
export const MAX_AUTO_MEMORY_MB = 1024;

/** Twice `limit`, at most `MAX_AUTO_MEMORY_MB`; undefined when it is there already or unreadable. */
export function doubledMemoryLimit(limit: string): string | undefined {
  const mb = megabytes(limit);
  if (mb === undefined || mb >= MAX_AUTO_MEMORY_MB) return undefined;
  return `${Math.min(MAX_AUTO_MEMORY_MB, Math.ceil(mb * 2))}MB`;
}

/** A DuckDB size setting in (decimal) megabytes, as DuckDB reads it: `MB` = 1000², `MiB` = 1024². */
export function megabytes(size: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*(K|M|G|T)(i?)B$/i.exec(size);
  if (m === null) return undefined;
  const base = m[3] === '' ? 1000 : 1024;
  const power = { K: 1, M: 2, G: 3, T: 4 }[(m[2] ?? 'M').toUpperCase() as 'K' | 'M' | 'G' | 'T'];
  return (Number(m[1]) * base ** power) / 1e6;
}
