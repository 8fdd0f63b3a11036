import { randomBytes } from 'node:crypto';
import type { BigQuery, TableMetadata } from '@google-cloud/bigquery';
import { LoadError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { TableSchema } from '../../core/types.js';
import { SYNCED_AT_COLUMN } from '../../core/table-schema.js';
import { LOAD_OPTIONS } from './dry-run.js';
import { toQuerySyncError } from './errors.js';
import type { BigQueryJobs, FinishedJob } from './jobs.js';
import {
  compactedAtMs,
  compactionLabels,
  compactLogSql,
  latestViewSql,
  logCandidate,
  logResource,
  logTable,
  MERGE_BACKUP_SUFFIX,
  renameTableSql,
  seedLogSql,
} from './log.js';
import type { BigQueryColumn, BigQueryTarget } from './sql.js';
import { subjectOf, toField } from './fields.js';
import type { BigQueryTables } from './tables.js';

/**
 * Which layout a keyed table has in BigQuery, and the work of the change-log layout (SQL in
 * `log.ts`): creating the log and the view, adding columns to both, appending a batch
 * (a load job: free), compacting, and migrating a table of the merge layout.
 *
 * - `auto` (the default): a table that does not exist yet gets the log layout; an existing table
 *   keeps the merge layout (one MERGE a run), with a warning that says how to migrate.
 * - `log`: as `auto`, and an existing table of the merge layout is migrated on the first write
 *   (seed the log from it, rename it to `<table>_merge_layout`, create the view).
 * - `merge`: new tables get the merge layout. A table already in the log layout stays in it.
 */
export type UpsertLayout = 'auto' | 'log' | 'merge';

/** Default time between compactions of a change log (the bench's figures assume a day). */
export const DEFAULT_COMPACT_EVERY_MS = 24 * 60 * 60 * 1000;

export interface LogLayoutOptions {
  readonly client: BigQuery;
  readonly target: BigQueryTarget;
  readonly tables: BigQueryTables;
  readonly jobs: BigQueryJobs;
  readonly log: Logger;
  readonly now: () => number;
  readonly mode: UpsertLayout;
  /** A log older than this (since its creation or last compaction) is compacted before the next append. */
  readonly compactEveryMs: number;
  /** Run one query job (DDL or a CTAS) and wait for it. */
  readonly query: (operation: string, table: string, sql: string) => Promise<FinishedJob>;
}

/** Whether a table missing from the dataset is to be created in the log layout under `mode`. */
export function wantsLogForNew(mode: UpsertLayout, table: TableSchema): boolean {
  return mode !== 'merge' && logCandidate(table);
}

export class BigQueryLogLayout {
  private readonly o: LogLayoutOptions;
  /** Layout per table name, decided once per process. */
  readonly #layouts = new Map<string, Promise<'log' | 'merge'>>();
  readonly #warned = new Set<string>();

  constructor(options: LogLayoutOptions) {
    this.o = options;
  }

  /** The layout writes of `table` use; migrates it first with `--bq-upsert log`. */
  layout(table: TableSchema): Promise<'log' | 'merge'> {
    if (!logCandidate(table)) return Promise.resolve('merge');
    let found = this.#layouts.get(table.name);
    if (found === undefined) {
      found = this.decide(table);
      this.#layouts.set(table.name, found);
      found.catch(() => this.#layouts.delete(table.name));
    }
    return found;
  }

  /** Whether `table` already is in the log layout (its name a view, or only its log exists). */
  async isLog(table: string): Promise<boolean> {
    const meta = await this.o.tables.metadata(table);
    if (meta !== undefined)
      return meta.type === 'VIEW' && (await this.o.tables.metadata(logTable(table))) !== undefined;
    return (await this.o.tables.metadata(logTable(table))) !== undefined;
  }

  /** Whether a table missing from the dataset is to be created in the log layout. */
  wantsLogForNew(table: TableSchema): boolean {
    return wantsLogForNew(this.o.mode, table);
  }

  private async decide(table: TableSchema): Promise<'log' | 'merge'> {
    // A table this run found missing is asked about again: a backfill beside the sync may have made it.
    const meta = await this.o.tables.metadata(table.name, 'if-missing');
    if (meta?.type === 'VIEW') {
      if ((await this.o.tables.metadata(logTable(table.name), 'if-missing')) !== undefined) return 'log';
      throw new LoadError(
        `BigQuery: ${table.name} in ${this.o.target.projectId}.${this.o.target.dataset} is a view but its change log ${logTable(table.name)} ` +
          `does not exist; query-sync writes ${table.name} through that log. Drop the view (or restore the log), then sync again`,
        false,
        { context: { resource: table.name } },
      );
    }
    if (meta !== undefined) {
      if (this.o.mode === 'log') {
        await this.migrate(table, meta);
        return 'log';
      }
      if (!this.#warned.has(table.name)) {
        this.#warned.add(table.name);
        this.o.log.warn(
          { table: table.name },
          `bigquery table ${table.name} has the merge layout: each run's MERGE is billed for most of the table. ` +
            `To move it to the change-log layout (a free load job a run, a compaction a day): sync once with --bq-upsert log ` +
            `(seeds ${logTable(table.name)} from it, renames it to ${table.name}${MERGE_BACKUP_SUFFIX}, creates the view ${table.name}; ` +
            `see docs/bigquery-cost.md)`,
        );
      }
      return 'merge';
    }
    if ((await this.o.tables.metadata(logTable(table.name), 'if-missing')) !== undefined) return 'log';
    return this.o.mode === 'merge' ? 'merge' : 'log';
  }

  /**
   * Make the log and the view ready for a batch with `columns`: the log created (or given the
   * columns it lacks), the view (re)defined when its columns differ from the log's, and the log
   * compacted when its last compaction is older than `compactEveryMs`.
   */
  async prepare(table: TableSchema, columns: readonly BigQueryColumn[]): Promise<void> {
    const log: TableSchema = { ...table, name: logTable(table.name) };
    const existing = await this.o.tables.ensureTable(log, logResource(table, columns.map(toField), this.o.now()));
    await this.o.tables.addMissingColumns(log, existing, columns);
    const logMeta = await this.o.tables.metadata(log.name);
    const names = (logMeta?.schema?.fields ?? []).map((f) => f.name ?? '');
    await this.refreshView(table, names);
    const compacted = logMeta === undefined ? undefined : compactedAtMs(logMeta);
    if (compacted !== undefined && this.o.now() - compacted >= this.o.compactEveryMs) await this.compact(table);
  }

  /** (Re)define the view when its columns are not the log's (new columns, a refresh, a crash in between). */
  async refreshView(table: TableSchema, logColumns?: readonly string[]): Promise<void> {
    const names =
      logColumns ??
      ((await this.o.tables.metadata(logTable(table.name)))?.schema?.fields ?? []).map((f) => f.name ?? '');
    const view = await this.o.tables.metadata(table.name);
    if (view !== undefined && view.type !== 'VIEW') {
      throw new LoadError(
        `BigQuery: ${table.name} in ${this.o.target.projectId}.${this.o.target.dataset} is a ${view.type ?? 'TABLE'}, expected the view over ` +
          `${logTable(table.name)}; rename or drop it (or sync with --bq-upsert log to migrate it), then sync again`,
        false,
        { context: { resource: table.name } },
      );
    }
    const current = (view?.schema?.fields ?? []).map((f) => f.name ?? '');
    if (view !== undefined && current.join(',') === names.join(',')) return;
    await this.o.query(
      `definition of view ${table.name} over ${logTable(table.name)}`,
      table.name,
      latestViewSql(this.o.target, table, names),
    );
    this.o.tables.forget(table.name);
    this.o.log.info({ table: table.name, log: logTable(table.name) }, 'bigquery view of the latest rows defined');
  }

  /**
   * Delete the log's superseded rows (`compactLogSql`: safe while another process appends), then
   * stamp the log's label with the time the compaction started. A crash or failure before the label
   * leaves the old time: the next run compacts again, finding little left to delete.
   */
  async compact(table: TableSchema): Promise<void> {
    const log = logTable(table.name);
    const startedAt = this.o.now();
    const job = await this.o.query(`compaction of ${log}`, table.name, compactLogSql(this.o.target, table));
    const subject = subjectOf(this.o.target, `labelling ${log} as compacted`, table.name);
    // A labels-only tables.patch, without an etag: appends change the etag, and labels do not race
    // with them. Both labels are sent, so the result is the same whether BigQuery merges or replaces.
    await this.o.jobs
      .retrying(subject, () =>
        this.o.client
          .dataset(this.o.target.dataset)
          .table(log)
          .setMetadata({ labels: Object.fromEntries(compactionLabels(startedAt)) }),
      )
      .catch((error: unknown) => {
        throw toQuerySyncError(error, subject);
      });
    this.o.tables.forget(log);
    this.o.log.info(
      {
        table: table.name,
        log,
        rowsDeleted: job.metadata.statistics?.query?.numDmlAffectedRows,
        bytesBilled: job.metadata.statistics?.query?.totalBytesBilled,
      },
      'bigquery change log compacted: superseded rows deleted',
    );
  }

  /** Append one NDJSON file to the log with a load job (free); resolves when it is DONE. */
  append(table: TableSchema, file: string): Promise<FinishedJob> {
    const log = logTable(table.name);
    const subject = subjectOf(this.o.target, `load job appending to ${log}`, table.name);
    const destination = this.o.client
      .dataset(this.o.target.dataset, { location: this.o.tables.location })
      .table(log, { location: this.o.tables.location });
    return this.o.jobs.run(subject, `qs_append_${log}_${randomBytes(6).toString('hex')}`, async (jobId) => {
      const [job] = await destination.createLoadJob(file, { jobId, ...LOAD_OPTIONS, writeDisposition: 'WRITE_APPEND' });
      return job;
    });
  }

  /**
   * `--bq-upsert log` on a table of the merge layout: the log built from it (one CTAS, billed one
   * scan of the table), the table renamed aside, then the view created (by `prepare`). Each step can
   * be rerun: a crash after the CTAS redoes it; after the rename, only the log exists and `decide`
   * takes the log layout. Refused, before anything changes, when the name it would move the table
   * to is taken.
   */
  private async migrate(table: TableSchema, meta: TableMetadata): Promise<void> {
    const backup = `${table.name}${MERGE_BACKUP_SUFFIX}`;
    const where = `${this.o.target.projectId}.${this.o.target.dataset}`;
    if ((await this.o.tables.metadata(backup)) !== undefined) {
      throw new LoadError(
        `BigQuery: --bq-upsert log would move table ${table.name} of ${where} aside to ${backup}, but ${backup} exists ` +
          `(an earlier migration's copy?). Drop or rename ${backup}, then sync again; nothing was changed`,
        false,
        { context: { resource: table.name } },
      );
    }
    const columns = (meta.schema?.fields ?? []).map((f) => f.name ?? '');
    if (!columns.includes(SYNCED_AT_COLUMN)) {
      throw new LoadError(
        `BigQuery: table ${table.name} of ${where} has no ${SYNCED_AT_COLUMN} column to partition its change log on; ` +
          `--bq-upsert log cannot migrate it. Sync it with --full-refresh first; nothing was changed`,
        false,
        { context: { resource: table.name } },
      );
    }
    this.o.log.warn(
      { table: table.name, log: logTable(table.name), backup },
      'bigquery migrating table to the change-log layout',
    );
    await this.o.query(
      `seeding of ${logTable(table.name)} from ${table.name}`,
      table.name,
      seedLogSql(this.o.target, table, table.name, columns, this.o.now()),
    );
    this.o.tables.forget(logTable(table.name));
    await this.o.query(
      `renaming of ${table.name} to ${backup}`,
      table.name,
      renameTableSql(this.o.target, table.name, backup),
    );
    this.o.tables.forget(table.name);
    this.o.tables.forget(backup);
  }
}
