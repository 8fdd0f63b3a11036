import type { LeaseProvider } from '../core/lease.js';
import type { StateCommit, StateTable } from '../core/state-table.js';
import type { ColumnDef, Row, TableSchema } from '../core/types.js';

/** One batch to upsert into one table. Rows are already unique by key (see `dedupeRows`). */
export interface LoadBatch {
  readonly table: TableSchema;
  readonly rows: readonly Row[];
  /**
   * State that describes this batch (its checkpoint), written in the same transaction as the rows
   * by a destination that keeps state (`StateTable`); see `core/state-table.ts`. A write with no
   * rows still commits it.
   */
  readonly state?: StateCommit;
}

export interface LoadResult {
  /** Rows written (inserted or replaced). */
  readonly rows: number;
  /** Bytes the destination processed for the merge, when it reports them. */
  readonly bytesProcessed?: number;
  /** What the destination had to adapt to write the batch (logged as warnings). */
  readonly warnings?: readonly string[];
}

/** What a destination's queries were billed since it was opened (BigQuery on-demand bytes). */
export interface BillingTotals {
  /** Bytes billed, summed over query jobs (each at least 10 MB per table it references). */
  readonly bytesBilled: number;
  /** Bytes processed, before the per-job minimum. */
  readonly bytesProcessed: number;
  readonly queryJobs: number;
  /** Bytes billed per table the jobs were run for (MERGE, checks, counts), largest first. */
  readonly byTable: Readonly<Record<string, number>>;
}

/**
 * Where rows go. `write` must be idempotent: it merges on `table.key`, so replaying a batch after a
 * crash changes nothing. It creates the table when missing and adds columns that `table.columns`
 * names but the table lacks, before loading. It returns only after the rows are durable.
 */
/** A table and the shadow that replaces it (`Destination.replaceTables`). */
export interface TableSwap {
  readonly table: string;
  readonly shadow: string;
}

export interface Destination extends Partial<StateTable> {
  readonly kind: string;
  /**
   * Where this destination keeps the run lease, when not beside the state file (BigQuery: runs in
   * pods share no file). Optional: absent, the lease is a folder beside the state file.
   */
  readonly leases?: LeaseProvider;
  /** Columns of an existing table (so a resumed run keeps column types), or `undefined`. */
  describe(table: string): Promise<readonly ColumnDef[] | undefined>;
  write(batch: LoadBatch): Promise<LoadResult>;
  /**
   * Bytes billed by this destination's queries so far (the run's, as a destination is opened per
   * run). Optional: absent where queries cost nothing (DuckDB).
   */
  billing?(): BillingTotals;
  /** Rows in a table (for summaries and status); 0 when the table does not exist. */
  count(table: string): Promise<number>;
  /**
   * Rows of one project whose `column` lies in [fromIso, toIso), for `verify`; 0 when the table does
   * not exist. Optional: a destination without it cannot be verified.
   */
  countWindow?(table: string, window: WindowCount): Promise<number>;
  /** Rows per `project_id` (for `status`); empty when the table does not exist. Optional. */
  countByProject?(table: string): Promise<Readonly<Record<string, number>>>;
  /**
   * Replace each `table` with its `shadow`, all in one transaction (`sync --full-refresh`: a table
   * and its bridge tables): readers see the old rows or the new ones, never a half-empty table or
   * a bridge out of step with its parent. A missing `shadow` (nothing was read) empties `table`.
   * Optional: a destination without it cannot full-refresh.
   */
  replaceTables?(swaps: readonly TableSwap[]): Promise<void>;
  /** Drop a table if it exists (a shadow table left by a refresh that did not finish). */
  dropTable?(table: string): Promise<void>;
  /**
   * Create or replace a view. `select` builds its query in this destination's dialect from how it
   * names a table and quotes a column. Optional: a destination without it has no views.
   */
  defineView?(name: string, select: (sql: ViewDialect) => string): Promise<void>;
  close(): Promise<void>;
}

/** How a destination writes a table reference and a column name in SQL. */
export interface ViewDialect {
  readonly table: (name: string) => string;
  readonly column: (name: string) => string;
}

/** The rows `countWindow` counts. */
export interface WindowCount {
  readonly projectId: string;
  /** A timestamp column, e.g. `timestamp`. */
  readonly column: string;
  /** Inclusive lower bound (ISO instant). */
  readonly fromIso: string;
  /** Exclusive upper bound (ISO instant). */
  readonly toIso: string;
}

/**
 * Throw when a row names a column the schema lacks: writing it would silently drop the value.
 * Returns the column names of the schema.
 */
export function assertRowsFitSchema(rows: readonly Row[], table: TableSchema): void {
  const names = new Set(table.columns.map((c) => c.name));
  for (const row of rows) {
    for (const column of Object.keys(row)) {
      if (!names.has(column)) {
        throw new Error(`row of table ${table.name} has column "${column}", which the table schema passed with it does not name`);
      }
    }
  }
}

/**
 * Keep one row per key: the one with the greatest `versionColumn` value, the later one on a tie.
 * Destinations resolve a key repeated inside one MERGE batch arbitrarily, so every batch is deduped
 * here first.
 */
export function dedupeRows(rows: readonly Row[], key: readonly string[], versionColumn?: string): Row[] {
  const byKey = new Map<string, Row>();
  for (const row of rows) {
    const k = key.map((c) => String(row[c])).join('\u0000');
    const prev = byKey.get(k);
    if (prev !== undefined && versionColumn !== undefined && compareCells(prev[versionColumn], row[versionColumn]) > 0) {
      continue;
    }
    byKey.set(k, row);
  }
  return [...byKey.values()];
}

function compareCells(a: unknown, b: unknown): number {
  if (a === b) return 0;
  if (a === null || a === undefined) return -1;
  if (b === null || b === undefined) return 1;
  if (typeof a === 'string' && typeof b === 'string') {
    const ta = Date.parse(a);
    const tb = Date.parse(b);
    if (!Number.isNaN(ta) && !Number.isNaN(tb)) return ta - tb;
    return a < b ? -1 : 1;
  }
  if ((typeof a === 'number' || typeof a === 'bigint') && (typeof b === 'number' || typeof b === 'bigint')) {
    return a < b ? -1 : a > b ? 1 : 0;
  }
  return 0;
}
