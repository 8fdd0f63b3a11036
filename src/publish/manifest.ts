import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';

/**
 * `manifest.json` of the Parquet set: what the last publish made, for readers without DuckDB's
 * catalog (pandas, polars, Spark, BigQuery external tables) and for the next publish, which
 * rewrites only what changed since. Paths are relative to the folder holding the manifest.
 */
export interface Manifest {
  readonly format: 'query-sync-publish/1';
  /** Sequence number of the publish (1, 2, …). */
  readonly publish: number;
  /** The run whose rows were written last when the snapshot was taken. */
  readonly runId: string | null;
  /** When the snapshot was taken: the published copy holds every row committed before it. */
  readonly asOf: string;
  /** Greatest `_synced_at` in the snapshot: rows of later runs have a greater one. */
  readonly syncedThrough: string | null;
  /**
   * The snapshot was taken after the writing process's last write (the end of a run). If not (a
   * publish during a run that was then killed), rows with `_synced_at` equal to `syncedThrough`
   * may have been written after it, so the next process rereads them too.
   */
  readonly final: boolean;
  readonly tables: Readonly<Record<string, ManifestTable>>;
  /** Views of the warehouse (name → SQL), recreated in the catalog. */
  readonly views: Readonly<Record<string, string>>;
  /** Files no longer current, kept a while for readers holding an older catalog (see `KEEP_SUPERSEDED_MS`). */
  readonly superseded: readonly { readonly file: string; readonly at: string }[];
}

export interface ManifestTable {
  readonly columns: readonly { readonly name: string; readonly type: string }[];
  /** The day column (`dt=` partitions), or null for one file. */
  readonly partitionedBy: string | null;
  readonly rows: number;
  readonly partitions: Readonly<Record<string, ManifestPartition>>;
  /**
   * A table without `_synced_at` (the run history, the schema changes): its row count and the sum
   * of its rows' hashes when published, so the next publish rewrites it only when it changed.
   */
  readonly fingerprint?: string;
}

export interface ManifestPartition {
  readonly rows: number;
  /** The current file of the partition (for globs), e.g. `events/dt=2026-11-26/data.parquet`. */
  readonly file: string;
  /** The immutable file the catalog's view reads (same bytes, hard-linked), e.g. `_versions/events/dt=2026-11-26/7-ab12.parquet`. */
  readonly version: string;
}

export function readManifest(path: string): Manifest | undefined {
  if (!existsSync(path)) return undefined;
  const parsed = JSON.parse(readFileSync(path, 'utf8')) as Manifest;
  return parsed.format === 'query-sync-publish/1' ? parsed : undefined;
}

/** Replace the manifest by rename: a reader sees the old one or the new one. */
export function writeManifest(path: string, manifest: Manifest): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(manifest, null, 2)}\n`);
  renameSync(tmp, path);
}
