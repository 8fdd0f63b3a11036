import { mkdirSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { dirname } from 'node:path';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { duckdbType } from '../core/column-types.js';
import { LoadError, WarehouseBusyError } from '../core/errors.js';
import { STATE_TABLE, type StateCommit, type StateRow } from '../core/state-table.js';
import type { ColumnDef, LogicalType, Row, TableSchema } from '../core/types.js';
import { checkpointBytes, DEFAULT_MEMORY_LIMIT, isInvalidated, isOutOfMemory, MAX_REATTACH_PER_WRITE, pinnedBytes, releaseBytes } from './duckdb-memory.js';
import { bridgeSql, ident, logicalFromDuckdb, mergeSql, sqlString } from './duckdb-sql.js';
import { assertRowsFitSchema, dedupeRows, type Destination, type LoadBatch, type LoadResult, type TableSwap, type ViewDialect, type WindowCount } from './destination.js';

export interface DuckDbOpenOptions {
  /** While another process holds the file, keep retrying this long. @default 0 (fail at once) */
  readonly waitMs?: number;
  /** Open read-only (`status`): never creates the file. @default false */
  readonly readOnly?: boolean;
  /** DuckDB's memory limit for this process (see `DEFAULT_MEMORY_LIMIT`). */
  readonly memoryLimit?: string;
}

/**
 * Rows per row group in the files query-sync writes (DuckDB's default is 122,880). A checkpoint
 * rewrites the table's last, partly filled row group in memory; with wide event rows that is about
 * 150 MB at the default size, so a long backfill's memory would peak at every checkpoint. 16,384
 * keeps a checkpoint small (and the writes faster); queries lose nothing noticeable at this size.
 */
export const ROW_GROUP_SIZE = 16_384;

/** Catalog name of the attached warehouse file (the host database is in memory). */
const ATTACHED = 'warehouse';

/** DuckDB's message when another process holds the file's lock. */
const LOCK_CONFLICT = /Could not set lock on file|Conflicting lock is held/;
/** Poll interval while waiting for another process to close the file. */
const OPEN_RETRY_MS = 250;
/**
 * Least time a reattach (`releaseHeldMemory`) waits for the file: between its DETACH and ATTACH
 * another process may open it (`status` reads it for a moment), so the run waits for it to finish.
 */
const REATTACH_WAIT_MS = 30_000;
const PROJECT_ID = 'project_id';

/**
 * The embedded default destination. Each write stages the batch with the Appender (all VARCHAR, so
 * values arrive exactly as text: bigints, JSON, ISO instants), then one MERGE on the key casts and
 * upserts it. MERGE is a single atomic statement, so a crash leaves either the whole batch or none,
 * and replaying a batch only rewrites the same rows.
 */
export class DuckDbDestination implements Destination {
  readonly kind = 'duckdb';
  private readonly instance: DuckDBInstance;
  /** One connection (replaced only after DuckDB invalidates the file: `recoverInvalidated`). */
  private connection: DuckDBConnection;
  /** Known columns per table, so ALTERs are issued only for new ones. */
  private readonly tables = new Map<string, Map<string, LogicalType>>();
  /** One connection: writes from concurrent walks are serialized here. */
  private queue: Promise<unknown> = Promise.resolve();
  /** DuckDB's memory limit: the configured one, never raised (see `upsert`). */
  private readonly memoryLimit: string;
  /** Batches written in halves because DuckDB ran out of memory (see `upsert`). */
  private splits = 0;
  /** Text written since the last checkpoint, and the amount that makes one due (see `checkpointIfDue`). */
  private sinceCheckpoint = 0;
  private readonly checkpointAt: number | undefined;
  /** Update memory a checkpoint leaves behind that makes the file be reattached (see `releaseHeldMemory`). */
  private readonly releaseAt: number | undefined;
  /** Table blocks a checkpoint leaves held that make the file be reattached (see `releaseHeldMemory`). */
  private readonly pinnedAt: number | undefined;
  /** Times the file was reattached to release memory DuckDB held after a checkpoint. */
  private releases = 0;
  /** Warnings of a state-only write (which returns none), handed on with the next batch's result. */
  private pendingWarnings: string[] = [];
  /** The file (for messages) and how long to wait for it when reattaching. */
  private readonly path: string;
  private readonly waitMs: number;

  /** The ATTACH statement of the file (none for `:memory:`), to reattach it after DuckDB invalidates it. */
  private readonly attachSql: string | undefined;

  /** Where state lives, for messages. */
  readonly stateLocation: string;

  private constructor(instance: DuckDBInstance, connection: DuckDBConnection, memoryLimit: string, attachSql?: string, path = ':memory:', waitMs = 0) {
    this.stateLocation = `table ${STATE_TABLE} of DuckDB file ${path}`;
    this.instance = instance;
    this.connection = connection;
    this.memoryLimit = memoryLimit;
    this.checkpointAt = checkpointBytes(memoryLimit);
    this.releaseAt = releaseBytes(memoryLimit);
    this.pinnedAt = pinnedBytes(memoryLimit);
    this.attachSql = attachSql;
    this.path = path;
    this.waitMs = waitMs;
  }

  /** How many batches were written in halves because DuckDB ran out of memory. */
  get outOfMemorySplits(): number {
    return this.splits;
  }

  /** How many times the file was reattached to release memory DuckDB held after a checkpoint (see `releaseHeldMemory`). */
  get updateMemoryReleases(): number {
    return this.releases;
  }

  /**
   * Open (or create) the DuckDB file. DuckDB lets one process open a file at a time: while another
   * process (a sync or backfill running now) holds it, retry until `waitMs` has passed, then fail
   * with a `WarehouseBusyError` saying what to do.
   */
  static async open(path: string, options: DuckDbOpenOptions = {}): Promise<DuckDbDestination> {
    if (path === ':memory:') {
      const instance = await DuckDBInstance.create(path);
      const connection = await instance.connect();
      await connection.run("SET TimeZone = 'UTC'");
      return new DuckDbDestination(instance, connection, 'none');
    }
    if (options.readOnly !== true) mkdirSync(dirname(path), { recursive: true });
    // The file is attached to an in-memory host database: ATTACH is where DuckDB takes a row group
    // size, and the host carries the memory limit (see the constants above).
    // Spill to a folder beside the file when an operation needs more than the limit (an in-memory
    // host would otherwise have nowhere to spill and fail instead).
    const memoryLimit = options.memoryLimit ?? DEFAULT_MEMORY_LIMIT;
    // No vacuum: it merges a table's small trailing row groups at each checkpoint (until they hold
    // 2,048 rows), copying every merged string into memory that cannot spill, so with 200 KB rows a
    // checkpoint needed ~100 rows' worth and failed at 32MB. Without it a checkpoint writes only
    // the rows since the previous one (`checkpointIfDue`). Nothing query-sync writes deletes rows.
    const instance = await DuckDBInstance.create(':memory:', {
      memory_limit: memoryLimit,
      temp_directory: `${path}.tmp`,
      max_vacuum_tasks: '0',
    });
    const connection = await instance.connect();
    const attach = `ATTACH ${sqlString(path)} AS ${ATTACHED} (${options.readOnly === true ? 'READ_ONLY, ' : ''}ROW_GROUP_SIZE ${ROW_GROUP_SIZE})`;
    try {
      await attachWaiting(connection, attach, path, options.waitMs ?? 0);
      await useWarehouse(connection);
    } catch (error) {
      connection.closeSync();
      instance.closeSync();
      throw error;
    }
    return new DuckDbDestination(instance, connection, memoryLimit, attach, path, options.waitMs ?? 0);
  }

  describe(table: string): Promise<readonly ColumnDef[] | undefined> {
    return this.serial(() => this.describeNow(table));
  }

  write(batch: LoadBatch): Promise<LoadResult> {
    return this.serial(() => this.writeNow(batch));
  }

  /** Every row of `_query_sync_state` (see `core/state-table.ts`); none when the table does not exist. */
  readState(): Promise<readonly StateRow[]> {
    return this.serial(async () => {
      if ((await this.describeNow(STATE_TABLE)) === undefined) return [];
      const reader = await this.connection.runAndReadAll(`SELECT key, value FROM main.${ident(STATE_TABLE)} ORDER BY key`);
      return reader.getRows().map(([key, value]) => ({ key: String(key), value: value === null ? null : String(value) }));
    });
  }

  /** A state change with no batch: its rows in a transaction of their own. */
  writeState(commit: StateCommit): Promise<void> {
    return this.serial(() => this.writeStateNow(commit));
  }

  count(table: string): Promise<number> {
    return this.serial(async () => {
      if ((await this.describeNow(table)) === undefined) return 0;
      const reader = await this.connection.runAndReadAll(`SELECT COUNT(*) AS n FROM main.${ident(table)}`);
      return Number(reader.getRows()[0]?.[0] ?? 0);
    });
  }

  countWindow(table: string, window: WindowCount): Promise<number> {
    return this.serial(async () => {
      if ((await this.describeNow(table)) === undefined) return 0;
      const reader = await this.connection.runAndReadAll(
        `SELECT COUNT(*) AS n FROM main.${ident(table)}
          WHERE ${ident(PROJECT_ID)} = $1 AND ${ident(window.column)} >= CAST($2 AS TIMESTAMPTZ) AND ${ident(window.column)} < CAST($3 AS TIMESTAMPTZ)`,
        [window.projectId, window.fromIso, window.toIso],
      );
      return Number(reader.getRows()[0]?.[0] ?? 0);
    });
  }

  countByProject(table: string): Promise<Readonly<Record<string, number>>> {
    return this.serial(async () => {
      if ((await this.describeNow(table)) === undefined) return {};
      const reader = await this.connection.runAndReadAll(
        `SELECT ${ident(PROJECT_ID)}, COUNT(*) FROM main.${ident(table)} GROUP BY 1 ORDER BY 1`,
      );
      const out: Record<string, number> = {};
      for (const [project, n] of reader.getRows()) out[String(project)] = Number(n);
      return out;
    });
  }

  replaceTables(swaps: readonly TableSwap[]): Promise<void> {
    return this.serial(async () => {
      const present = new Map<string, boolean>();
      for (const { table, shadow } of swaps) {
        present.set(table, (await this.describeNow(table)) !== undefined);
        present.set(shadow, (await this.describeNow(shadow)) !== undefined);
      }
      // DuckDB's DDL is transactional: a crash or an error leaves every old table whole.
      await this.connection.run('BEGIN TRANSACTION');
      try {
        for (const { table, shadow } of swaps) {
          if (present.get(shadow) === true) {
            if (present.get(table) === true) await this.connection.run(`DROP TABLE main.${ident(table)}`);
            await this.connection.run(`ALTER TABLE main.${ident(shadow)} RENAME TO ${ident(table)}`);
          } else if (present.get(table) === true) {
            await this.connection.run(`DELETE FROM main.${ident(table)}`);
          }
        }
        await this.connection.run('COMMIT');
      } catch (error) {
        await this.connection.run('ROLLBACK').catch(() => undefined);
        const names = swaps.map((s) => `${s.table} with ${s.shadow}`).join(', ');
        throw new LoadError(`DuckDB could not replace ${names}: ${(error as Error).message}`, false, { cause: error, context: { resource: swaps[0]?.table } });
      } finally {
        for (const { table, shadow } of swaps) {
          this.tables.delete(table);
          this.tables.delete(shadow);
        }
      }
    });
  }

  defineView(name: string, select: (sql: ViewDialect) => string): Promise<void> {
    return this.serial(async () => {
      const query = select({ table: (t) => `main.${ident(t)}`, column: ident });
      await this.connection.run(`CREATE OR REPLACE VIEW main.${ident(name)} AS ${query}`);
    });
  }

  dropTable(table: string): Promise<void> {
    return this.serial(async () => {
      await this.connection.run(`DROP TABLE IF EXISTS main.${ident(table)}`);
      this.tables.delete(table);
    });
  }

  /**
   * Run SQL and return plain rows: BIGINT as `bigint`, TIMESTAMPTZ as ISO strings, JSON as text.
   * For tests, the demo and `status`.
   */
  query(sql: string): Promise<Record<string, unknown>[]> {
    return this.serial(async () => {
      const reader = await this.connection.runAndReadAll(sql);
      return reader.getRowObjectsJS().map((row) => {
        const out: Record<string, unknown> = {};
        for (const [k, v] of Object.entries(row)) out[k] = v instanceof Date ? v.toISOString() : v;
        return out;
      });
    });
  }

  /**
   * Run `work` on the connection between two writes, so it sees the file as of the last commit
   * (a publish reads its consistent snapshot here: `publish/snapshot.ts`). Writes wait meanwhile.
   */
  exclusive<T>(work: (connection: DuckDBConnection) => Promise<T>): Promise<T> {
    return this.serial(() => work(this.connection));
  }

  async close(): Promise<void> {
    // Wait for every queued task, also those queued while waiting (a state write that arrives
    // late): closing the connection under a running statement blocks the process.
    for (;;) {
      const queued = this.queue;
      await queued.catch(() => undefined);
      if (queued === this.queue) break;
    }
    this.closed = true;
    this.connection.closeSync();
    this.instance.closeSync();
  }

  private closed = false;
  /** Why the file could not be attached again after `releaseHeldMemory` detached it (then nothing more runs). */
  private lost: Error | undefined;

  private serial<T>(work: () => Promise<T>): Promise<T> {
    const task = (): Promise<T> =>
      this.closed
        ? Promise.reject(new LoadError('the DuckDB file was already closed by this run', false))
        : this.lost !== undefined
          ? Promise.reject(this.lost)
          : work();
    const next = this.queue.then(task, task);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async describeNow(table: string): Promise<readonly ColumnDef[] | undefined> {
    const reader = await this.connection.runAndReadAll(
      `SELECT column_name, data_type FROM information_schema.columns
        WHERE table_schema = 'main' AND table_name = $1 ORDER BY ordinal_position`,
      [table],
    );
    const rows = reader.getRows();
    if (rows.length === 0) return undefined;
    return rows.map(([name, type]) => ({ name: String(name), type: logicalFromDuckdb(String(type)) }));
  }

  private async ensureTable(schema: TableSchema): Promise<void> {
    let known = this.tables.get(schema.name);
    if (known === undefined) {
      const existing = await this.describeNow(schema.name);
      if (existing === undefined) {
        const cols = schema.columns.map((c) => `${ident(c.name)} ${duckdbType(c.type)}`).join(', ');
        await this.connection.run(`CREATE TABLE IF NOT EXISTS main.${ident(schema.name)} (${cols})`);
      }
      known = new Map((existing ?? schema.columns).map((c) => [c.name, c.type]));
      this.tables.set(schema.name, known);
    }
    for (const column of schema.columns) {
      if (known.has(column.name)) continue;
      await this.connection.run(
        `ALTER TABLE main.${ident(schema.name)} ADD COLUMN IF NOT EXISTS ${ident(column.name)} ${duckdbType(column.type)}`,
      );
      known.set(column.name, column.type);
    }
  }

  private async writeNow(batch: LoadBatch): Promise<LoadResult> {
    const { table } = batch;
    const rows = dedupeRows(batch.rows, table.key, table.versionColumn);
    if (rows.length === 0) {
      if (batch.state !== undefined) await this.writeStateNow(batch.state);
      return { rows: 0 };
    }
    const warnings: string[] = [];
    let stateRows: readonly StateRow[] | undefined;
    let committed = false;
    try {
      assertRowsFitSchema(rows, table);
      await this.ensureTable(table);
      // A bridge table is made once its parent has the array column (before, it could hold nothing).
      const withArrays = this.tables.get(table.name);
      for (const bridge of table.bridges ?? []) if (withArrays?.has(bridge.sourceColumn) === true) await this.ensureTable(bridge.table);
      if (batch.state !== undefined) {
        await this.ensureStateTable();
        stateRows = await batch.state.prepare();
      }
      // The state rows count too: a long backfill's ledger is one value of a few hundred KB,
      // rewritten with every window's batches, and held in memory until a checkpoint like rows.
      const bytes = textBytes(rows) + stateBytes(stateRows);
      const budget = { reattached: 0 };
      warnings.push(...this.pendingWarnings.splice(0));
      await this.checkpointIfDue(table.name, bytes, warnings, budget);
      await this.upsert(table, rows, warnings, budget, stateRows);
      committed = true;
      this.sinceCheckpoint += bytes;
      return warnings.length === 0 ? { rows: rows.length } : { rows: rows.length, warnings };
    } catch (error) {
      // The file taken by another process while it was reattached: exit 4, as when opening it.
      if (error instanceof WarehouseBusyError) throw error;
      const message = (error as Error).message;
      const rowKb = Math.round(largestRowBytes(rows) / 1000);
      const hint =
        isInvalidated(error) || isOutOfMemory(error)
          ? ` (DuckDB's memory limit is ${this.memoryLimit} and is not raised on its own. The batch was written in parts down to single ` +
            `rows (of up to about ${rowKb} KB) and still did not fit: a write holds its rows in DuckDB's memory twice (staged, ` +
            `then merged) until the next checkpoint, and strings this large cannot spill to disk. ` +
            `Set --duckdb-memory-limit higher (at least several times the largest row); the batches written before are stored)`
          : '';
      throw new LoadError(`DuckDB write to table ${table.name} failed: ${message}${hint}`, false, {
        cause: error,
        context: { resource: table.name },
      });
    } finally {
      if (stateRows !== undefined) await batch.state?.finish(committed);
    }
  }

  /** `writeState` inside the serial queue (a batch with no rows still commits its state). */
  private async writeStateNow(commit: StateCommit): Promise<void> {
    const rows = await commit.prepare();
    let committed = false;
    try {
      await this.ensureStateTable();
      // A window's end is a state write of its own, so a backfill of many small windows writes
      // mostly these: they make checkpoints due as batches do (see `checkpointIfDue`).
      const bytes = stateBytes(rows);
      await this.checkpointIfDue(STATE_TABLE, bytes, this.pendingWarnings, { reattached: 0 });
      await this.connection.run('BEGIN TRANSACTION');
      try {
        await this.writeStateRows(rows);
        await this.connection.run('COMMIT');
        committed = true;
        this.sinceCheckpoint += bytes;
      } catch (error) {
        await this.connection.run('ROLLBACK').catch(() => undefined);
        throw new LoadError(`DuckDB could not write query-sync's state to ${this.stateLocation}: ${(error as Error).message}`, false, { cause: error });
      }
    } finally {
      await commit.finish(committed);
    }
  }

  private async ensureStateTable(): Promise<void> {
    if (this.tables.has(STATE_TABLE)) return;
    // No primary key: DuckDB checks unique keys eagerly, and a key deleted then inserted in one
    // transaction can be refused. The writer keeps keys unique (delete, then insert, per key).
    await this.connection.run(`CREATE TABLE IF NOT EXISTS main.${ident(STATE_TABLE)} (key VARCHAR, value VARCHAR, updated_at TIMESTAMPTZ)`);
    this.tables.set(STATE_TABLE, new Map([['key', 'string'], ['value', 'string'], ['updated_at', 'timestamp']]));
  }

  /** Replace the given keys' rows (in the caller's transaction). */
  private async writeStateRows(rows: readonly StateRow[]): Promise<void> {
    if (rows.length === 0) return;
    const table = `main.${ident(STATE_TABLE)}`;
    const keys = rows.map((r) => sqlString(r.key)).join(', ');
    await this.connection.run(`DELETE FROM ${table} WHERE key IN (${keys})`);
    const kept = rows.filter((r) => r.value !== null);
    for (let i = 0; i < kept.length; i += STATE_ROWS_PER_INSERT) {
      const chunk = kept.slice(i, i + STATE_ROWS_PER_INSERT);
      const values = chunk.map((_, j) => `($${2 * j + 1}, $${2 * j + 2}, now())`).join(', ');
      await this.connection.run(`INSERT INTO ${table} VALUES ${values}`, chunk.flatMap((r) => [r.key, r.value as string]));
    }
  }

  /**
   * Checkpoint before a write when the text written since the last checkpoint plus this batch would
   * pass `checkpointAt` (a share of the memory limit): DuckDB keeps rows written since its last
   * checkpoint in memory, and large strings cannot spill, so without this a table of 200 KB rows
   * outgrew a 32MB limit after ~150 rows. Memory then follows the setting, not the table. The text
   * counts the state rows written with a batch or alone (a long backfill's ledger). Also
   * when DuckDB holds more than `releaseAt` for rows it updated (a re-read of rows it has): the
   * checkpoint then releases it (`releaseHeldMemory`), so a batch of updates starts from little.
   * And when the rows not yet checkpointed, of all tables, hold more than three quarters of the
   * limit: a row group being filled takes a 256 KB block per column whatever its text, so with six
   * tables written at once that memory was 13–17 MB at 32MB after any write and peaked at 28 MB
   * with 5 MB of text, too full for the next commit (a first sync failed now and then, "Failed to
   * commit: could not allocate block").
   *
   * The rows before are committed (in DuckDB's log, durable), so a checkpoint that fails loses
   * nothing and hides no failure: out of memory, it only delays (it is tried again before the next
   * write; this write, if it does not fit either, goes through `upsert`'s recovery, and a row that
   * cannot fit fails naming the setting), with a warning; invalidated, the file is reopened
   * (`recoverInvalidated`); any other error fails the write.
   */
  private async checkpointIfDue(table: string, bytes: number, warnings: string[], budget: { reattached: number }): Promise<void> {
    if (this.checkpointAt === undefined || this.sinceCheckpoint === 0) return;
    if (this.sinceCheckpoint + bytes <= this.checkpointAt) {
      const held = await this.heldMemory();
      if (held.updated <= (this.releaseAt ?? Infinity) && held.unwritten <= this.checkpointAt * UNWRITTEN_CHECKPOINTS) return;
    }
    try {
      await this.checkpoint();
    } catch (error) {
      if (isInvalidated(error)) await this.recoverInvalidated(table, error, warnings, budget);
      else if (isOutOfMemory(error)) {
        warnings.push(
          `DuckDB ran out of memory checkpointing before a write to table ${table} at its memory limit of ${this.memoryLimit}; ` +
            `the rows before are stored (in its log) and the checkpoint is tried again before the next write`,
        );
      } else throw error;
    }
  }

  /**
   * Memory DuckDB holds between writes: for rows it updated (tagged ALLOCATOR; see
   * `releaseHeldMemory`), for rows not yet checkpointed (IN_MEMORY_TABLE), and blocks of the
   * file's tables (BASE_TABLE: some it keeps, some cached; see `PINNED_SHARE`).
   */
  private async heldMemory(): Promise<{ updated: number; unwritten: number; tables: number }> {
    const reader = await this.connection.runAndReadAll(
      `SELECT COALESCE(SUM(memory_usage_bytes) FILTER (WHERE tag = 'ALLOCATOR'), 0),
              COALESCE(SUM(memory_usage_bytes) FILTER (WHERE tag = 'IN_MEMORY_TABLE'), 0),
              COALESCE(SUM(memory_usage_bytes) FILTER (WHERE tag = 'BASE_TABLE'), 0) FROM duckdb_memory()`,
    );
    const [updated, unwritten, tables] = reader.getRows()[0] ?? [0, 0, 0];
    return { updated: Number(updated ?? 0), unwritten: Number(unwritten ?? 0), tables: Number(tables ?? 0) };
  }

  private async checkpoint(): Promise<void> {
    await this.connection.run('CHECKPOINT');
    this.sinceCheckpoint = 0;
    await this.releaseHeldMemory();
  }

  /**
   * After a checkpoint, reattach the file when DuckDB still holds memory it will not give back
   * otherwise; only loading the tables again frees it. Two kinds:
   * - more than `releaseAt` for rows it updated. DuckDB 1.5 keeps an updated row's new values in
   *   memory that never spills and that a checkpoint, though it writes them to the file, does not
   *   free (duckdb/duckdb#25162). Without this, re-reading history into existing rows (a `reset`,
   *   a dropped `_query_sync_state`, long lookbacks) ran out of memory at 32MB after ~10,400 events.
   * - more than `pinnedAt` of table blocks: each row group a checkpoint writes keeps a block DuckDB
   *   does not evict (`PINNED_SHARE`), so without this the memory grew with every checkpoint of a
   *   long run until a write could not fit (a 1M-event backfill after ~280,000 events).
   * Runs between transactions (the rows before are committed and checkpointed), on the same connection.
   */
  private async releaseHeldMemory(): Promise<void> {
    if (this.attachSql === undefined) return;
    const held = await this.heldMemory();
    if (held.updated <= (this.releaseAt ?? Infinity) && held.tables <= (this.pinnedAt ?? Infinity)) return;
    await this.connection.run('USE memory');
    try {
      await this.connection.run(`DETACH ${ATTACHED}`);
    } catch (error) {
      await useWarehouse(this.connection);
      throw error;
    }
    try {
      // Between DETACH and ATTACH another process may open the file (`status`, for a moment): wait for it.
      await attachWaiting(this.connection, this.attachSql, this.path, Math.max(this.waitMs, REATTACH_WAIT_MS), 'reattaching it mid-run to free DuckDB\'s memory');
      await useWarehouse(this.connection);
    } catch (error) {
      // Without its file the connection would write into the in-memory host: refuse every later use.
      this.lost = error instanceof Error ? error : new Error(String(error));
      throw error;
    }
    this.releases += 1;
  }

  /**
   * Stage and MERGE `rows`; when DuckDB runs out of memory, adapt within the limit instead of
   * failing the run: checkpoint (rows written since the last one stay in memory until then) and
   * write the batch as two halves, down to single rows (each MERGE is atomic and keyed, so the
   * halves are the same upsert). The limit is never raised: a row that does not fit alone fails
   * the write, and `writeNow` names the setting to change.
   */
  private async upsert(
    table: TableSchema,
    rows: readonly Row[],
    warnings: string[],
    budget: { reattached: number },
    stateRows?: readonly StateRow[],
  ): Promise<void> {
    for (;;) {
      let failure: unknown;
      try {
        await this.stageAndMerge(table, rows, stateRows);
        return;
      } catch (error) {
        failure = error;
      }
      if (isInvalidated(failure)) {
        await this.recoverInvalidated(table.name, failure, warnings, budget);
        continue;
      }
      if (!isOutOfMemory(failure)) throw failure;
      try {
        await this.checkpoint();
      } catch (error) {
        if (isInvalidated(error)) {
          await this.recoverInvalidated(table.name, error, warnings, budget);
          continue;
        }
        if (!isOutOfMemory(error)) throw error;
      }
      if (rows.length <= 1) throw failure;
      this.splits += 1;
      const half = Math.ceil(rows.length / 2);
      // The state goes with the last half: it describes the whole batch.
      await this.upsert(table, rows.slice(0, half), warnings, budget);
      await this.upsert(table, rows.slice(half), warnings, budget, stateRows);
      return;
    }
  }

  /**
   * A checkpoint ran out of memory after a commit (which is durable), and DuckDB closed the file to
   * further use. Reopen it, at the same limit (DuckDB replays its WAL), so the caller can write the
   * batch again in smaller parts: the MERGE is keyed, so a second time changes nothing. At most
   * `MAX_REATTACH_PER_WRITE` times per write.
   */
  private async recoverInvalidated(table: string, error: unknown, warnings: string[], budget: { reattached: number }): Promise<void> {
    if (this.attachSql === undefined || budget.reattached >= MAX_REATTACH_PER_WRITE) throw error;
    budget.reattached += 1;
    // The connection that saw the failure refuses every statement: continue on a new one.
    const connection = await this.instance.connect();
    await connection.run(`DETACH ${ATTACHED}`);
    this.connection.closeSync();
    this.connection = connection;
    await connection.run(this.attachSql);
    await useWarehouse(connection);
    // `sinceCheckpoint` stays: the log DuckDB replayed holds the rows written since the last checkpoint.
    warnings.push(
      `DuckDB ran out of memory checkpointing table ${table} at its memory limit of ${this.memoryLimit}; ` +
        `reopened the file at the same limit and wrote the batch again (a larger --duckdb-memory-limit avoids this)`,
    );
  }

  private async stageAndMerge(table: TableSchema, rows: readonly Row[], stateRows?: readonly StateRow[]): Promise<void> {
    const stage = `_stage_${table.name}`;
    const columns = table.columns;
    await this.connection.run(
      `CREATE OR REPLACE TEMP TABLE ${ident(stage)} (${columns.map((c) => `${ident(c.name)} VARCHAR`).join(', ')})`,
    );
    const appender = await this.connection.createAppender(stage, 'main', 'temp');
    try {
      for (let i = 0; i < rows.length; i++) {
        appendRow(appender, rows[i] as Row, columns);
        // Appends are synchronous: yield now and then so requests in flight are not held up
        // (a stalled event loop delays their sending, which the server's rate window sees).
        if (i % APPEND_YIELD_ROWS === APPEND_YIELD_ROWS - 1) await new Promise((resolve) => setImmediate(resolve));
      }
      appender.flushSync();
    } finally {
      appender.closeSync();
    }
    try {
      // A parent table without the array column has never had bridge rows: nothing to rewrite.
      const known = this.tables.get(table.name);
      const bridges = (table.bridges ?? []).filter((b) => known?.has(b.sourceColumn) === true);
      if (bridges.length === 0 && stateRows === undefined) {
        await this.connection.run(mergeSql(table, stage));
      } else {
        // The rows, their bridge rows and the state that describes them commit together, or none does.
        // The statements without parameters go in one call: each call costs a round trip through
        // the binding's thread pool, which was most of a small batch's time.
        const statements = ['BEGIN TRANSACTION', mergeSql(table, stage)];
        for (const bridge of bridges) {
          const hasArrays = rows.some((r) => r[bridge.sourceColumn] !== null && r[bridge.sourceColumn] !== undefined);
          statements.push(...bridgeSql(table, bridge, stage, hasArrays));
        }
        try {
          await this.connection.run(statements.join(';\n'));
          if (stateRows !== undefined) await this.writeStateRows(stateRows);
          await this.connection.run('COMMIT');
        } catch (error) {
          await this.connection.run('ROLLBACK').catch(() => undefined);
          throw error;
        }
      }
    } finally {
      await this.connection.run(`DROP TABLE IF EXISTS temp.main.${ident(stage)}`);
    }
  }
}

/**
 * ATTACH the file; while another process holds it, retry until `waitMs` has passed, then fail with a
 * `WarehouseBusyError` saying what to do.
 */
async function attachWaiting(connection: DuckDBConnection, attach: string, path: string, waitMs: number, doing?: string): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      await connection.run(attach);
      return;
    } catch (error) {
      const message = (error as Error).message;
      if (!LOCK_CONFLICT.test(message)) throw error;
      if (Date.now() >= deadline) {
        const holder = /held in (.+?\(PID \d+\))/.exec(message)?.[1];
        throw new WarehouseBusyError(
          doing === undefined
            ? `the DuckDB file ${path} is open in another process${holder === undefined ? '' : ` (${holder})`}, ` +
                `probably a sync or backfill running now: DuckDB lets one process open a file at a time. ` +
                `Wait for that run to finish, or pass --lock-wait (e.g. --lock-wait 30m) to wait for it.`
            : `the DuckDB file ${path} was opened by another process${holder === undefined ? '' : ` (${holder})`} while this run was ` +
                `${doing}, and it still held it after ${Math.round(waitMs / 1000)} s: DuckDB lets one process open a file at a time. ` +
                `The batches written before are stored; close that process (a DuckDB session on the file?) and run again.`,
          { cause: error },
        );
      }
      await delay(Math.min(OPEN_RETRY_MS, Math.max(0, deadline - Date.now())));
    }
  }
}

