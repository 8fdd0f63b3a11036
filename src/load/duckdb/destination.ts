import type { DuckDBConnection } from '@duckdb/node-api';
import { duckdbType } from '../../core/column-types.js';
import { LoadError, WarehouseBusyError } from '../../core/errors.js';
import {
  TRACE_BOOK_TABLE,
  STATE_TABLE,
  type TraceRead,
  type StateCommit,
  type StateRow,
} from '../../core/state-table.js';
import type { ColumnDef, LogicalType, Row, TableSchema } from '../../core/types.js';
import { rowBytes } from '../../core/row-bytes.js';
import { DuckDbFile, type DuckDbOpenOptions } from './connection.js';
import { checkpointBytes, DEFAULT_MEMORY_LIMIT_BYTES, DuckDbMemory, isInvalidated, isOutOfMemory } from './memory.js';
import { compactTail } from './compact.js';
import { DescribedTables } from './described.js';
import { bridgeSql, ident, insertSql, mergeSql } from './sql.js';
import { applyDeletions, keysInWindow, notDeleted, windowWhere } from './deletions.js';
import { DELETED_AT_COLUMN } from '../../core/deletions.js';
import { createStateTable, readStateRows, STATE_COLUMNS, stateBytes, stateRowsSql, writeStateRows } from './state.js';
import {
  TRACE_BOOK_COLUMNS,
  traceReadsSql,
  createTraceBook,
  owedCountSql,
  owedSelectSql,
  writeTraceReads,
} from './trace-book.js';
import type { OwedTraces } from '../destination-capabilities.js';
import {
  assertRowsFitSchema,
  capabilitiesOf,
  dedupeRows,
  type Capabilities,
  type DeletionChange,
  type DeletionResult,
  type Destination,
  type LoadBatch,
  type LoadResult,
  type TableSwap,
  type ViewDialect,
  type WindowCount,
  type WindowKeys,
} from '../destination.js';

const PROJECT_ID = 'project_id';

/**
 * The embedded default destination. Each write stages the batch with the Appender (all VARCHAR, so
 * values arrive exactly as text: bigints, JSON, ISO instants), then one MERGE on the key casts and
 * upserts it. MERGE is a single atomic statement, so a crash leaves either the whole batch or none,
 * and replaying a batch only rewrites the same rows.
 *
 * It composes the file's life (`connection.ts`: open, the lock, the serial queue, reattach,
 * close), the memory policy (`memory.ts`) and the state table (`state.ts`).
 */
export class DuckDbDestination implements Destination {
  readonly kind = 'duckdb';
  /** Known columns per table, so ALTERs are issued only for new ones. */
  private readonly tables = new Map<string, Map<string, LogicalType>>();
  /** The state write queued last, while it has not started and nothing is queued behind it. */
  private stateGroup: StateGroup | undefined;
  /** `describe`'s answers until a DDL, SQL it cannot see into or a failed write (`described.ts`). */
  private readonly described = new DescribedTables(() => this.connection);
  /** Warnings of a state-only write (which returns none), handed on with the next batch's result. */
  private pendingWarnings: string[] = [];
  private readonly memory: DuckDbMemory;
  /** Tables this process wrote rows to (compacted at `close`). */
  private readonly written = new Set<string>();

  /** Where state lives, for messages. */
  readonly stateLocation: string;
  readonly can: Capabilities;

  private constructor(private readonly file: DuckDbFile) {
    this.stateLocation = `table ${STATE_TABLE} of DuckDB file ${file.path}`;
    this.memory = new DuckDbMemory(file);
    this.can = capabilitiesOf(this);
  }

  /** How many batches were written in halves because DuckDB ran out of memory. */
  get outOfMemorySplits(): number {
    return this.memory.splits;
  }

  /** How many times the file was reattached to release memory DuckDB held after a checkpoint (see `DuckDbMemory.releaseHeldMemory`). */
  get updateMemoryReleases(): number {
    return this.memory.releases;
  }

