import type { Logger } from '../core/log.js';
import { rowBytes } from '../core/row-bytes.js';
import type { Row } from '../core/types.js';
import { dedupeRows, type Destination } from '../load/destination.js';
import type { SchemaTracker } from '../normalize/normalize.js';
import type { StateStore } from '../state/store.js';
import { type Changes, writeTogether } from './group-commit.js';

/**
 * One write for many small windows of a stream (a backfill's). A window read whole in one batch
 * hands its rows and its state changes (the ledger's "done") here instead of committing them
 * alone; they are written together, in one transaction where the warehouse keeps the state, once
 * the rows reach a batch (`batchRows`, `batchBytes`) or the stream ends (`flush`).
 *
 * Why: a commit costs the same whether it holds 5 rows or 5,000 (a DuckDB transaction and the
 * state file's fsyncs), so a two-year backfill in daily windows of a few rows each paid about
 * 2,900 of them, most of its time. A window's done mark still commits with its rows, never
 * before: a kill -9 leaves the windows not yet written open in the ledger, and the next run reads
 * them again (keyed merges make that harmless).
 */
export class SharedBatch {
  private rows: Row[] = [];
  private bytes = 0;
  private changes: Changes[] = [];
  /** The writes so far, in order: one at a time, each after the one before. */
  private tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly options: {
      readonly tracker: SchemaTracker;
      /** Rows held before a write (a window's batch: `batchRows / concurrency`). */
      readonly batchRows: number;
      readonly batchBytes: number;
      readonly deps: {
        readonly destination: Destination;
        readonly state: StateStore;
        readonly logger: Logger;
      };
      /** For log lines. */
      readonly resource: string;
      readonly scope: string;
    },
  ) {}

  /**
   * Take a window's last batch. Resolves once taken, or, when it fills the batch, once the write
   * is durable (so a stream's windows wait on their writes as they would on their own).
   */
  async add(rows: readonly Row[], changes: Changes): Promise<void> {
    for (const row of rows) {
      this.rows.push(row);
      this.bytes += rowBytes(row);
    }
    this.changes.push(changes);
    if (this.rows.length >= this.options.batchRows || this.bytes >= this.options.batchBytes) await this.flush();
  }

  /** Write what is held (rows and state, or state alone), after the writes before. */
  flush(): Promise<void> {
    const rows = this.rows;
    const changes = this.changes;
    this.rows = [];
    this.bytes = 0;
    this.changes = [];
    const next = this.tail.then(() => (changes.length === 0 ? undefined : this.write(rows, changes)));
    // A failed write fails whoever waits on it (the window that filled it, or the stream's end); the next one still runs.
    this.tail = next.catch(() => undefined);
    return next;
  }

  private async write(rows: readonly Row[], changes: readonly Changes[]): Promise<void> {
    const { deps, tracker } = this.options;
    const schema = tracker.schema;
    const written = await writeTogether(deps, schema, dedupeRows(rows, schema.key, schema.versionColumn), changes);
    for (const warning of written.warnings ?? [])
      deps.logger.warn({ resource: this.options.resource, project: this.options.scope }, warning);
  }
}
