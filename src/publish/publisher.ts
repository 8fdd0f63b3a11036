import { copyFileSync, existsSync, linkSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { DuckDBInstance } from '../load/duckdb/instance.js';
import { LoadError } from '../core/errors.js';
import type { Clock } from '../core/types.js';
import type { PublishesCopy } from '../load/destination-capabilities.js';
import { ident, sqlString } from '../load/duckdb/sql.js';
import { isOldLayout, layoutOf, type WarehouseLayout } from './layout.js';
import { readManifest, writeManifest, type Manifest, type ManifestTable } from './manifest.js';
import { takeSnapshot, type DirtyMarks } from './snapshot.js';
import type { DayCut } from './partitions.js';

/**
 * Publishes the working database as the read copy users open (see `layout.ts`): immutable Parquet
 * files for the partitions that changed (written between two writes, `snapshot.ts`), then a new
 * small catalog of views over them, renamed over the published file. A reader sees the old catalog
 * or the new one, never half of one; a reader holding the old one open keeps reading its files
 * (kept `KEEP_SUPERSEDED_MS` after they stop being current). Nothing here touches the working
 * database's rows or state, so a publish that fails (a folder not writable, a full disk) leaves
 * the sync and the previous published copy as they were.
 */

/** How long a file stays after a publish made it no longer current: readers holding an older catalog read it meanwhile. */
const KEEP_SUPERSEDED_MS = 60 * 60_000;

/** The catalog's table saying what the copy holds. */
export const PUBLISHED_TABLE = '_query_sync_published';

export interface PublishResult {
  readonly publish: number;
  readonly asOf: string;
  readonly tables: number;
  /** Partitions whose file was rewritten. */
  readonly rewritten: number;
  /** Time the writer waited (the snapshot), and the whole publish. */
  readonly heldMs: number;
  readonly totalMs: number;
}

export interface PublisherOptions {
  /** The tables cut by day (`partitionedTables` of the resources); the others are one file each. */
  readonly partitioned: Readonly<Record<string, DayCut>>;
  readonly hooks?: PublisherHooks;
}

/** Points of a publish a caller may act at (tests); none by default. */
export interface PublisherHooks {
  /** After the new catalog is renamed in, before the manifest and the current files are replaced. */
  readonly afterCatalog?: (files: string) => Promise<void>;
}

export class Publisher {
  readonly layout: WarehouseLayout;
  private marks = new Map<string, Set<string> | 'all'>();
  private published = 0;
  /** The publish in progress: publishes run one at a time. */
  private running: Promise<unknown> = Promise.resolve();

  constructor(
    path: string,
    private readonly db: PublishesCopy,
    private readonly clock: Clock,
    private readonly options: PublisherOptions,
  ) {
    this.layout = layoutOf(path);
  }

  /** The tables cut by day, as this publisher cuts them. */
  get partitioned(): Readonly<Record<string, DayCut>> {
    return this.options.partitioned;
  }

  /** Rows were written to these partitions of `table` (`undefined`: cannot tell, rewrite it whole). */
  mark(table: string, partitions: Iterable<string> | undefined): void {
    const current = this.marks.get(table);
    if (current === 'all') return;
    if (partitions === undefined) {
      this.marks.set(table, 'all');
      return;
    }
    const set = current ?? new Set<string>();
    for (const p of partitions) set.add(p);
    this.marks.set(table, set);
  }

  /** Publish what is committed now. `final`: the writer has written its last row (the run's end). */
  publish(final: boolean): Promise<PublishResult> {
    const next = this.running.then(() => this.publishNow(final));
    this.running = next.catch(() => undefined);
    return next;
  }

  private async publishNow(final: boolean): Promise<PublishResult> {
    const started = this.clock.now();
    const { files, manifest: manifestPath, published } = this.layout;
    // Never rename a catalog over a warehouse that still holds the rows (a file not yet taken over by a sync).
    if (isOldLayout(this.layout)) {
      throw new LoadError(
        `${published} is a warehouse written by an earlier version (no ${this.layout.work} beside it): run \`query-sync sync\` once to take it over, then publish`,
        false,
      );
    }
    let previous: Manifest | undefined;
    try {
      mkdirSync(files, { recursive: true });
      previous = readManifest(manifestPath);
    } catch (error) {
      throw publishError(published, files, error);
    }
    const publish = (previous?.publish ?? 0) + 1;
    let heldMs = 0;
    const snap = await this.db
      .exclusive(async (connection) => {
        const held = this.clock.now();
        // Marks from now on belong to the next publish; these are covered by this snapshot.
        const marks: DirtyMarks = this.marks;
        this.marks = new Map();
        try {
          return await takeSnapshot(connection, {
            files,
            previous,
            marks,
            firstOfProcess: this.published === 0,
            publish,
            partitioned: this.options.partitioned,
          });
        } catch (error) {
          for (const [t, m] of marks) this.mark(t, m === 'all' ? undefined : m);
          throw error;
        } finally {
          heldMs = this.clock.now() - held;
        }
      })
      .catch((error: unknown) => Promise.reject(publishError(published, files, error)));
    const asOf = new Date(this.clock.now()).toISOString();
    const nowIso = asOf;
    const stillCurrent = new Set(
      Object.values(snap.tables).flatMap((t) => Object.values(t.partitions).map((p) => p.version)),
    );
    const superseded = [
      ...(previous?.superseded ?? []),
      ...snap.replaced.filter((f) => !stillCurrent.has(f)).map((file) => ({ file, at: nowIso })),
    ];
    const manifest: Manifest = {
      format: 'query-sync-publish/1',
      publish,
      runId: snap.runId,
      asOf,
      syncedThrough: snap.syncedThrough,
      final,
      tables: snap.tables,
      views: snap.views,
      superseded: superseded.filter((s) => this.clock.now() - Date.parse(s.at) < KEEP_SUPERSEDED_MS),
    };
    let swapped = false;
    try {
      await writeCatalog(published, files, manifest);
      swapped = true;
      await this.options.hooks?.afterCatalog?.(files);
      for (const table of Object.values(snap.tables)) {
        for (const p of Object.values(table.partitions)) {
          if (!snap.written.includes(p.version)) continue;
          // The current file for globs: the same bytes, hard-linked, swapped in by rename.
          const visible = join(files, p.file);
          mkdirSync(dirname(visible), { recursive: true });
          rmSync(`${visible}.tmp`, { force: true });
          linkOrCopy(join(files, p.version), `${visible}.tmp`);
          renameSync(`${visible}.tmp`, visible);
        }
      }
      removeGone(files, previous, manifest);
      writeManifest(manifestPath, manifest);
    } catch (error) {
      // The old catalog (if the rename did not happen) still reads the old files, which stay.
      if (!swapped) for (const file of snap.written) rmSync(join(files, file), { force: true });
      throw publishError(published, files, error);
    }
    for (const s of superseded) if (!manifest.superseded.includes(s)) rmSync(join(files, s.file), { force: true });
    removeOrphans(files, manifest);
    this.published += 1;
    return {
      publish,
      asOf,
      tables: Object.keys(snap.tables).length,
      rewritten: snap.rewritten,
      heldMs,
      totalMs: this.clock.now() - started,
    };
  }
}

/**
 * Write the catalog beside the published file and rename it over: views reading the current
 * version files (absolute paths: DuckDB resolves a relative path from the reader's working folder),
 * the warehouse's own views, and `_query_sync_published`.
 */
async function writeCatalog(published: string, files: string, manifest: Manifest): Promise<void> {
  const tmp = `${published}.publish-${manifest.publish}.tmp`;
  rmSync(tmp, { force: true });
  rmSync(`${tmp}.wal`, { force: true });
  const instance = await DuckDBInstance.create(tmp);
  try {
    const connection = await instance.connect();
    try {
      await connection.run("SET TimeZone = 'UTC'");
      for (const [name, table] of Object.entries(manifest.tables))
        await connection.run(`CREATE VIEW main.${ident(name)} AS ${tableQuery(files, table)}`);
      for (const sql of Object.values(manifest.views)) await connection.run(sql);
      await connection.run(
        `CREATE TABLE main.${PUBLISHED_TABLE} (publish BIGINT, as_of TIMESTAMPTZ, run_id VARCHAR, synced_through TIMESTAMPTZ, manifest VARCHAR)`,
      );
      await connection.run(
        `INSERT INTO main.${PUBLISHED_TABLE} VALUES ($1, CAST($2 AS TIMESTAMPTZ), $3, CAST($4 AS TIMESTAMPTZ), $5)`,
        [manifest.publish, manifest.asOf, manifest.runId, manifest.syncedThrough, join(files, 'manifest.json')],
      );
      await connection.run('CHECKPOINT');
    } finally {
      connection.closeSync();
    }
  } finally {
    instance.closeSync();
  }
  renameSync(tmp, published);
  // A WAL left by a reader that opened the old catalog read-write must not be replayed onto the new one.
  rmSync(`${published}.wal`, { force: true });
}

function tableQuery(files: string, table: ManifestTable): string {
  const versions = Object.keys(table.partitions)
    .sort()
    .map((k) => join(files, (table.partitions[k] as { version: string }).version));
  const columns = table.columns.map((c) => ident(c.name)).join(', ');
  if (versions.length === 0)
    return `SELECT ${table.columns.map((c) => `CAST(NULL AS ${c.type}) AS ${ident(c.name)}`).join(', ')} LIMIT 0`;
  return `SELECT ${columns} FROM read_parquet([${versions.map(sqlString).join(', ')}], hive_partitioning = false)`;
}

/** A hard link costs no disk; a file system without them (some network mounts) gets a copy. */
function linkOrCopy(from: string, to: string): void {
  try {
    linkSync(from, to);
  } catch (error) {
    if (
      (error as NodeJS.ErrnoException).code !== 'EPERM' &&
      (error as NodeJS.ErrnoException).code !== 'ENOTSUP' &&
      (error as NodeJS.ErrnoException).code !== 'EXDEV'
    )
      throw error;
    copyFileSync(from, to);
  }
}

/** Current files of partitions and tables that are gone. */
function removeGone(files: string, previous: Manifest | undefined, next: Manifest): void {
  for (const [name, table] of Object.entries(previous?.tables ?? {})) {
    for (const [key, p] of Object.entries(table.partitions)) {
      if (next.tables[name]?.partitions[key] === undefined) rmSync(join(files, p.file), { force: true });
    }
  }
}

/**
 * Version files no manifest names: those of a publish killed before its catalog's rename (its
 * Parquet files were written, nothing refers to them). Only files of an earlier publish number
 * (`<publish>-<random>.parquet`) go: two `query-sync publish` processes may run at once (both read
 * the working file read-only) and both write files of the same next number, so a file of this
 * number may be the other's, still to be named. A killed publish's files go at the publish after
 * the one that repaired it.
 */
function removeOrphans(files: string, manifest: Manifest): void {
  const named = new Set([
    ...Object.values(manifest.tables).flatMap((t) => Object.values(t.partitions).map((p) => p.version)),
    ...manifest.superseded.map((s) => s.file),
  ]);
  const root = join(files, '_versions');
  if (!existsSync(root)) return;
  for (const entry of readdirSync(root, { recursive: true, withFileTypes: true })) {
    const number = /^(\d+)-[0-9a-f]+\.parquet$/.exec(entry.name)?.[1];
    if (!entry.isFile() || number === undefined || Number(number) >= manifest.publish) continue;
    const file = relative(files, join(entry.parentPath, entry.name));
    if (!named.has(file)) rmSync(join(files, file), { force: true });
  }
}

/** Test hook (see its caller): say where the process is, then wait to be killed. */
/**
 * The hook of tests that kill a publish between the catalog's rename and the manifest: that step is
 * too short to hit by timing, so the process stops here (a marker file tells the test it is there)
 * until it is killed. The CLI installs it when its environment asks (`cli/main.ts`), never a publisher itself.
 */
export async function holdForKill(files: string): Promise<never> {
  writeFileSync(join(files, 'hold-after-catalog.marker'), '');
  // A pending promise alone would let the process end: a timer keeps it alive until the kill.
  return new Promise<never>(() => setInterval(() => undefined, 60_000));
}

function publishError(published: string, files: string, error: unknown): LoadError {
  const message = (error as Error).message;
  const full = /No space left|ENOSPC|disk is full/i.test(message);
  return new LoadError(
    `could not publish the read copy ${published} (Parquet set in ${files}): ${message}. The sync's data and state are untouched and the previous published copy stays readable; ` +
      (full
        ? 'free disk space there (or point --duckdb-path at a larger disk) and the next publish catches up.'
        : "make that folder writable by this user and the next publish (at the next run's end, or `--publish-every`) catches up."),
    false,
    { cause: error },
  );
}