  /**
   * Open (or create) the DuckDB file. DuckDB lets one process open a file at a time: while another
   * process (a sync or backfill running now) holds it, retry until `waitMs` has passed, then fail
   * with a `WarehouseBusyError` saying what to do.
   */
  static async open(path: string, options: DuckDbOpenOptions = {}): Promise<DuckDbDestination> {
    return new DuckDbDestination(
      await DuckDbFile.open(path, options.memoryLimitBytes ?? DEFAULT_MEMORY_LIMIT_BYTES, options),
    );
  }

  /** The connection; use it only inside `serial`. */
  private get connection(): DuckDBConnection {
    return this.file.connection;
  }

  private serial<T>(work: () => Promise<T>): Promise<T> {
    // Work queued behind a state write that has not started: a later state write may not join it
    // (it would commit ahead of this work).
    this.stateGroup = undefined;
    return this.file.serial(work);
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
      return readStateRows(this.connection);
    });
  }

  /**
   * A state change with no batch: its rows in a transaction of their own, shared with the state
   * changes queued right behind it (`StateGroup`).
   */
  writeState(commit: StateCommit): Promise<void> {
    const open = this.stateGroup;
    if (open !== undefined) {
      open.commits.push(commit);
      return open.committed;
    }
    const group: StateGroup = { commits: [commit], committed: Promise.resolve() };
    group.committed = this.file.serial(() => {
      if (this.stateGroup === group) this.stateGroup = undefined;
      return this.writeStateNow(joinStateCommits(group.commits));
    });
    this.stateGroup = group;
    return group.committed;
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
      const columns = await this.describeNow(table);
      if (columns === undefined) return 0;
      const reader = await this.connection.runAndReadAll(
        `SELECT COUNT(*) AS n FROM main.${ident(table)} WHERE ${windowWhere(window)}${notDeleted(columns)}`,
        [window.projectId, window.fromIso, window.toIso],
      );
      return Number(reader.getRows()[0]?.[0] ?? 0);
    });
  }

  keysInWindow(table: string, window: WindowCount & { readonly key: string }): Promise<WindowKeys> {
    return this.serial(() => keysInWindow(this.connection, (t) => this.describeNow(t), table, window));
  }

  applyDeletions(change: DeletionChange): Promise<DeletionResult> {
    return this.serial(async () => {
      try {
        return { rows: await applyDeletions(this.connection, (t) => this.describeNow(t), change) };
      } finally {
        // A column may have been added: the next write describes the tables again.
        this.described.clear();
        for (const t of [change.parent.table, ...change.followers.map((f) => f.table)]) this.tables.delete(t);
      }
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

  /** The trace book (`trace-book.ts`): up to `limit` events of a project that owe their traces, newest first. */
  owedTraces(
    query: OwedTraces & { readonly project: string; readonly limit: number },
  ): Promise<readonly { readonly id: string; readonly at: number }[]> {
    return this.serial(async () => {
      const events = await this.describeNow(query.eventTable);
      if (events === undefined) return [];
      const bookExists = (await this.describeNow(TRACE_BOOK_TABLE)) !== undefined;
      const marks = events.some((c) => c.name === DELETED_AT_COLUMN);
      const { sql, params } = owedSelectSql(query, bookExists, query.project, query.limit, marks);
      const reader = await this.connection.runAndReadAll(sql, [...params]);
      return reader.getRows().map(([id, at]) => ({ id: String(id), at: Number(at) }));
    });
  }

  countOwedTraces(query: OwedTraces): Promise<Readonly<Record<string, number>>> {
    return this.serial(async () => {
      const events = await this.describeNow(query.eventTable);
      if (events === undefined) return {};
      const bookExists = (await this.describeNow(TRACE_BOOK_TABLE)) !== undefined;
      const { sql, params } = owedCountSql(
        query,
        bookExists,
        events.some((c) => c.name === DELETED_AT_COLUMN),
      );
      const reader = await this.connection.runAndReadAll(sql, [...params]);
      const out: Record<string, number> = {};
      for (const [project, n] of reader.getRows()) out[String(project)] = Number(n);
      return out;
    });
  }

  forgetTraces(resource: string, project?: string): Promise<void> {
    return this.serial(async () => {
      if ((await this.describeNow(TRACE_BOOK_TABLE)) === undefined) return;
      await this.connection.run(
        `DELETE FROM main.${ident(TRACE_BOOK_TABLE)} WHERE resource = $1${project === undefined ? '' : ' AND project_id = $2'}`,
        project === undefined ? [resource] : [resource, project],
      );
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
        throw new LoadError(`DuckDB could not replace ${names}: ${(error as Error).message}`, false, {
          cause: error,
          context: { resource: swaps[0]?.table },
        });
      } finally {
        for (const { table, shadow } of swaps) {
          this.tables.delete(table);
          this.tables.delete(shadow);
        }
        this.described.clear();
      }
    });
  }

  defineView(name: string, select: (sql: ViewDialect) => string): Promise<void> {
    return this.serial(async () => {
      const query = select({ table: (t) => `main.${ident(t)}`, column: ident });
      this.described.clear();
      await this.connection.run(`CREATE OR REPLACE VIEW main.${ident(name)} AS ${query}`);
    });
  }

  dropTable(table: string): Promise<void> {
    return this.serial(async () => {
      this.described.clear();
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
      this.described.clear();
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
    return this.serial(() => {
      this.described.clear();
      return work(this.connection);
    });
  }

  /**
   * Before the file closes (and DuckDB checkpoints it), the tables this run wrote have their
   * trailing row groups rewritten as one where that frees blocks (`compact.ts`): a run that
   * wrote a few rows leaves the file about as large as it found it.
   */
  async close(): Promise<void> {
    const written = [...this.written];
    this.written.clear();
    if (written.length > 0) {
      const maxBytes = checkpointBytes(this.file.memoryLimitBytes ?? DEFAULT_MEMORY_LIMIT_BYTES) ?? 0;
      await this.serial(async () => {
        for (const table of written) {
          if ((await this.describeNow(table)) !== undefined) await compactTail(this.connection, table, maxBytes);
        }
      }).catch(() => undefined);
    }
    return this.file.close();
  }

  private describeNow(table: string): Promise<readonly ColumnDef[] | undefined> {
    return this.described.get(table);
  }

  private async ensureTable(schema: TableSchema): Promise<void> {
    let known = this.tables.get(schema.name);
    if (known === undefined) {
      const existing = await this.describeNow(schema.name);
      if (existing === undefined) {
        this.described.forget(schema.name);
        const cols = schema.columns.map((c) => `${ident(c.name)} ${duckdbType(c.type)}`).join(', ');
        await this.connection.run(`CREATE TABLE IF NOT EXISTS main.${ident(schema.name)} (${cols})`);
      }
      known = new Map((existing ?? schema.columns).map((c) => [c.name, c.type]));
      this.tables.set(schema.name, known);
    }
    for (const column of schema.columns) {
      if (known.has(column.name)) continue;
      this.described.forget(schema.name);
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
    try {
      assertRowsFitSchema(rows, table);
      await this.ensureTable(table);
      // A bridge table is made once its parent has the array column (before, it could hold nothing).
      const withArrays = this.tables.get(table.name);
      for (const bridge of table.bridges ?? [])
        if (withArrays?.has(bridge.sourceColumn) === true) await this.ensureTable(bridge.table);
      const reads = batch.state?.traceReads ?? [];
      if (batch.state !== undefined) {
        await this.ensureStateTable();
        if (reads.length > 0) await this.ensureTraceBook();
        stateRows = batch.state.rows;
      }
      // The state rows count too: a long backfill's ledger is one value of a few hundred KB,
      // rewritten with every window's batches, and held in memory until a checkpoint like rows.
      const bytes = textBytes(rows) + stateBytes(stateRows);
      const budget = { reattached: 0 };
      warnings.push(...this.pendingWarnings.splice(0));
      await this.memory.checkpointIfDue(table.name, bytes, warnings, budget);
      let changed = 0;
      // The book's reads go where the state goes: with the last part of a batch written in parts.
      const merge = async (part: readonly Row[], partState?: readonly StateRow[]): Promise<void> => {
        changed += await this.stageAndMerge(table, part, partState, partState === undefined ? [] : reads);
      };
      await this.memory.upsert(table, rows, merge, warnings, budget, stateRows);
      this.memory.wrote(bytes, table.name);
      this.written.add(table.name);
      for (const bridge of table.bridges ?? []) this.written.add(bridge.table.name);
      if (stateRows !== undefined) this.written.add(STATE_TABLE);
      // `changed` is told when nothing changed: what a publish skips (see `LoadResult.changed`).
      const result = { rows: rows.length, ...(changed === 0 ? { changed } : {}) };
      return warnings.length === 0 ? result : { ...result, warnings };
    } catch (error) {
      // A table or column made in the failed write may have been rolled back.
      this.described.clear();
      // The file taken by another process while it was reattached: exit 4, as when opening it.
      if (error instanceof WarehouseBusyError) throw error;
      const message = (error as Error).message;
      const rowKb = Math.round(largestRowBytes(rows) / 1000);
      const hint =
        isInvalidated(error) || isOutOfMemory(error)
          ? ` (DuckDB's memory limit is ${this.file.memoryLimitText} and is not raised on its own. The batch was written in parts down to single ` +
            `rows (of up to about ${rowKb} KB) and still did not fit: a write holds its rows in DuckDB's memory twice (staged, ` +
            `then merged) until the next checkpoint, and strings this large cannot spill to disk. ` +
            `Set --duckdb-memory-limit higher (at least several times the largest row); the batches written before are stored)`
          : '';
      throw new LoadError(`DuckDB write to table ${table.name} failed: ${message}${hint}`, false, {
        cause: error,
        context: { resource: table.name },
      });
    }
  }

  /** `writeState` inside the serial queue (a batch with no rows still commits its state). */
  private async writeStateNow(commit: StateCommit): Promise<void> {
    const { rows } = commit;
    await this.ensureStateTable();
    const reads = commit.traceReads ?? [];
    if (reads.length > 0) await this.ensureTraceBook();
    // A window's end is a state write of its own, so a backfill of many small windows writes
    // mostly these: they make checkpoints due as batches do (see `checkpointIfDue`).
    const bytes = stateBytes(rows);
    await this.memory.checkpointIfDue(STATE_TABLE, bytes, this.pendingWarnings, { reattached: 0 });
    await this.connection.run('BEGIN TRANSACTION');
    try {
      await writeStateRows(this.connection, rows);
      await writeTraceReads(this.connection, reads);
      await this.connection.run('COMMIT');
      this.memory.wrote(bytes, STATE_TABLE);
      this.written.add(STATE_TABLE);
    } catch (error) {
      await this.connection.run('ROLLBACK').catch(() => undefined);
      throw new LoadError(
        `DuckDB could not write query-sync's state to ${this.stateLocation}: ${(error as Error).message}`,
        false,
        { cause: error },
      );
    }
  }

  private async ensureTraceBook(): Promise<void> {
    if (this.tables.has(TRACE_BOOK_TABLE)) return;
    this.described.forget(TRACE_BOOK_TABLE);
    await createTraceBook(this.connection);
    this.tables.set(TRACE_BOOK_TABLE, new Map(TRACE_BOOK_COLUMNS));
  }

  private async ensureStateTable(): Promise<void> {
    if (this.tables.has(STATE_TABLE)) return;
    this.described.forget(STATE_TABLE);
    await createStateTable(this.connection);
    this.tables.set(STATE_TABLE, new Map(STATE_COLUMNS));
  }

  /** Stage `rows` and MERGE them (with their bridge rows and state); returns the rows the MERGE inserted or changed. */
  private async stageAndMerge(
    table: TableSchema,
    rows: readonly Row[],
    stateRows?: readonly StateRow[],
    reads: readonly TraceRead[] = [],
  ): Promise<number> {
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
    const dropStage = `DROP TABLE IF EXISTS temp.main.${ident(stage)}`;
    let dropped = false;
    try {
      // A parent table without the array column has never had bridge rows: nothing to rewrite.
      const known = this.tables.get(table.name);
      const bridges = (table.bridges ?? []).filter((b) => known?.has(b.sourceColumn) === true);
      // The rows, their bridge rows and the state that describes them commit together, or none does.
      // The statements without parameters go in as few calls as can be: each call costs a round
      // trip through the binding's thread pool, which was most of a small batch's time.
      try {
        // The MERGE's insert clause alone first, without its change test's read of every column
        // of the table: when it inserted every staged row, none of the batch's keys was stored (a
        // first sync's rows, nearly always) and that is the write. Decided in the transaction that
        // writes, from the table itself, by the statement that writes (a separate read of the
        // keys first cost as much as this MERGE). When some were stored (a resumed run, a re-read),
        // the whole MERGE follows in the same transaction: the rows just inserted hold what was
        // staged, so it leaves them as they are (without `_run_id`, it writes them again, the same).
        const inserted = (await this.connection.run(`BEGIN TRANSACTION;\n${insertSql(table, stage)}`)).rowsChanged;
        const fresh = inserted === rows.length;
        const changed = fresh ? inserted : inserted + (await this.connection.run(mergeSql(table, stage))).rowsChanged;
        // A MERGE that changed nothing (a re-read of the same content) leaves the bridge as it is.
        const statements: string[] = [];
        if (changed > 0) {
          for (const bridge of bridges) {
            const hasArrays = rows.some((r) => r[bridge.sourceColumn] !== null && r[bridge.sourceColumn] !== undefined);
            statements.push(...bridgeSql(table, bridge, stage, hasArrays, fresh));
          }
        }
        // The bridge, the state, the book, the stage's drop and the COMMIT in one call where their
        // values can be written into the SQL (no NUL in them): each call is a round trip through
        // the binding's thread pool. The drop is in the transaction, so nothing after the COMMIT
        // can fail.
        const state = stateRows === undefined ? [] : stateRowsSql(stateRows);
        const book = traceReadsSql(reads);
        if (state !== undefined && book !== undefined) {
          await this.connection.run([...statements, ...state, ...book, dropStage, 'COMMIT'].join(';\n'));
          dropped = true;
          return changed;
        }
        if (statements.length > 0) await this.connection.run(statements.join(';\n'));
        if (stateRows !== undefined) await writeStateRows(this.connection, stateRows);
        await writeTraceReads(this.connection, reads);
        await this.connection.run('COMMIT');
        return changed;
      } catch (error) {
        await this.connection.run('ROLLBACK').catch(() => undefined);
        throw error;
      }
    } finally {
      if (!dropped) await this.connection.run(dropStage);
    }
  }
}

/** A batch's text, roughly. */
const textBytes = (rows: readonly Row[]): number => rows.reduce((n, row) => n + rowBytes(row), 0);
/** The largest row's text, roughly, for a message. */
const largestRowBytes = (rows: readonly Row[]): number => rows.reduce((max, row) => Math.max(max, rowBytes(row)), 0);

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

/**
 * State writes with no batch that queue one right behind the other (windows of several streams
 * ending together, a run's marks at its end) commit as one transaction: each is a BEGIN, a DELETE
 * and INSERT and a COMMIT, about 5 ms of DuckDB's time, and a sync with nothing new made about 25.
 * Only writes with nothing queued between them join, so none commits ahead of work queued before
 * it; each caller's promise resolves once the shared transaction committed (or rejects with it).
 */
interface StateGroup {
  readonly commits: StateCommit[];
  committed: Promise<void>;
}

/** One commit of several, in their order: a key's last row is its value, the book's reads all appended. */
function joinStateCommits(commits: readonly StateCommit[]): StateCommit {
  if (commits.length === 1 && commits[0] !== undefined) return commits[0];
  const rows = new Map<string, StateRow>();
  const reads: TraceRead[] = [];
  for (const commit of commits) {
    for (const row of commit.rows) {
      rows.delete(row.key);
      rows.set(row.key, row);
    }
    reads.push(...(commit.traceReads ?? []));
  }
  return { rows: [...rows.values()], ...(reads.length === 0 ? {} : { traceReads: reads }) };
}
