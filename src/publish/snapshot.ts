import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { STATE_TABLE } from '../core/state-table.js';
import { ident, sqlString } from '../load/duckdb/sql.js';
import { copyPartition } from './copy-partition.js';
import type { Manifest, ManifestPartition, ManifestTable } from './manifest.js';
import { partitionFilter, partitionSql, WHOLE, type DayCut } from './partitions.js';

/**
 * The part of a publish that reads the working database: run between two writes (the destination's
 * `exclusive`), so every file it writes holds the rows as of one commit. It writes new immutable
 * Parquet files only for the partitions that changed, and returns the tables' new manifest entries;
 * the catalog, the current files and the manifest are made after, without holding the writer.
 */

/** Partitions a process saw written since its last publish, per table ('all': rewrite the table). */
export type DirtyMarks = ReadonlyMap<string, ReadonlySet<string> | 'all'>;

/** Tables a full refresh fills before swapping them in (`run/refresh.ts` SHADOW_PREFIX): never published. */
const SHADOW_PREFIX = '_query_sync_refresh_';
const SYNCED_AT = '_synced_at';

export interface SnapshotInput {
  /** Folder of the Parquet set (absolute). */
  readonly files: string;
  readonly previous: Manifest | undefined;
  readonly marks: DirtyMarks;
  /** The first publish of this process: rows written by earlier processes since the last publish are found by `_synced_at`. */
  readonly firstOfProcess: boolean;
  readonly publish: number;
  /** The tables cut by day (`partitionedTables`); others are one file each. */
  readonly partitioned: Readonly<Record<string, DayCut>>;
}

export interface Snapshot {
  readonly tables: Record<string, ManifestTable>;
  readonly views: Record<string, string>;
  /** Version files written by this publish (relative to `files`). */
  readonly written: string[];
  /** Version files this publish made no longer current. */
  readonly replaced: string[];
  readonly syncedThrough: string | null;
  readonly runId: string | null;
  /** Partitions rewritten, for the log. */
  readonly rewritten: number;
  /** Of those, partitions written in rowid slices because the whole one ran out of memory (`copy-partition.ts`). */
  readonly sliced: number;
}

/** A snapshot being taken. */
type Building = { -readonly [K in keyof Snapshot]: Snapshot[K] };

export async function takeSnapshot(connection: DuckDBConnection, input: SnapshotInput): Promise<Snapshot> {
  return withPublishSettings(connection, () => snapshotNow(connection, input));
}

/**
 * One thread, and rows in any order (which lets DuckDB bound a row group by bytes), while the
 * snapshot writes its files; the writer's own settings after. Both are instance settings, and the
 * writer's statements wait meanwhile (the snapshot runs between two writes).
 */
async function withPublishSettings<T>(connection: DuckDBConnection, work: () => Promise<T>): Promise<T> {
  const [threads, ordered] =
    (await rows(connection, "SELECT current_setting('threads'), current_setting('preserve_insertion_order')"))[0] ?? [];
  await connection.run('SET threads = 1');
  await connection.run('SET preserve_insertion_order = false');
  try {
    return await work();
  } finally {
    await connection.run(`SET threads = ${Number(threads ?? 2)}`);
    await connection.run(
      `SET preserve_insertion_order = ${ordered === false || ordered === 'false' ? 'false' : 'true'}`,
    );
  }
}

