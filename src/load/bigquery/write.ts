import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BigQuery, Job } from '@google-cloud/bigquery';
import type { Logger } from '../../core/log.js';
import type { StateCommit } from '../../core/state-table.js';
import type { Row, TableSchema } from '../../core/types.js';
import type { LoadBatch } from '../destination.js';
import type { GroupResult, PreparedGroup } from './coalesce.js';
import { LOAD_OPTIONS, stageResource, type StageResource } from './dry-run.js';
import { errorInfo, toQuerySyncError, type ErrorSubject } from './errors.js';
import { kindOf, type BigQueryJobs, type FinishedJob } from './jobs.js';
import { logTable } from './log.js';
import type { BigQueryLogLayout } from './log-layout.js';
import {
  PartitionDateSet,
  ROW_HASH_COLUMN,
  encodeRow,
  partitionSpec,
  type PartitionDates,
  type BigQueryPartitioning,
} from './rows.js';
import {
  bigQueryColumns,
  bridgeScript,
  mergeSql,
  quoteIdent,
  tablePath,
  type BigQueryColumn,
  type BigQueryTarget,
} from './sql.js';
import { commitWrites, transactionSql, type QueryParams } from './state.js';
import { subjectOf } from './fields.js';
import type { BigQueryTables } from './tables.js';

/**
 * One write of a group with rows (steps 1–5 at the top of `destination.ts`): the dataset and tables
 * ready, the rows as NDJSON files, each loaded into a staging table and merged (or, for a table in
 * the change-log layout, appended to its log), the state with the last MERGE.
 */

/**
 * A full-refresh batch is checked against the table's hashes (one query) only up to this many rows:
 * the IN list must stay well under BigQuery's 1 MB query text limit
 * (https://cloud.google.com/bigquery/quotas#query_jobs). Larger ones go straight to the MERGE,
 * which still rewrites only changed rows.
 */
const MAX_HASH_CHECK_ROWS = 5_000;

/** One load file: where it is, how many rows, the dates it touches. */
interface StagedFile {
  readonly file: string;
  readonly rows: number;
  readonly bytes: number;
  readonly partitions: PartitionDates | undefined;
}

/** What a write uses of the destination that owns it. */
export interface WriterContext {
  readonly client: BigQuery;
  readonly target: BigQueryTarget;
  readonly tables: BigQueryTables;
  readonly jobs: BigQueryJobs;
  readonly logLayout: BigQueryLogLayout;
  readonly log: Logger;
  readonly now: () => number;
  readonly maxBatchBytes: number;
  /** The schema each table was last written with: a refresh recreates a view from it. */
  readonly schemas: Map<string, TableSchema>;
  readonly writeState: (commit: StateCommit) => Promise<void>;
  /** Runs a job that writes `_query_sync_state` (or the trace book) when no other such job runs. */
  readonly stateTurn: <T>(job: () => Promise<T>) => Promise<T>;
  /** The state table (and the trace book, when `commit` appends to it). */
  readonly ensureStateTable: (commit: StateCommit) => Promise<void>;
  readonly select: (operation: string, table: string, sql: string) => Promise<Record<string, unknown>[]>;
  readonly createQueryJob: (query: string, jobId: string, params?: QueryParams) => Promise<Job>;
}

export class BigQueryWriter {
  constructor(private readonly c: WriterContext) {}

