import type { TableSchema, Row } from '../../core/types.js';
import type { StateRow } from '../../core/state-table.js';
import type { DuckDbFile } from './connection.js';

/**
 * DuckDB's memory limit, how a write tells it ran out of memory, and the policy that keeps a run
 * within the limit (`DuckDbMemory`: checkpoints when due, reattaching to release held memory, a
 * batch written in halves when it does not fit).
 */

/**
 * DuckDB's memory limit in query-sync's process. DuckDB's default, 80 % of RAM, lets its buffer
 * pool keep the whole table as it grows: a 1M-event backfill then peaked at 850 MB. Writes are one
 * batch at a time (a MERGE of a few thousand rows), for which this is ample; blocks of the table
 * are read back from the file as needed, and larger operations spill to `<file>.tmp`. 32MB keeps
 * a 1M-event backfill under 300 MB, as fast as at 64MB. A batch that does not fit is written in
 * parts, down to single rows (`DuckDbDestination.upsert`). The limit is never raised: memory
 * follows the settings, not the data; a row that does not fit alone fails naming the setting.
 */
export const DEFAULT_MEMORY_LIMIT_BYTES = 32_000_000;

/**
 * Text written since the last checkpoint that triggers one before the next write: this fraction of
 * the memory limit (8 MB at 32MB). DuckDB holds rows written since its last checkpoint in memory,
 * and strings over a few KB (kept in their own blocks) cannot spill: 200 KB rows filled 32MB after
 * about 150 rows. Checkpointing before a write once the rows since the last one, plus this batch,
 * would pass this share keeps that bounded by the setting, whatever the row size. With vacuum off
 * (`open`), each checkpoint writes only the row group of the rows since the previous one.
 */
const CHECKPOINT_SHARE = 0.25;

/** Text bytes (strings by length, other cells 8) after which a checkpoint is due; undefined: never (no limit). */
export function checkpointBytes(memoryLimitBytes: number | undefined): number | undefined {
  return memoryLimitBytes === undefined ? undefined : memoryLimitBytes * CHECKPOINT_SHARE;
}

/**
 * Memory DuckDB still holds for rows it *updated* after a checkpoint has written them out, above
 * which the file is reattached to release it: this fraction of the memory limit (2 MB at 32MB).
 * DuckDB 1.5 keeps an updated row's new values (tagged ALLOCATOR, never spilled) after the
 * checkpoint, until the table is loaded again (duckdb/duckdb#25162, a regression from 1.4): a
 * re-read of 15,000 events into existing rows ran 32MB out after ~10,400 of them. Writing new rows
 * leaves none of this behind (but see `PINNED_SHARE`).
 */
const RELEASE_SHARE = 1 / 16;

