import { existsSync, renameSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

/**
 * Where a DuckDB warehouse's files live. The path users know (`--duckdb-path`, `warehouse.duckdb`)
 * is the PUBLISHED copy: a small DuckDB catalog of views over immutable Parquet files, replaced by
 * rename at each publish, so any number of readers open it at any moment. The sync writes its
 * working database beside it, a file no one else opens: DuckDB allows one writing process or many
 * readers of a file, never both, so the file readers open must not be the one the sync writes.
 *
 * ```
 * warehouse.duckdb                 the published catalog (views; swapped by rename)
 * warehouse.work.duckdb            the sync's working database (rows and `_query_sync_state`)
 * warehouse.duckdb.files/          the Parquet set (DuckLake's default data path name)
 *   manifest.json                  tables, partitions, row counts, run id, as-of
 *   events/dt=2026-11-26/data.parquet   the current file of each partition (for globs)
 *   _versions/events/dt=2026-11-26/<publish>.parquet   immutable files the catalog's views read
 * ```
 */
export interface WarehouseLayout {
  /** The published catalog readers open. */
  readonly published: string;
  /** The sync's working database. */
  readonly work: string;
  /** The Parquet set and its manifest. */
  readonly files: string;
  readonly manifest: string;
}

export function layoutOf(path: string): WarehouseLayout {
  const absolute = resolve(path);
  const name = basename(absolute);
  const stem = name.endsWith('.duckdb') ? name.slice(0, -'.duckdb'.length) : name;
  const files = `${absolute}.files`;
  return {
    published: absolute,
    work: join(dirname(absolute), `${stem}.work.duckdb`),
    files,
    manifest: join(files, 'manifest.json'),
  };
}

/** A published catalog is recognised by its manifest beside it; any other file at the path is an old-layout warehouse. */
export function isOldLayout(layout: WarehouseLayout): boolean {
  return !existsSync(layout.work) && existsSync(layout.published) && !existsSync(layout.manifest);
}

/**
 * The database a command that reads the sync's data and state opens: the working file, or, before
 * the first run of this version took an old-layout warehouse over, the old file itself.
 */
export function workingPathForReading(path: string): string {
  if (path === ':memory:') return path;
  const layout = layoutOf(path);
  return isOldLayout(layout) ? layout.published : layout.work;
}

/**
 * The working file for a run that writes. An old-layout warehouse (the file users know holds the
 * rows and state) is taken over first: it and its WAL are renamed to the working path, and the
 * first publish puts a catalog where it was. Returns the line to log when it did.
 */
export function takeOverOldLayout(path: string): { readonly work: string; readonly note?: string } {
  if (path === ':memory:') return { work: path };
  const layout = layoutOf(path);
  if (!isOldLayout(layout)) return { work: layout.work };
  renameSync(layout.published, layout.work);
  if (existsSync(`${layout.published}.wal`)) renameSync(`${layout.published}.wal`, `${layout.work}.wal`);
  return {
    work: layout.work,
    note:
      `took over the warehouse ${layout.published} (written by an earlier version): the sync now writes ${layout.work}, ` +
      `and ${layout.published} becomes the published read copy (views over ${layout.files}), replaced at the end of each run and every --publish-every`,
  };
}
