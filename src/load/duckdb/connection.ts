import { mkdirSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { dirname } from 'node:path';
import type { DuckDBConnection } from '@duckdb/node-api';
import { DuckDBInstance } from './instance.js';
import { LoadError, WarehouseBusyError } from '../../core/errors.js';
import { sqlString } from './sql.js';
import { sizeText } from '../../config/size.js';

/**
 * The life of the DuckDB file a destination writes: opening it (waiting while another process holds
 * its lock), the one connection and the queue that serializes its work, reattaching the file
 * (to free memory, `DuckDbMemory.releaseHeldMemory`) or reopening it (after DuckDB invalidated
 * it), and closing it.
 */

export interface DuckDbOpenOptions {
  /** While another process holds the file, keep retrying this long. @default 0 (fail at once) */
  readonly waitMs?: number;
  /** Open read-only (`status`): never creates the file. @default false */
  readonly readOnly?: boolean;
  /** DuckDB's memory limit for this process, in bytes (see `DEFAULT_MEMORY_LIMIT_BYTES`). */
  readonly memoryLimitBytes?: number;
}

/**
 * Rows per row group in the files query-sync writes (DuckDB's default is 122,880). A checkpoint
 * rewrites the table's last, partly filled row group in memory; with wide event rows that is about
 * 150 MB at the default size, so a long backfill's memory would peak at every checkpoint. 16,384
 * keeps a checkpoint small (and the writes faster); queries lose nothing noticeable at this size.
 */
export const ROW_GROUP_SIZE = 16_384;

/**
 * DuckDB threads of a process that writes (sync, backfill, repair, reset; readers keep DuckDB's
 * default, one per core). Its statements are MERGEs of one batch, state rows and small lookups,
 * one at a time on one connection: a second thread only splits tiny tasks and waits for them.
 * Measured on 2 cores: a first sync of 100,000 events ran at the same speed (6.1-6.3k rows/s with
 * one thread and two; the JavaScript side is what bounds it), and a sync with nothing new cost
 * about 5 % less CPU (1.21 against 1.27 CPU-s), as did a small first sync (1.74 against 1.84).
 */
export const WRITER_THREADS = 1;

/**
 * DuckDB's allocator (its own jemalloc) of a process that writes: hand freed memory back to the
 * system after each task that allocated more than this, and purge in the background. DuckDB's
 * default threshold, 128 MB, is four times the whole memory limit (`memory.ts`), so a writer never
 * reached it and its freed pages stayed resident until jemalloc's decay. Measured in a first
 * sync of 100,000 events (docs/benchmarks.md, First sync): the peak RSS 7-13 MB lower in one
 * pair, CPU alike.
 */
const ALLOCATOR_SETTINGS = { allocator_flush_threshold: '4MB', allocator_background_threads: 'true' };

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

export class DuckDbFile {
  private readonly instance: DuckDBInstance;
  /** One connection (replaced only after DuckDB invalidates the file: `reopen`). */
  private current: DuckDBConnection;
  /** One connection: writes from concurrent walks are serialized here. */
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** Why the file could not be attached again after `reattach` detached it (then nothing more runs). */
  private lost: Error | undefined;

  private constructor(
    instance: DuckDBInstance,
    connection: DuckDBConnection,
    /** DuckDB's memory limit in bytes: the configured one, never raised (undefined for `:memory:`: none). */
    readonly memoryLimitBytes: number | undefined,
    /** The ATTACH statement of the file (none for `:memory:`), to reattach it after DuckDB invalidates it. */
    private readonly attachSql: string | undefined,
    /** The file (for messages) and how long to wait for it when reattaching. */
    readonly path: string,
    private readonly waitMs: number,
  ) {
    this.instance = instance;
    this.current = connection;
  }

  /** The connection; use it only inside `serial`. */
  get connection(): DuckDBConnection {
    return this.current;
  }

  /** The memory limit as DuckDB reads it (`32MB`; `none` for `:memory:`), for messages. */
  get memoryLimitText(): string {
    return this.memoryLimitBytes === undefined ? 'none' : sizeText(this.memoryLimitBytes);
  }

  /** Whether the file is attached (not `:memory:`), so it can be reattached or reopened. */
  get reattachable(): boolean {
    return this.attachSql !== undefined;
  }

  /**
   * Open (or create) the DuckDB file. DuckDB lets one process open a file at a time: while another
   * process (a sync or backfill running now) holds it, retry until `waitMs` has passed, then fail
   * with a `WarehouseBusyError` saying what to do.
   */
  static async open(path: string, memoryLimitBytes: number, options: DuckDbOpenOptions = {}): Promise<DuckDbFile> {
    if (path === ':memory:') {
      const instance = await DuckDBInstance.create(path);
      const connection = await instance.connect();
      await connection.run("SET TimeZone = 'UTC'");
      return new DuckDbFile(instance, connection, undefined, undefined, ':memory:', 0);
    }
    if (options.readOnly !== true) mkdirSync(dirname(path), { recursive: true });
    // The file is attached to an in-memory host database: ATTACH is where DuckDB takes a row group
    // size, and the host carries the memory limit (see the constants above).
    // Spill to a folder beside the file when an operation needs more than the limit (an in-memory
    // host would otherwise have nowhere to spill and fail instead).
    // No vacuum: it merges a table's small trailing row groups at each checkpoint (until they hold
    // 2,048 rows), copying every merged string into memory that cannot spill, so with 200 KB rows a
    // checkpoint needed ~100 rows' worth and failed at 32MB. Without it a checkpoint writes only
    // the rows since the previous one (`checkpointIfDue`). Nothing query-sync writes deletes rows.
    const instance = await DuckDBInstance.create(':memory:', {
      memory_limit: sizeText(memoryLimitBytes),
      temp_directory: `${path}.tmp`,
      max_vacuum_tasks: '0',
      ...(options.readOnly === true ? {} : { threads: String(WRITER_THREADS), ...ALLOCATOR_SETTINGS }),
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
    return new DuckDbFile(instance, connection, memoryLimitBytes, attach, path, options.waitMs ?? 0);
  }

  /** Run `work` after every task queued before it; none runs once the file is closed or lost. */
  serial<T>(work: () => Promise<T>): Promise<T> {
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

  /**
   * DETACH and ATTACH the file again on the same connection, between transactions: only loading
   * the tables again frees memory DuckDB holds after a checkpoint (`DuckDbMemory.releaseHeldMemory`).
   */
  async reattach(): Promise<void> {
    if (this.attachSql === undefined) return;
    await this.current.run('USE memory');
    try {
      await this.current.run(`DETACH ${ATTACHED}`);
    } catch (error) {
      await useWarehouse(this.current);
      throw error;
    }
    try {
      // Between DETACH and ATTACH another process may open the file (`status`, for a moment): wait for it.
      await attachWaiting(
        this.current,
        this.attachSql,
        this.path,
        Math.max(this.waitMs, REATTACH_WAIT_MS),
        "reattaching it mid-run to free DuckDB's memory",
      );
      await useWarehouse(this.current);
    } catch (error) {
      // Without its file the connection would write into the in-memory host: refuse every later use.
      this.lost = error instanceof Error ? error : new Error(String(error));
      throw error;
    }
  }

  /**
   * Reopen the file DuckDB invalidated (a checkpoint out of memory after a commit), at the same
   * limit: DuckDB replays its WAL. The connection that saw the failure refuses every statement, so
   * this continues on a new one.
   */
  async reopen(): Promise<void> {
    if (this.attachSql === undefined) return;
    const connection = await this.instance.connect();
    await connection.run(`DETACH ${ATTACHED}`);
    this.current.closeSync();
    this.current = connection;
    await connection.run(this.attachSql);
    await useWarehouse(connection);
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
    this.current.closeSync();
    this.instance.closeSync();
  }
}

/**
 * ATTACH the file; while another process holds it, retry until `waitMs` has passed, then fail with a
 * `WarehouseBusyError` saying what to do.
 */
async function attachWaiting(
  connection: DuckDBConnection,
  attach: string,
  path: string,
  waitMs: number,
  doing?: string,
): Promise<void> {
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
