/**
 * The BigQuery destination: batch load into a staging table, then one MERGE into the target.
 *
 * One `write(batch)`:
 *   1. dataset and table exist (created on first use: DAY partitions, clustered by `project_id` + key);
 *   2. columns the table lacks are added (tables.patch) BEFORE anything is loaded;
 *   3. the rows go as NDJSON in ONE load job (free; never streaming inserts / tabledata.insertAll)
 *      into `<table>__stage_<random>`, created with a 24 h expiration as a safety net;
 *   4. ONE MERGE query job upserts stage → target on (`project_id`, key), pruned to the partitions
 *      the batch touches; `write` resolves only once that job is DONE without errors, so the
 *      pipeline moves its state only when BigQuery has the rows;
 *   5. the staging table is dropped.
 *
 * Batching guidance. Each write costs one load job and one MERGE job per table, whatever its size,
 * so send few, large batches: a 15-minute schedule makes at most one load job per table per write
 * (96 a day per table, against BigQuery's 1,500 load jobs per table per day), and the MERGE bill is
 * driven by the target partitions scanned, not by the batch size. The pipeline sends large batches.
 *
 * Partitioning. `events` is partitioned by `DATE(timestamp)`. `traces` is keyed on `start_time_ns`,
 * an INT64 ns epoch, and BigQuery cannot partition on an expression over INT64: the table gets a
 * derived `_partition_date DATE` column, filled at load time with the UTC date of `start_time_ns`
 * (computed exactly from the bigint), and is partitioned on it.
 *
 * Retries. The client's own retry layer is switched off (`retryOptions.autoRetry: false`) so there
 * is exactly one: this file's, which retries only what BigQuery calls transient (`backendError`,
 * `internalError`, `rateLimitExceeded`, `jobBackendError`, `jobInternalError`, HTTP 5xx) with
 * exponential backoff and full jitter, for a bounded number of attempts. Job ids are deterministic
 * per staging table, so a retried jobs.insert whose first response was lost finds the job (409)
 * and waits on it instead of running it twice.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BigQuery, type BigQueryOptions, type Job } from '@google-cloud/bigquery';
import { silentLogger, type Logger } from '../core/log.js';
import type { ColumnDef, TableSchema } from '../core/types.js';
import { dedupeRows, type Destination, type LoadBatch, type LoadResult } from './destination.js';
import { BigQueryJobs, kindOf, MAX_BACKOFF_MS, type FinishedJob } from './bigquery-jobs.js';
import { BigQueryTables, logicalType, subjectOf, toField } from './bigquery-tables.js';
import {
  errorInfo,
  toQuerySyncError,
  type ErrorSubject,
  type RetryPolicy,
} from './bigquery-errors.js';
import { PARTITION_DATE_COLUMN, encodeRows, type PartitionRange } from './bigquery-rows.js';
import {
  STAGE_EXPIRATION_MS,
  bigQueryColumns,
  mergeSql,
  planLines,
  planWrite,
  quoteIdent,
  tablePath,
  validateTarget,
  type BigQueryColumn,
  type BigQueryTarget,
} from './bigquery-sql.js';

export interface BigQueryDestinationOptions {
  /** Project that owns the dataset and runs the jobs (`--bq-project`). */
  readonly projectId: string;
  /** Dataset the tables go in; created when missing (`--bq-dataset`). */
  readonly dataset: string;
  /**
   * Location of a dataset this creates, and of the jobs (`--bq-location`). An existing dataset's own
   * location wins. @default 'US'
   */
  readonly location?: string;
  /** API root, e.g. a local emulator or test double (`--bq-api-endpoint`). @default https://bigquery.googleapis.com */
  readonly apiEndpoint?: string;
  /** Service-account key file (`--bq-key-file`). @default Application Default Credentials */
  readonly keyFilename?: string;
  /** An auth client to use instead (tests inject a `PassThroughClient`). */
  readonly authClient?: BigQueryOptions['authClient'];
  /** Print the DDL, load target and MERGE each write would run, and send nothing. @default false */
  readonly dryRun?: boolean;
  /** Where dry-run lines go. @default a line on stdout */
  readonly print?: (line: string) => void;
  /** @default a silent logger */
  readonly logger?: Logger;
  /** Attempts per operation for transient errors, the first included. @default 5 */
  readonly maxAttempts?: number;
  /** Base of the exponential backoff between attempts. @default 1000 */
  readonly retryBaseMs?: number;
  /** Used for backoff and for polling jobs; tests pass one that does not wait. @default setTimeout */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Clock for the staging table's expiration. @default Date.now */
  readonly now?: () => number;
}

const DEFAULT_LOCATION = 'US';
const DEFAULT_MAX_ATTEMPTS = 5;
const DEFAULT_RETRY_BASE_MS = 1_000;

