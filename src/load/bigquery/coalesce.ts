import type { StateCommit } from '../../core/state-table.js';
import type { Row, TableSchema } from '../../core/types.js';
import { dedupeRows, type LoadBatch, type LoadResult } from '../destination.js';
import { encodeRow, partitionSpec, rowHash, type BigQueryPartitioning } from './rows.js';
import { assertColumnNames, bigQueryColumns, quoteIdent, type BigQueryColumn } from './sql.js';

/**
 * Coalescing (see the top of `destination.ts`): writes to one table run one after another; writes that
 * arrive while one runs are merged into the next single group. Shared by the destination and its
 * dry run (`dry-run.ts`), so a dry run groups the writes as a real run does.
 */

/** What a group's write reports back. */
export interface GroupResult {
  readonly bytesProcessed: number | undefined;
  /** Rows each batch contributed (after dedupe inside the group). */
  readonly rowsPerBatch: ReadonlyMap<LoadBatch, number>;
}

/** Writes waiting for the table: they run as one. */
interface WriteGroup {
  readonly batches: LoadBatch[];
  result?: Promise<GroupResult>;
}

export class WriteCoalescer {
  /** The running write per table (never rejects). */
  private readonly queues = new Map<string, Promise<unknown>>();
  /** Writes waiting for the running one, per table. */
  private readonly waiting = new Map<string, WriteGroup>();

  constructor(private readonly writeGroup: (batches: readonly LoadBatch[]) => Promise<GroupResult>) {}

  write(batch: LoadBatch): Promise<LoadResult> {
    const name = batch.table.name;
    // A batch with state commits with its own MERGE: it is never coalesced with others.
    let group = batch.state === undefined ? this.waiting.get(name) : undefined;
    if (group === undefined) {
      const created: WriteGroup = { batches: [] };
      group = created;
      if (batch.state === undefined) this.waiting.set(name, created);
      const previous = this.queues.get(name) ?? Promise.resolve();
      created.result = previous.then(() => {
        // From here on, new writes form the next group.
        if (this.waiting.get(name) === created) this.waiting.delete(name);
        return this.writeGroup(created.batches);
      });
      // Entries in `queues` never reject, so one failed write does not fail the next.
      this.queues.set(
        name,
        created.result.catch(() => undefined),
      );
    }
    group.batches.push(batch);
    const result = group.result as Promise<GroupResult>;
    return result.then((r) => {
      const rows = r.rowsPerBatch.get(batch) ?? 0;
      return r.bytesProcessed === undefined ? { rows } : { rows, bytesProcessed: r.bytesProcessed };
    });
  }

  /** Wait for every write queued so far. */
  async drain(): Promise<void> {
    await Promise.all([...this.queues.values()]);
  }
}

/** A group's batches as one write: checked, deduped, with the state of a batch written alone. */
export interface PreparedGroup {
  readonly table: TableSchema;
  readonly columns: readonly BigQueryColumn[];
  readonly rows: readonly Row[];
  readonly rowsPerBatch: Map<LoadBatch, number>;
  readonly state: StateCommit | undefined;
}

/**
 * One schema for the group, its names checked before anything is sent (names BigQuery would
 * refuse), the rows deduped within each batch and across them.
 */
export function prepareGroup(batches: readonly LoadBatch[]): PreparedGroup {
  const table = unionSchema(batches.map((b) => b.table));
  quoteIdent(table.name);
  const columns = bigQueryColumns(table);
  assertColumnNames(table.name, columns);
  const rowsPerBatch = new Map<LoadBatch, number>();
  const all: Row[] = [];
  for (const batch of batches) {
    const own = dedupeRows(batch.rows, table.key, table.versionColumn);
    rowsPerBatch.set(batch, own.length);
    all.push(...own);
  }
  const rows = batches.length === 1 ? all : dedupeRows(all, table.key, table.versionColumn);
  // Only a batch written alone carries state (see `WriteCoalescer.write`).
  const state = batches.length === 1 ? batches[0]?.state : undefined;
  return { table, columns, rows, rowsPerBatch, state };
}

/**
 * Each row's hash for a full-refresh table (`rowHash`), and every cell checked (encoded once,
 * discarded) before anything is sent (cells of the wrong type); the files are written later, a
 * line at a time.
 */
export function checkCells(
  table: TableSchema,
  rows: readonly Row[],
): { readonly hashes: readonly string[] | undefined; readonly spec: BigQueryPartitioning } {
  const hashes =
    table.fullRefresh === true ? rows.map((row) => rowHash(table, row, ['_synced_at', '_run_id'])) : undefined;
  const spec = partitionSpec(table);
  for (const row of rows) encodeRow(table, row, spec);
  return { hashes, spec };
}

/** One schema for batches of one table written together: every column any of them has. */
function unionSchema(tables: readonly TableSchema[]): TableSchema {
  const [first, ...rest] = tables;
  if (first === undefined) throw new Error('unreachable: a write group has at least one batch');
  if (rest.length === 0) return first;
  const columns = new Map(first.columns.map((c) => [c.name, c]));
  for (const t of rest) for (const c of t.columns) if (!columns.has(c.name)) columns.set(c.name, c);
  return { ...first, columns: [...columns.values()] };
}