  /** A group with rows (checked: `prepareGroup`, `checkCells`): to the change log, or staged and merged. */
  async write(
    group: PreparedGroup,
    hashes: readonly string[] | undefined,
    spec: BigQueryPartitioning,
  ): Promise<GroupResult> {
    const { table, columns, rows, rowsPerBatch, state } = group;
    await this.c.tables.ensureDataset();
    this.c.schemas.set(table.name, table);
    if ((await this.c.logLayout.layout(table)) === 'log')
      return this.writeLog(table, columns, rows, state, rowsPerBatch);
    const existing = await this.c.tables.ensureTable(table);
    await this.c.tables.addMissingColumns(table, existing, columns);
    for (const bridge of table.bridges ?? []) {
      const bridgeColumns = bigQueryColumns(bridge.table);
      await this.c.tables.addMissingColumns(bridge.table, await this.c.tables.ensureTable(bridge.table), bridgeColumns);
    }
    if (hashes !== undefined && (await this.unchanged(table, hashes))) {
      this.c.log.info(
        { table: table.name, rows: rows.length },
        'bigquery full-refresh batch unchanged; nothing loaded or merged',
      );
      if (state !== undefined) await this.c.writeState(state);
      return { bytesProcessed: undefined, rowsPerBatch };
    }
    if (state !== undefined) await this.c.ensureStateTable(state);

    const dir = await mkdtemp(join(tmpdir(), 'query-sync-bq-'));
    let bytesProcessed: number | undefined;
    try {
      const prune = this.c.tables.prunesOn(table.name, spec.field);
      const one = async (staged: StagedFile, withState: StateCommit | undefined): Promise<void> => {
        const bytes = await this.loadAndMerge(
          table,
          columns,
          prune ? staged : { ...staged, partitions: undefined },
          withState,
        );
        if (bytes !== undefined) bytesProcessed = (bytesProcessed ?? 0) + bytes;
        await rm(staged.file, { force: true });
      };
      // The state describes the whole batch: it rides with the MERGE of the last file.
      let previous: StagedFile | undefined;
      for await (const staged of this.stageFiles(dir, table, rows, hashes)) {
        if (previous !== undefined) await one(previous, undefined);
        previous = staged;
      }
      if (previous !== undefined) await one(previous, state);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    return { bytesProcessed, rowsPerBatch };
  }

  /**
   * A batch of a table in the change-log layout: the log and view made ready, each file appended by
   * a load job (free: no query is billed), then the state. A crash between the last load and the
   * state replays the batch: its rows are loaded again, identical, and the view shows one of them.
   */
  private async writeLog(
    table: TableSchema,
    columns: readonly BigQueryColumn[],
    rows: readonly Row[],
    state: StateCommit | undefined,
    rowsPerBatch: ReadonlyMap<LoadBatch, number>,
  ): Promise<GroupResult> {
    await this.c.logLayout.prepare(table, columns);
    const dir = await mkdtemp(join(tmpdir(), 'query-sync-bq-'));
    try {
      for await (const staged of this.stageFiles(dir, table, rows, undefined)) {
        const load = await this.c.logLayout.append(table, staged.file);
        this.c.log.info(
          {
            table: table.name,
            log: logTable(table.name),
            rows: staged.rows,
            ndjsonBytes: staged.bytes,
            loadJob: load.jobId,
          },
          'bigquery rows appended to the change log',
        );
        await rm(staged.file, { force: true });
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    if (state !== undefined) await this.c.writeState(state);
    return { bytesProcessed: undefined, rowsPerBatch };
  }

  /** Whether every row's hash is already in the table: then the batch changes nothing. */
  private async unchanged(table: TableSchema, hashes: readonly string[]): Promise<boolean> {
    if (hashes.length > MAX_HASH_CHECK_ROWS) return false;
    const distinct = [...new Set(hashes)];
    const sql =
      `SELECT COUNT(DISTINCT ${quoteIdent(ROW_HASH_COLUMN)}) AS n FROM ${tablePath(this.c.target, table.name)} ` +
      `WHERE ${quoteIdent(ROW_HASH_COLUMN)} IN (${distinct.map((h) => `'${h}'`).join(', ')})`;
    const rows = await this.c.select(`unchanged-rows check of table ${table.name}`, table.name, sql);
    return Number(rows[0]?.['n'] ?? 0) === distinct.length;
  }

  /**
   * The rows as NDJSON files of at most `maxBatchBytes`, written through a stream (a batch is never
   * one JS string), each with the partition dates it touches.
   */
  private async *stageFiles(
    dir: string,
    table: TableSchema,
    rows: readonly Row[],
    hashes: readonly string[] | undefined,
  ): AsyncGenerator<StagedFile> {
    const spec = partitionSpec(table);
    let index = 0;
    let part = 0;
    while (index < rows.length) {
      const file = join(dir, `part-${part}.ndjson`);
      part += 1;
      const out = createWriteStream(file, { encoding: 'utf8' });
      const dates = new PartitionDateSet();
      let bytes = 0;
      let count = 0;
      try {
        while (index < rows.length) {
          const encoded = encodeRow(table, rows[index] as Row, spec, hashes?.[index]);
          const size = Buffer.byteLength(encoded.line, 'utf8');
          if (count > 0 && bytes + size > this.c.maxBatchBytes) break;
          dates.add(encoded.date);
          bytes += size;
          count += 1;
          index += 1;
          if (!out.write(encoded.line)) await new Promise<void>((resolve) => out.once('drain', resolve));
        }
      } finally {
        await new Promise<void>((resolve, reject) => {
          out.once('error', reject);
          out.end(resolve);
        });
      }
      yield { file, rows: count, bytes, partitions: dates.value() };
    }
  }

  /** One file: stage, load, MERGE, drop the stage. Resolves when the MERGE is DONE. */
  private async loadAndMerge(
    table: TableSchema,
    columns: readonly BigQueryColumn[],
    staged: StagedFile,
    state?: StateCommit,
  ): Promise<number | undefined> {
    const stage = `${table.name}__stage_${randomBytes(6).toString('hex')}`;
    await this.createStage(table, stage, columns);
    try {
      const load = await this.load(table, stage, staged.file);
      // With bridge tables the state goes last, in a job of its own: MERGE, bridge rewrite, state.
      // Exact under a kill at any of them: until the state is written the batch is not
      // acknowledged, and the resumed run writes all three again (each is idempotent).
      const bridges = table.bridges ?? [];
      const merge = await this.merge(table, stage, staged.partitions, bridges.length === 0 ? state : undefined);
      // Bridge tables right after their parent's MERGE, from the parent rows as stored.
      const parentColumns = new Set(columns.map((c) => c.name));
      for (const bridge of bridges) {
        const sql = bridgeScript({
          target: this.c.target,
          parent: table,
          bridge,
          stage,
          parentHasSource: parentColumns.has(bridge.sourceColumn),
          ...(staged.partitions === undefined ? {} : { partitions: staged.partitions }),
        });
        await this.c.jobs.run(
          this.subject(`rewrite of bridge table ${bridge.table.name}`, bridge.table.name),
          `qs_bridge_${bridge.table.name}_${stage}`,
          (jobId) => this.c.createQueryJob(sql, jobId),
        );
      }
      if (bridges.length > 0 && state !== undefined) await this.c.writeState(state);
      const bytes = merge.metadata.statistics?.query?.totalBytesProcessed;
      const bytesProcessed = bytes === undefined || bytes === null ? undefined : Number(bytes);
      this.c.log.info(
        {
          table: table.name,
          rows: staged.rows,
          ndjsonBytes: staged.bytes,
          partitions: staged.partitions?.dates.length,
          loadJob: load.jobId,
          mergeJob: merge.jobId,
          bytesProcessed,
          bytesBilled: numberOrUndefined(merge.metadata.statistics?.query?.totalBytesBilled),
          affectedRows: numberOrUndefined(merge.metadata.statistics?.query?.numDmlAffectedRows),
        },
        'bigquery merge done',
      );
      return bytesProcessed;
    } finally {
      await this.dropStage(table, stage);
    }
  }

  private stageResource(columns: readonly BigQueryColumn[]): StageResource {
    return stageResource(columns, this.c.now());
  }

  private async createStage(table: TableSchema, stage: string, columns: readonly BigQueryColumn[]): Promise<void> {
    const subject = this.subject(`creation of staging table ${stage}`, table.name);
    try {
      await this.c.jobs.retrying(subject, () =>
        this.c.client
          .dataset(this.c.target.dataset, { location: this.c.tables.location })
          .createTable(stage, this.stageResource(columns)),
      );
    } catch (error) {
      if (kindOf(error) !== 'alreadyExists') throw toQuerySyncError(error, subject);
    }
  }

  private async load(table: TableSchema, stage: string, file: string): Promise<FinishedJob> {
    const subject = this.subject(`load job into ${stage}`, table.name);
    const stageTable = this.c.client
      .dataset(this.c.target.dataset, { location: this.c.tables.location })
      .table(stage, { location: this.c.tables.location });
    return this.c.jobs.run(subject, `qs_load_${stage}`, async (jobId) => {
      const [job] = await stageTable.createLoadJob(file, { jobId, ...LOAD_OPTIONS });
      return job;
    });
  }

  /** The MERGE of one staged file; with `state`, in one transaction with the state's MERGE and its trace-book reads. */
  private async merge(
    table: TableSchema,
    stage: string,
    partitions: PartitionDates | undefined,
    state?: StateCommit,
  ): Promise<FinishedJob> {
    const sql = mergeSql({ target: this.c.target, table, stage, ...(partitions === undefined ? {} : { partitions }) });
    const subject = this.subject(`MERGE into table ${table.name}`, table.name);
    if (state === undefined)
      return this.c.jobs.run(subject, `qs_merge_${stage}`, (jobId) => this.c.createQueryJob(sql, jobId));
    const writes = commitWrites(this.c.target, state.rows, state.traceReads ?? []);
    if (writes.statements.length === 0)
      return this.c.jobs.run(subject, `qs_merge_${stage}`, (jobId) => this.c.createQueryJob(sql, jobId));
    const script = transactionSql([sql, ...writes.statements]);
    return this.c.stateTurn(() =>
      this.c.jobs.run(subject, `qs_merge_${stage}`, (jobId) => this.c.createQueryJob(script, jobId, writes.params)),
    );
  }

  private async dropStage(table: TableSchema, stage: string): Promise<void> {
    const subject = this.subject(`drop of staging table ${stage}`, table.name);
    try {
      await this.c.jobs.retrying(subject, () =>
        this.c.client.dataset(this.c.target.dataset).table(stage).delete({ ignoreNotFound: true }),
      );
    } catch (error) {
      // The rows are merged (or the write already failed); the table expires on its own.
      this.c.log.warn(
        { table: table.name, stage, err: errorInfo(error).message },
        'bigquery staging table not dropped; it expires in 24 h',
      );
    }
  }

  private subject(operation: string, table?: string): ErrorSubject {
    return subjectOf(this.c.target, operation, table);
  }
}

function numberOrUndefined(value: string | number | null | undefined): number | undefined {
  return value === undefined || value === null ? undefined : Number(value);
}