export class BigQueryDestination implements Destination {
  readonly kind = 'bigquery';
  private readonly client: BigQuery;
  private readonly target: BigQueryTarget;
  private readonly dryRun: boolean;
  private readonly print: (line: string) => void;
  private readonly log: Logger;
  private readonly retry: RetryPolicy;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly now: () => number;
  private readonly jobs: BigQueryJobs;
  private readonly tables: BigQueryTables;
  /** Writes to one table run one after another (no two MERGEs racing on a table). */
  private readonly queues = new Map<string, Promise<unknown>>();
  /** Dry run: the dataset and the columns already printed, so later writes print only ALTERs. */
  private dryRunSchemaPrinted = false;
  private readonly dryRunColumns = new Map<string, Set<string>>();

  constructor(options: BigQueryDestinationOptions) {
    this.target = { projectId: options.projectId, dataset: options.dataset };
    const location = options.location ?? DEFAULT_LOCATION;
    validateTarget(this.target, location);
    this.dryRun = options.dryRun ?? false;
    this.print = options.print ?? ((line: string) => void process.stdout.write(`${line}\n`));
    this.log = options.logger ?? silentLogger();
    this.retry = {
      maxAttempts: Math.max(1, options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS),
      baseMs: options.retryBaseMs ?? DEFAULT_RETRY_BASE_MS,
      maxMs: MAX_BACKOFF_MS,
    };
    this.sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
    this.now = options.now ?? Date.now;
    // Constructing the client sends nothing; credentials are looked up on the first request.
    this.client = new BigQuery({
      projectId: options.projectId,
      location,
      // One retry layer, ours (see the top of this file).
      retryOptions: { autoRetry: false, maxRetries: 0 },
      ...(options.apiEndpoint === undefined ? {} : { apiEndpoint: options.apiEndpoint }),
      ...(options.keyFilename === undefined ? {} : { keyFilename: options.keyFilename }),
      ...(options.authClient === undefined ? {} : { authClient: options.authClient }),
    });
    this.jobs = new BigQueryJobs({
      client: this.client,
      location: () => this.tables.location,
      retry: this.retry,
      sleep: this.sleep,
      log: this.log,
    });
    this.tables = new BigQueryTables({ client: this.client, target: this.target, location, jobs: this.jobs, log: this.log });
  }

  async describe(table: string): Promise<readonly ColumnDef[] | undefined> {
    if (this.dryRun) return undefined;
    const fields = await this.tables.fields(table);
    if (fields === undefined) return undefined;
    const columns: ColumnDef[] = [];
    for (const field of fields) {
      const name = field.name ?? '';
      if (name === PARTITION_DATE_COLUMN) continue; // ours, derived at load time
      const type = field.mode === 'REPEATED' ? undefined : logicalType(field.type);
      if (type === undefined) {
        this.log.warn(
          { table, column: name, type: field.type, mode: field.mode },
          'bigquery column of a type query-sync does not write; ignored',
        );
        continue;
      }
      columns.push({ name, type });
    }
    return columns;
  }

  write(batch: LoadBatch): Promise<LoadResult> {
    const name = batch.table.name;
    const previous = this.queues.get(name) ?? Promise.resolve();
    // Entries in `queues` never reject, so one failed write does not fail the next.
    const next = previous.then(() => this.writeNow(batch));
    this.queues.set(
      name,
      next.catch(() => undefined),
    );
    return next;
  }