async function snapshotNow(connection: DuckDBConnection, input: SnapshotInput): Promise<Snapshot> {
  // Rows written since the writer's last checkpoint are held in memory, which at the 32MB default
  // left too little to read 200 KB rows back: write them to the file first (a failure here only
  // leaves that memory held; the writer's next write recovers as after its own checkpoints).
  await connection.run('CHECKPOINT').catch(() => undefined);
  const snap: Building = {
    tables: {},
    views: {},
    written: [],
    replaced: [],
    syncedThrough: null,
    runId: null,
    rewritten: 0,
    sliced: 0,
  };
  try {
    for (const [name, columns] of await publishedTables(connection)) {
      const spec = specFor(input.partitioned[name], columns);
      snap.tables[name] = await snapshotTable(connection, input, snap, name, columns, spec);
      if (columns.some((c) => c.name === SYNCED_AT)) {
        const [max] = await rows(
          connection,
          `SELECT CAST(max(${ident(SYNCED_AT)}) AS VARCHAR) FROM main.${ident(name)}`,
        );
        const value = max?.[0];
        if (
          typeof value === 'string' &&
          (snap.syncedThrough === null || Date.parse(value) > Date.parse(snap.syncedThrough))
        )
          snap.syncedThrough = new Date(Date.parse(value)).toISOString();
      }
    }
    for (const [name, sql] of await rows(
      connection,
      `SELECT view_name, sql FROM duckdb_views() WHERE NOT internal AND schema_name = 'main' AND database_name = current_database() ORDER BY view_name`,
    )) {
      snap.views[String(name)] = String(sql);
    }
    const runs = await rows(
      connection,
      `SELECT table_name FROM duckdb_tables() WHERE table_name = '_query_sync_runs' AND schema_name = 'main' AND database_name = current_database()`,
    );
    if (runs.length > 0)
      snap.runId =
        ((
          await rows(
            connection,
            `SELECT CAST(run_id AS VARCHAR) FROM main._query_sync_runs ORDER BY ended_at DESC LIMIT 1`,
          )
        )[0]?.[0] as string | null) ?? null;
    return snap;
  } catch (error) {
    // Nothing refers to this publish's files yet: remove them, the previous copy stays as it was.
    for (const file of snap.written) rmSync(join(input.files, file), { force: true });
    throw error;
  }
}

async function snapshotTable(
  connection: DuckDBConnection,
  input: SnapshotInput,
  snap: Building,
  name: string,
  columns: ManifestTable['columns'],
  spec: DayCut | undefined,
  forceFull = false,
): Promise<ManifestTable> {
  const writtenBefore = snap.written.length;
  const replacedBefore = snap.replaced.length;
  const prev = input.previous?.tables[name];
  const table = `main.${ident(name)}`;
  const same =
    prev !== undefined &&
    JSON.stringify(prev.columns) === JSON.stringify(columns) &&
    prev.partitionedBy === (spec?.column ?? null);
  const mark = input.marks.get(name);
  // A table without `_synced_at` cannot tell which rows are new: it is rewritten whole, when its
  // content is not what the last publish wrote (a run with nothing new left it as it was).
  const timed = columns.some((c) => c.name === SYNCED_AT);
  const fingerprint = timed ? undefined : await fingerprintOf(connection, table);
  const unchanged =
    !forceFull && same && mark === undefined && fingerprint !== undefined && prev?.fingerprint === fingerprint;
  if (unchanged) return { ...prev, columns };
  let full = forceFull || !same || mark === 'all' || !timed;
  const dirty = new Set<string>(mark instanceof Set ? mark : []);
  if (!full && input.firstOfProcess) {
    const through = input.previous?.syncedThrough ?? null;
    if (through === null) full = true;
    else {
      // Rows written by runs after the last publish (or by the run it published mid-way).
      const op = input.previous?.final === true ? '>' : '>=';
      for (const [p] of await rows(
        connection,
        `SELECT DISTINCT ${partitionSql(spec, ident)} FROM ${table} WHERE ${ident(SYNCED_AT)} ${op} TIMESTAMPTZ ${sqlString(through)}`,
      ))
        dirty.add(String(p));
    }
  }
  const total = Number((await rows(connection, `SELECT count(*) FROM ${table}`))[0]?.[0] ?? 0);
  const partitions: Record<string, ManifestPartition> = full ? {} : { ...(prev?.partitions ?? {}) };
  if (full) {
    for (const p of Object.values(prev?.partitions ?? {})) snap.replaced.push(p.version);
    dirty.clear();
    for (const [p] of await rows(connection, `SELECT DISTINCT ${partitionSql(spec, ident)} FROM ${table}`))
      dirty.add(String(p));
  }
  for (const partition of [...dirty].sort()) {
    const before = partitions[partition];
    const dir = partition === WHOLE ? name : `${name}/${partition}`;
    const version = `_versions/${dir}/${input.publish}-${randomBytes(4).toString('hex')}.parquet`;
    mkdirSync(join(input.files, '_versions', dir), { recursive: true });
    snap.written.push(version);
    const copied = await copyPartition(connection, {
      table,
      filter: partitionFilter(spec, partition, ident),
      path: join(input.files, version),
    });
    snap.sliced += copied.slices === 0 ? 0 : 1;
    snap.rewritten += 1;
    if (before !== undefined) snap.replaced.push(before.version);
    const n = copied.rows;
    if (n === 0) {
      rmSync(join(input.files, version), { force: true });
      snap.written.pop();
      delete partitions[partition];
    } else partitions[partition] = { rows: n, file: `${dir}/data.parquet`, version };
  }
  const sum = Object.values(partitions).reduce((n, p) => n + p.rows, 0);
  if (!full && sum !== total) {
    // Rows left a partition not rewritten (a reset, a row whose day changed): rewrite the table whole.
    for (const file of snap.written.splice(writtenBefore)) rmSync(join(input.files, file), { force: true });
    snap.replaced.splice(replacedBefore);
    return snapshotTable(connection, input, snap, name, columns, spec, true);
  }
  return {
    columns,
    partitionedBy: spec?.column ?? null,
    rows: total,
    partitions,
    ...(fingerprint === undefined ? {} : { fingerprint }),
  };
}

