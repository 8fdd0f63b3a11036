import { rowBytes } from '../core/row-bytes.js';
import type { Row } from '../core/types.js';
import { dedupeRows, type Destination, type LoadResult } from '../load/destination.js';
import type { SchemaTracker } from '../normalize/normalize.js';
import type { StateStore, StateWriter } from '../state/store.js';

/** A batch's state changes: what says its rows are stored (the walk's checkpoint, the traces it queued, a window's done mark). */
export type Changes = (state: StateWriter) => Promise<void>;

/**
 * Batches gathered by several writers, written as one: `rows` (deduplicated by the caller) in one
 * write of the table as the tracker has it now (a superset of what each batch was normalized
 * with), every writer's state changes in its transaction, in order. No rows: the changes alone.
 * Shared by `GroupCommit` (a split's parts) and `SharedBatch` (a backfill's small windows).
 */
export function writeTogether(
  deps: { readonly destination: Destination; readonly state: StateStore },
  schema: SchemaTracker['schema'],
  rows: readonly Row[],
  changes: readonly Changes[],
): Promise<LoadResult> {
  return deps.state.withBatch(
    async (state) => {
      for (const change of changes) await change(state);
    },
    (state) =>
      rows.length === 0
        ? Promise.resolve({ rows: 0 })
        : deps.destination.write({ table: schema, rows, ...(state === undefined ? {} : { state }) }),
  );
}

interface Waiting {
  readonly rows: readonly Row[];
  readonly bytes: number;
  readonly changes: Changes;
  readonly resolve: (result: LoadResult) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * The commits of one stream's sub-walks (a split window's parts), one at a time, each holding every
 * batch that was handed over while the one before was being written: their rows in one write, their
 * state changes in its transaction. Each walk still waits until its batch is durable (`commit`
 * resolves then), so what it holds and when it checkpoints are as before.
 *
 * Why: the parts' checkpoints are one state key (the stream's), and the state store commits a key
 * one commit at a time, so a stream wrote one batch at a time anyway, each a part's share of
 * `--batch-rows` (5,000 / 16 parts: about 300-400 rows). Most of a write's cost is per batch (the
 * stage, the MERGE's read of the table's keys, the bridge, the state rows, the commit, the state
 * file's export), so a first sync wrote at half the speed of a backfill with the same loader. The
 * parts waiting on the write before now go in the next one together: about the rows the parts
 * hold, within `--batch-rows` and `--batch-bytes` (a stream's own bounds of one write).
 */
export class GroupCommit {
  private waiting: Waiting[] = [];
  private writing = false;

  constructor(
    private readonly options: {
      readonly tracker: SchemaTracker;
      /** Rows and text one write holds at most (`--batch-rows`, `--batch-bytes`): more waits for the next. */
      readonly batchRows: number;
      readonly batchBytes: number;
      readonly deps: {
        readonly destination: Destination;
        readonly state: StateStore;
      };
    },
  ) {}

  /** Write `rows` (deduplicated, not empty) with their state changes; resolves once durable. */
  commit(rows: readonly Row[], changes: Changes): Promise<LoadResult> {
    const done = new Promise<LoadResult>((resolve, reject) => {
      this.waiting.push({ rows, bytes: rows.reduce((n, row) => n + rowBytes(row), 0), changes, resolve, reject });
    });
    void this.drain();
    return done;
  }

  private async drain(): Promise<void> {
    if (this.writing) return;
    this.writing = true;
    try {
      while (this.waiting.length > 0) {
        // In the order handed over, within one batch's rows and text (the first whatever its size).
        let rows = 0;
        let bytes = 0;
        let n = 0;
        for (const w of this.waiting) {
          if (n > 0 && (rows + w.rows.length > this.options.batchRows || bytes + w.bytes > this.options.batchBytes))
            break;
          rows += w.rows.length;
          bytes += w.bytes;
          n += 1;
        }
        const taken = this.waiting.splice(0, n);
        try {
          const result = await this.write(taken);
          // The warnings are the write's: told once.
          for (const [i, { rows, resolve }] of taken.entries())
            resolve(i === 0 ? { ...result, rows: rows.length } : { rows: rows.length });
        } catch (error) {
          // Nothing of it is the state's (the store takes a commit in once it lands): every walk
          // whose batch it held fails as its own write would have, and the next run reads them again.
          for (const { reject } of taken) reject(error);
        }
      }
    } finally {
      this.writing = false;
    }
  }

  /** The batches' rows in one write (in order: a key twice keeps what two writes one after the other would), their changes in its transaction. */
  private write(taken: readonly Waiting[]): Promise<LoadResult> {
    const schema = this.options.tracker.schema;
    const rows =
      taken.length === 1
        ? (taken[0] as Waiting).rows
        : dedupeRows(
            taken.flatMap((t) => t.rows),
            schema.key,
            schema.versionColumn,
          );
    return writeTogether(
      this.options.deps,
      schema,
      rows,
      taken.map((t) => t.changes),
    );
  }
}