  async count(table: string): Promise<number> {
    if (this.dryRun) return 0;
    if ((await this.tables.fields(table)) === undefined) return 0;
    const subject = this.subject(`count of table ${table}`, table);
    const sql = `SELECT COUNT(*) AS n FROM ${tablePath(this.target, table)}`;
    const base = `qs_count_${table}_${randomBytes(6).toString('hex')}`;
    const job = await this.jobs.run(subject, base, (jobId) => this.createQueryJob(sql, jobId));
    const [rows] = await this.jobs.retrying(subject, () =>
      this.client.job(job.jobId, { location: job.location }).getQueryResults({ maxResults: 1, autoPaginate: false }),
    ).catch((error: unknown) => {
      throw toQuerySyncError(error, subject);
    });
    const first: unknown = rows[0];
    const n = typeof first === 'object' && first !== null ? (first as Record<string, unknown>)['n'] : undefined;
    return Number(n ?? 0);
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()]);
  }

  private async writeNow(batch: LoadBatch): Promise<LoadResult> {
    const { table } = batch;
    const rows = dedupeRows(batch.rows, table.key, table.versionColumn);
    // Checked before anything is sent: names BigQuery would refuse, cells of the wrong type.
    quoteIdent(table.name);
    const columns = bigQueryColumns(table);
    columns.forEach((c) => quoteIdent(c.name));
    if (rows.length === 0) return { rows: 0 };
    const encoded = encodeRows(table, rows);
    const stage = `${table.name}__stage_${randomBytes(6).toString('hex')}`;

    if (this.dryRun) {
      this.printDryRun(table, stage, rows.length, encoded.range);
      return { rows: rows.length };
    }

    await this.tables.ensureDataset();
    const existing = await this.tables.ensureTable(table);
    await this.tables.addMissingColumns(table, existing, columns);

    await this.createStage(table, stage, columns);
    try {
      const load = await this.load(table, stage, encoded.ndjson);
      const merge = await this.merge(table, stage, encoded.range === undefined ? {} : { range: encoded.range });
      const bytes = merge.metadata.statistics?.query?.totalBytesProcessed;
      const bytesProcessed = bytes === undefined || bytes === null ? undefined : Number(bytes);
      this.log.info(
        {
          table: table.name,
          rows: rows.length,
          loadJob: load.jobId,
          mergeJob: merge.jobId,
          bytesProcessed,
          bytesBilled: numberOrUndefined(merge.metadata.statistics?.query?.totalBytesBilled),
          affectedRows: numberOrUndefined(merge.metadata.statistics?.query?.numDmlAffectedRows),
        },
        'bigquery merge done',
      );
      return bytesProcessed === undefined ? { rows: rows.length } : { rows: rows.length, bytesProcessed };
    } finally {
      await this.dropStage(table, stage);
    }
  }

  private printDryRun(
    table: TableSchema,
    stage: string,
    rowCount: number,
    range: PartitionRange | undefined,
  ): void {
    const printed = this.dryRunColumns.get(table.name);
    const columns = bigQueryColumns(table);
    const plan = planWrite({
      target: this.target,
      location: this.tables.location,
      table,
      stage,
      rowCount,
      ...(range === undefined ? {} : { range }),
      createSchema: !this.dryRunSchemaPrinted,
      createTable: printed === undefined,
      newColumns: printed === undefined ? [] : columns.filter((c) => !printed.has(c.name)),
    });
    this.dryRunSchemaPrinted = true;
    this.dryRunColumns.set(table.name, new Set([...(printed ?? []), ...columns.map((c) => c.name)]));
    this.print(`-- bigquery dry run: ${rowCount} row(s) for table ${table.name}; nothing is sent`);
    for (const statement of planLines(plan)) this.print(statement);
  }

  // ---- one write ---------------------------------------------------------------------------

  private async createStage(table: TableSchema, stage: string, columns: readonly BigQueryColumn[]): Promise<void> {
    const subject = this.subject(`creation of staging table ${stage}`, table.name);
    try {
      await this.jobs.retrying(subject, () =>
        this.client.dataset(this.target.dataset, { location: this.tables.location }).createTable(stage, {
          schema: { fields: columns.map(toField) },
          expirationTime: String(this.now() + STAGE_EXPIRATION_MS),
          labels: { 'query-sync': 'stage' },
        }),
      );
    } catch (error) {
      if (kindOf(error) !== 'alreadyExists') throw toQuerySyncError(error, subject);
    }
  }

  private async load(table: TableSchema, stage: string, ndjson: string): Promise<FinishedJob> {
    const subject = this.subject(`load job into ${stage}`, table.name);
    const dir = await mkdtemp(join(tmpdir(), 'query-sync-bq-'));
    const file = join(dir, `${stage}.ndjson`);
    try {
      await writeFile(file, ndjson, 'utf8');
      const stageTable = this.client.dataset(this.target.dataset, { location: this.tables.location }).table(stage);
      return await this.jobs.run(subject, `qs_load_${stage}`, async (jobId) => {
        const [job] = await stageTable.createLoadJob(file, {
          jobId,
          sourceFormat: 'NEWLINE_DELIMITED_JSON',
          // The stage was created empty a moment ago: a second copy of the rows is an error, never a duplicate.
          writeDisposition: 'WRITE_EMPTY',
          createDisposition: 'CREATE_NEVER',
          ignoreUnknownValues: false,
          maxBadRecords: 0,
        });
        return job;
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  private async merge(
    table: TableSchema,
    stage: string,
    range: { readonly range?: PartitionRange },
  ): Promise<FinishedJob> {
    const sql = mergeSql({ target: this.target, table, stage, ...range });
    const subject = this.subject(`MERGE into table ${table.name}`, table.name);
    return this.jobs.run(subject, `qs_merge_${stage}`, (jobId) => this.createQueryJob(sql, jobId));
  }

  private async dropStage(table: TableSchema, stage: string): Promise<void> {
    const subject = this.subject(`drop of staging table ${stage}`, table.name);
    try {
      await this.jobs.retrying(subject, () =>
        this.client.dataset(this.target.dataset).table(stage).delete({ ignoreNotFound: true }),
      );
    } catch (error) {
      // The rows are merged (or the write already failed); the table expires on its own.
      this.log.warn(
        { table: table.name, stage, err: errorInfo(error).message },
        'bigquery staging table not dropped; it expires in 24 h',
      );
    }
  }

  private async createQueryJob(query: string, jobId: string): Promise<Job> {
    const [job] = await this.client.createQueryJob({ query, jobId, location: this.tables.location, useLegacySql: false });
    return job;
  }

  private subject(operation: string, table?: string): ErrorSubject {
    return subjectOf(this.target, operation, table);
  }
}

function numberOrUndefined(value: string | number | null | undefined): number | undefined {
  return value === undefined || value === null ? undefined : Number(value);
}
