import type { LeaseProvider } from '../../state/leases/lease.js';
import type { StateCommit, StateRow } from '../../core/state-table.js';
import type { ColumnDef } from '../../core/types.js';
import { BigQueryDestination, DEFAULT_LOCATION, type BigQueryDestinationOptions } from './destination.js';
import { checkCells, prepareGroup, WriteCoalescer, type GroupResult } from './coalesce.js';
import { BigQueryDryRun } from './dry-run.js';
import { logTable } from './log.js';
import { wantsLogForNew, type UpsertLayout } from './log-layout.js';
import {
  capabilitiesOf,
  type BillingTotals,
  type Capabilities,
  type Destination,
  type LoadBatch,
  type LoadResult,
  type TableSwap,
  type ViewDialect,
  type WindowCount,
} from '../destination.js';

/**
 * `--dry-run` as a decorator of the BigQuery destination: each write prints what it would send
 * (`BigQueryDryRun`) and sends nothing; reads answer as for an empty dataset (nothing is looked
 * up); refreshes, drops and views do nothing. The destination it wraps stays for what a dry run
 * still asks of it (where the state lives, the lease, the billing totals: none), so
 * `destination.ts` holds no dry-run branch.
 */

export interface BigQueryOpenOptions extends BigQueryDestinationOptions {
  /** Print the requests each write would send, and send nothing. @default false */
  readonly dryRun?: boolean;
  /** Where dry-run lines go. @default a line on stdout */
  readonly print?: (line: string) => void;
}

/** The BigQuery destination the options ask for: the real one, or its dry run. */
export function openBigQuery(options: BigQueryOpenOptions): Destination {
  return options.dryRun === true ? new BigQueryDryRunDestination(options) : new BigQueryDestination(options);
}

export class BigQueryDryRunDestination implements Destination {
  readonly kind = 'bigquery';
  /** What the real destination offers, answered without sending anything (counts 0, state none). */
  readonly can: Capabilities;
  private readonly inner: BigQueryDestination;
  private readonly print: (line: string) => void;
  private readonly printer: BigQueryDryRun;
  /** Nothing is looked up, so every job would run in the configured location. */
  private readonly location: string;
  private readonly upsert: UpsertLayout;
  /** Writes grouped as the real destination groups them, so the printed writes are the same. */
  private readonly coalescer = new WriteCoalescer((batches) => this.writeGroup(batches));

  constructor(options: Omit<BigQueryOpenOptions, 'dryRun'>) {
    this.inner = new BigQueryDestination(options);
    this.print = options.print ?? ((line: string) => void process.stdout.write(`${line}\n`));
    this.location = options.location ?? DEFAULT_LOCATION;
    this.upsert = options.upsert ?? 'auto';
    this.printer = new BigQueryDryRun(
      { projectId: options.projectId, dataset: options.dataset },
      this.print,
      options.now ?? Date.now,
    );
    this.can = capabilitiesOf(this);
  }

  get stateLocation(): string {
    return this.inner.stateLocation;
  }

  get leases(): LeaseProvider {
    return this.inner.leases;
  }

  billing(): BillingTotals {
    return this.inner.billing();
  }

  describe(_table: string): Promise<readonly ColumnDef[] | undefined> {
    return Promise.resolve(undefined);
  }

  write(batch: LoadBatch): Promise<LoadResult> {
    return this.coalescer.write(batch);
  }

  readState(): Promise<readonly StateRow[]> {
    return Promise.resolve([]);
  }

  writeState(commit: StateCommit): Promise<void> {
    return this.inner.writeState(commit);
  }

  count(_table: string): Promise<number> {
    return Promise.resolve(0);
  }

  countWindow(_table: string, _window: WindowCount): Promise<number> {
    return Promise.resolve(0);
  }

  countByProject(_table: string): Promise<Readonly<Record<string, number>>> {
    return Promise.resolve({});
  }

  replaceTables(_swaps: readonly TableSwap[]): Promise<void> {
    return Promise.resolve();
  }

  dropTable(_table: string): Promise<void> {
    return Promise.resolve();
  }

  defineView(_name: string, _select: (sql: ViewDialect) => string): Promise<void> {
    return Promise.resolve();
  }

  async close(): Promise<void> {
    await this.coalescer.drain();
    await this.inner.close();
  }

  /** The checks of a real write (names, cells), then the printout; the state is not written. */
  private async writeGroup(batches: readonly LoadBatch[]): Promise<GroupResult> {
    const { table, rows, rowsPerBatch } = prepareGroup(batches);
    if (rows.length === 0) return { bytesProcessed: undefined, rowsPerBatch };
    const { hashes } = checkCells(table, rows);
    // A dry run looks nothing up, so it cannot tell the layout of an existing table: it says both.
    if (wantsLogForNew(this.upsert, table)) {
      this.print(
        `-- ${table.name}: in the change-log layout (a new table, or one already there) this write is instead one load job ` +
          `appending to ${logTable(table.name)} (WRITE_APPEND) and no MERGE; below, the merge layout's (docs/bigquery-cost.md)`,
      );
    }
    this.printer.write(table, rows, hashes, this.location);
    return { bytesProcessed: undefined, rowsPerBatch };
  }
}