/** A table's row count and the sum of its rows' hashes: equal when its rows are (in any order). */
async function fingerprintOf(connection: DuckDBConnection, table: string): Promise<string> {
  const [row] = await rows(connection, `SELECT count(*), CAST(sum(hash(t)) AS VARCHAR) FROM ${table} AS t`);
  return `${String(row?.[0] ?? 0)}:${String(row?.[1] ?? 0)}`;
}

/**
 * The tables readers see (every table but the state and a full refresh's shadows), with their
 * columns in order: one scan of DuckDB's catalog for all of them, where a scan per table cost 2–4 ms
 * each (`load/duckdb/described.ts`).
 */
async function publishedTables(connection: DuckDBConnection): Promise<Map<string, ManifestTable['columns']>> {
  const found = await rows(
    connection,
    `SELECT c.table_name, c.column_name, c.data_type FROM duckdb_columns() AS c
      JOIN duckdb_tables() AS t USING (database_name, schema_name, table_name)
      WHERE c.schema_name = 'main' AND c.database_name = current_database() AND NOT t.temporary
      ORDER BY c.table_name, c.column_index`,
  );
  const out = new Map<string, { name: string; type: string }[]>();
  for (const [table, name, type] of found) {
    const key = String(table);
    if (key === STATE_TABLE || key.startsWith(SHADOW_PREFIX)) continue;
    let list = out.get(key);
    if (list === undefined) {
      list = [];
      out.set(key, list);
    }
    list.push({ name: String(name), type: String(type) });
  }
  return out;
}

function specFor(spec: DayCut | undefined, columns: ManifestTable['columns']): DayCut | undefined {
  if (spec === undefined) return undefined;
  const type = columns.find((c) => c.name === spec.column)?.type;
  const expected = spec.kind === 'timestamp' ? 'TIMESTAMP WITH TIME ZONE' : 'BIGINT';
  return type === expected ? spec : undefined;
}

async function rows(connection: DuckDBConnection, sql: string): Promise<unknown[][]> {
  return (await connection.runAndReadAll(sql)).getRows();
}