/** ALLOCATOR bytes held after a checkpoint above which the file is reattached; undefined: never (no limit). */
function releaseBytes(memoryLimitBytes: number | undefined): number | undefined {
  return memoryLimitBytes === undefined ? undefined : memoryLimitBytes * RELEASE_SHARE;
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
const PINNED_SHARE = 1 / 8;

/** BASE_TABLE bytes held after a checkpoint above which the file is reattached; undefined: never (no limit). */
function pinnedBytes(memoryLimitBytes: number | undefined): number | undefined {
  return memoryLimitBytes === undefined ? undefined : memoryLimitBytes * PINNED_SHARE;
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
const MAX_REATTACH_PER_WRITE = 2;

/**
 * Memory of the rows not yet checkpointed (all tables) that makes a checkpoint due before a write,
 * in multiples of `checkpointAt` (a quarter of the limit): 3, three quarters (see `checkpointIfDue`).
 */
const UNWRITTEN_CHECKPOINTS = 3;

/**
 * Text written between two probes of DuckDB's memory before a write, as a share of `checkpointAt`
 * (1 MB at 32MB; see `checkpointIfDue`): well under what either probed bound allows to grow.
 */
const PROBE_SHARE = 1 / 8;

/** Reopens of an invalidated file left to one write (see `recoverInvalidated`). */
export interface ReattachBudget {
  reattached: number;
}

/** Stage and MERGE rows (with the state that describes them) in one statement or transaction. */
export type MergeRows = (rows: readonly Row[], stateRows?: readonly StateRow[]) => Promise<void>;

/**
 * The memory policy of one DuckDB file: memory follows the setting, never the data. It decides when
 * a checkpoint is due, reattaches the file to release what DuckDB keeps after one, writes a batch
 * that runs out of memory in halves, and reopens a file DuckDB invalidated.
 */
export class DuckDbMemory {
  /** Batches written in halves because DuckDB ran out of memory (see `upsert`). */
  splits = 0;
  /** Times the file was reattached to release memory DuckDB held after a checkpoint. */
  releases = 0;
  /** Text written since the last checkpoint, and the amount that makes one due (see `checkpointIfDue`). */
  private sinceCheckpoint = 0;
  private readonly checkpointAt: number | undefined;
  /** Update memory a checkpoint leaves behind that makes the file be reattached (see `releaseHeldMemory`). */
  private readonly releaseAt: number | undefined;
  /** Table blocks a checkpoint leaves held that make the file be reattached (see `releaseHeldMemory`). */
  private readonly pinnedAt: number | undefined;

  constructor(private readonly file: DuckDbFile) {
    this.checkpointAt = checkpointBytes(file.memoryLimitBytes);
    this.releaseAt = releaseBytes(file.memoryLimitBytes);
    this.pinnedAt = pinnedBytes(file.memoryLimitBytes);
  }

  /** `sinceCheckpoint` when DuckDB's memory was last probed (`heldMemory`). */
  private probedAt = 0;
  /** Tables written since the last checkpoint (each holds blocks of a row group being filled). */
  private readonly written = new Set<string>();

  /** Text (of rows or state) a commit wrote to `table`: it stays in DuckDB's memory until the next checkpoint. */
  wrote(bytes: number, table: string): void {
    this.sinceCheckpoint += bytes;
    this.written.add(table);
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
  async checkpointIfDue(table: string, bytes: number, warnings: string[], budget: ReattachBudget): Promise<void> {
    if (this.checkpointAt === undefined || this.sinceCheckpoint === 0) return;
    if (this.sinceCheckpoint + bytes <= this.checkpointAt) {
      // What the probe looks for grows with the text written (updated rows) and with the tables
      // written (a row group's blocks each): probed once a table is first written since the last
      // checkpoint, or once another `PROBE_SHARE` of the limit's text was written, not before every
      // write (the probe cost a small window's write more than its rows did).
      const probeDue =
        !this.written.has(table) || this.sinceCheckpoint + bytes - this.probedAt >= this.checkpointAt * PROBE_SHARE;
      if (!probeDue) return;
      this.probedAt = this.sinceCheckpoint;
      const held = await this.heldMemory();
      if (held.updated <= (this.releaseAt ?? Infinity) && held.unwritten <= this.checkpointAt * UNWRITTEN_CHECKPOINTS)
        return;
    }
    try {
      await this.checkpoint();
    } catch (error) {
      if (isInvalidated(error)) await this.recoverInvalidated(table, error, warnings, budget);
      else if (isOutOfMemory(error)) {
        warnings.push(
          `DuckDB ran out of memory checkpointing before a write to table ${table} at its memory limit of ${this.file.memoryLimitText}; ` +
            `the rows before are stored (in its log) and the checkpoint is tried again before the next write`,
        );
      } else throw error;
    }
  }

  /**
   * Stage and MERGE `rows`; when DuckDB runs out of memory, adapt within the limit instead of
   * failing the run: checkpoint (rows written since the last one stay in memory until then) and
   * write the batch as two halves, down to single rows (each MERGE is atomic and keyed, so the
   * halves are the same upsert). The limit is never raised: a row that does not fit alone fails
   * the write, and the destination's `writeNow` names the setting to change.
   */
  async upsert(
    table: TableSchema,
    rows: readonly Row[],
    merge: MergeRows,
    warnings: string[],
    budget: ReattachBudget,
    stateRows?: readonly StateRow[],
  ): Promise<void> {
    for (;;) {
      let failure: unknown;
      try {
        await merge(rows, stateRows);
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
      await this.upsert(table, rows.slice(0, half), merge, warnings, budget);
      await this.upsert(table, rows.slice(half), merge, warnings, budget, stateRows);
      return;
    }
  }

  /**
   * Memory DuckDB holds between writes: for rows it updated (tagged ALLOCATOR; see
   * `releaseHeldMemory`), for rows not yet checkpointed (IN_MEMORY_TABLE), and blocks of the
   * file's tables (BASE_TABLE: some it keeps, some cached; see `PINNED_SHARE`).
   */
  private async heldMemory(): Promise<{ updated: number; unwritten: number; tables: number }> {
    const reader = await this.file.connection.runAndReadAll(
      `SELECT COALESCE(SUM(memory_usage_bytes) FILTER (WHERE tag = 'ALLOCATOR'), 0),
              COALESCE(SUM(memory_usage_bytes) FILTER (WHERE tag = 'IN_MEMORY_TABLE'), 0),
              COALESCE(SUM(memory_usage_bytes) FILTER (WHERE tag = 'BASE_TABLE'), 0) FROM duckdb_memory()`,
    );
    const [updated, unwritten, tables] = reader.getRows()[0] ?? [0, 0, 0];
    return { updated: Number(updated ?? 0), unwritten: Number(unwritten ?? 0), tables: Number(tables ?? 0) };
  }

  private async checkpoint(): Promise<void> {
    await this.file.connection.run('CHECKPOINT');
    this.sinceCheckpoint = 0;
    this.probedAt = 0;
    this.written.clear();
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
    if (!this.file.reattachable) return;
    const held = await this.heldMemory();
    if (held.updated <= (this.releaseAt ?? Infinity) && held.tables <= (this.pinnedAt ?? Infinity)) return;
    await this.file.reattach();
    this.releases += 1;
  }

  /**
   * A checkpoint ran out of memory after a commit (which is durable), and DuckDB closed the file to
   * further use. Reopen it, at the same limit (DuckDB replays its WAL), so the caller can write the
   * batch again in smaller parts: the MERGE is keyed, so a second time changes nothing. At most
   * `MAX_REATTACH_PER_WRITE` times per write.
   */
  private async recoverInvalidated(
    table: string,
    error: unknown,
    warnings: string[],
    budget: ReattachBudget,
  ): Promise<void> {
    if (!this.file.reattachable || budget.reattached >= MAX_REATTACH_PER_WRITE) throw error;
    budget.reattached += 1;
    await this.file.reopen();
    // `sinceCheckpoint` stays: the log DuckDB replayed holds the rows written since the last checkpoint.
    warnings.push(
      `DuckDB ran out of memory checkpointing table ${table} at its memory limit of ${this.file.memoryLimitText}; ` +
        `reopened the file at the same limit and wrote the batch again (a larger --duckdb-memory-limit avoids this)`,
    );
  }
}