/** Make the attached file the connection's default database, in UTC. */
async function useWarehouse(connection: DuckDBConnection): Promise<void> {
  await connection.run(`USE ${ATTACHED}`);
  await connection.run("SET TimeZone = 'UTC'");
}

/** State rows' text (keys and values), as `textBytes` counts a batch's. */
function stateBytes(rows: readonly StateRow[] | undefined): number {
  let n = 0;
  for (const row of rows ?? []) n += row.key.length + (row.value?.length ?? 0) + 8;
  return n;
}

/** A batch's text, roughly, as `--batch-bytes` counts it (strings by length, other cells as 8 bytes). */
function textBytes(rows: readonly Row[]): number {
  let n = 0;
  for (const row of rows) for (const value of Object.values(row)) n += typeof value === 'string' ? value.length : 8;
  return n;
}

/** The largest row's text, roughly, for a message (strings by length, other cells as 8 bytes). */
function largestRowBytes(rows: readonly Row[]): number {
  let max = 0;
  for (const row of rows) {
    let n = 0;
    for (const value of Object.values(row)) n += typeof value === 'string' ? value.length : 8;
    max = Math.max(max, n);
  }
  return max;
}

/**
 * Memory of the rows not yet checkpointed (all tables) that makes a checkpoint due before a write,
 * in multiples of `checkpointAt` (a quarter of the limit): 3, three quarters (see `checkpointIfDue`).
 */
const UNWRITTEN_CHECKPOINTS = 3;

/** State rows per INSERT statement (a state change touches a handful of keys). */
const STATE_ROWS_PER_INSERT = 100;

/** Rows appended between two yields to the event loop. */
const APPEND_YIELD_ROWS = 500;

type Appender = Awaited<ReturnType<DuckDBConnection['createAppender']>>;

function appendRow(appender: Appender, row: Row, columns: readonly ColumnDef[]): void {
  for (const column of columns) {
    const value = row[column.name];
    if (value === null || value === undefined) appender.appendNull();
    else appender.appendVarchar(typeof value === 'string' ? value : String(value));
  }
  appender.endRow();
}


