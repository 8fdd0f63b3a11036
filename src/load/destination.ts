import type { StateCommit } from '../core/state-table.js';
import type { ColumnDef, Row, TableSchema } from '../core/types.js';
import type { Capabilities } from './destination-capabilities.js';

export type {
  BillingTotals,
  Capabilities,
  DeletionChange,
  DeletionResult,
  TableSwap,
  ViewDialect,
  WindowCount,
  WindowKeys,
} from './destination-capabilities.js';
export { capabilitiesOf } from './destination-capabilities.js';

/** One batch to upsert into one table. Rows are already unique by key (see `dedupeRows`). */
export interface LoadBatch {
  readonly table: TableSchema;
  readonly rows: readonly Row[];
  /**
   * State that describes this batch (its checkpoint): rows of the state table, computed by the
   * state store, written in the same transaction as the rows by a destination that keeps state
   * (`StateTable`); see `core/state-table.ts`. A write with no rows still commits it. The write
   * resolves once both are committed, and rejects when neither is.
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
  /**
   * 0 where the destination can tell that the write changed nothing (DuckDB: a re-read of the same
   * content): the tables are as they were, and a publish has nothing to rewrite. Absent otherwise.
   */
  readonly changed?: number;
}

/**
 * Where rows go. `write` must be idempotent: it merges on `table.key`, so replaying a batch after a
 * crash changes nothing. It creates the table when missing and adds columns that `table.columns`
 * names but the table lacks, before loading. It returns only after the rows are durable.
 *
 * What a destination may offer beyond that (state, lease, billing, counts, refresh, views) is one
 * small interface each in `destination-capabilities.ts`, in `can`: checked once where the
 * destination is made (`capabilitiesOf`), and read from there, never as optional members.
 */
export interface Destination {
  readonly kind: string;
  /** What it offers beyond rows; an absent capability is `undefined`. */
  readonly can: Capabilities;
  /** Columns of an existing table (so a resumed run keeps column types), or `undefined`. */
  describe(table: string): Promise<readonly ColumnDef[] | undefined>;
  write(batch: LoadBatch): Promise<LoadResult>;
  /** Rows in a table (for summaries and status); 0 when the table does not exist. */
  count(table: string): Promise<number>;
  close(): Promise<void>;
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
        throw new Error(
          `row of table ${table.name} has column "${column}", which the table schema passed with it does not name`,
        );
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
  // The usual keys (project and id) joined without an array per row: every row of a sync passes here twice.
  const [first = '', second] = key;
  const keyOf =
    key.length === 1
      ? (row: Row): string => String(row[first])
      : key.length === 2 && second !== undefined
        ? (row: Row): string => `${String(row[first])}\u0000${String(row[second])}`
        : (row: Row): string => key.map((c) => String(row[c])).join('\u0000');
  for (const row of rows) {
    const k = keyOf(row);
    const prev = byKey.get(k);
    if (
      prev !== undefined &&
      versionColumn !== undefined &&
      compareCells(prev[versionColumn], row[versionColumn]) > 0
    ) {
      continue;
    }
    byKey.set(k, row);
  }
  // No key twice (nearly always): the rows as they came, in a new array as before.
  if (byKey.size === rows.length) return rows.slice();
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
