/**
 * The BigQuery destination: batch load into a staging table, then one MERGE into the target.
 *
 * One write (one or more batches of one table, see Coalescing):
 *   1. dataset and table exist (created on first use: DAY partitions, clustered by `project_id` + key,
 *      expiration off); every job runs in the dataset's own location;
 *   2. columns the table lacks are added (tables.patch, re-read + etag) BEFORE anything is loaded;
 *   3. the rows are streamed as NDJSON to a temp file, at most `maxBatchBytes` per file, and each
 *      file goes in ONE load job (free; never streaming inserts) into `<table>__stage_<random>`,
 *      created with a 24 h expiration as a safety net;
 *   4. ONE MERGE query job per file upserts stage → target on (`project_id`, key), pruned to the
 *      exact partition dates of the rows (an IN list of literal dates); `write` resolves only once
 *      that job is DONE without errors, so the pipeline moves its state only when BigQuery has the rows;
 *   5. the staging table is dropped.
 *
 * Coalescing. Writes to one table run one after another; writes that arrive while one runs (the
 * per-project walks of traces and signals, concurrent backfill windows) are merged into the next
 * single load + MERGE, across projects. Each caller resolves when the MERGE holding its rows is DONE.
 *
 * Full refresh. Tables re-read in full every run (signals) carry a `row_hash`; a batch whose every
 * hash is already in the table is neither loaded nor merged (one small query instead), and the MERGE
 * rewrites only rows whose hash changed.
 *
 * Partitioning. Every table with a `partitionColumn` is partitioned by its UTC day. `traces` is
 * keyed on `start_time_ns`, an INT64 ns epoch, and BigQuery cannot partition on an expression over
 * INT64: the table gets a derived `start_time_ts TIMESTAMP`, filled at load time from the bigint.
 *
 * State in the warehouse (`core/state-table.ts`). A batch that carries state (its checkpoint) is
 * written alone, not coalesced, and its last MERGE is sent as the script
 * `BEGIN TRANSACTION; MERGE …; MERGE _query_sync_state …; COMMIT TRANSACTION;` in one query job:
 * BigQuery commits the rows and the state together or neither. Job ids stay deterministic per stage,
 * so a lost response is adopted, and a conflict aborts the whole transaction, which is retried whole.
 *
 * Retries. The client's own retry layer is switched off (`retryOptions.autoRetry: false`) so there
 * is exactly one: this file's, which retries only what BigQuery calls transient (`backendError`,
 * `internalError`, `rateLimitExceeded`, `jobBackendError`, `jobInternalError`, HTTP 5xx) with
 * exponential backoff and full jitter, for a bounded number of attempts. Job ids are deterministic
 * per staging table, so a retried jobs.insert whose first response was lost finds the job (409)
 * and waits on it instead of running it twice.
 */
import { DELETED_AT_COLUMN } from '../../core/deletions.js';
import { deletionScript, windowKeysSql, type DeletionTable } from './deletions.js';
import { randomBytes } from 'node:crypto';
import { BigQuery, type BigQueryOptions, type Job } from '@google-cloud/bigquery';
import type { LeaseProvider } from '../../state/leases/lease.js';
import { silentLogger, type Logger } from '../../core/log.js';
import { TRACE_BOOK_TABLE, STATE_TABLE, type StateCommit, type StateRow } from '../../core/state-table.js';
import type { ColumnDef, TableSchema } from '../../core/types.js';
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
  type WindowKeys,
  type DeletionChange,
  type DeletionResult,
} from '../destination.js';
import { OWED_FULL_EVERY_MS, type OwedTraces } from '../destination-capabilities.js';
import {
  TRACE_BOOK_FIELDS,
  TRACE_BOOK_LAYOUT,
  forgetTracesSql,
  owedDays,
  partitionsSql,
  owedCountSql,
  owedSelectSql,
  type OwedEventTable,
} from './trace-book.js';
import { BillingTally } from './billing.js';
import { checkCells, prepareGroup, WriteCoalescer, type GroupResult } from './coalesce.js';
import { toQuerySyncError, type ErrorSubject, type RetryPolicy } from './errors.js';
import { BigQueryJobs, retryPolicy } from './jobs.js';
import { BigQueryLeases, LEASE_FIELDS, LEASE_TABLE } from '../../state/leases/bigquery.js';
import { logTable } from './log.js';
import { BigQueryLogLayout, DEFAULT_COMPACT_EVERY_MS, type UpsertLayout } from './log-layout.js';
import { KEY_BUCKET_COLUMN, ROW_HASH_COLUMN, derivedTimestampColumn } from './rows.js';
import {
  bigQueryColumns,
  quoteIdent,
  replaceTablesSql,
  tablePath,
  validateTarget,
  windowCountSql,
  type BigQueryTarget,
  type ReplacePlan,
} from './sql.js';
import { STATE_FIELDS, commitWrites, stateSelectSql, transactionSql, type QueryParams } from './state.js';
import { logicalType, subjectOf } from './fields.js';
import { BigQueryTables } from './tables.js';
import { BigQueryWriter } from './write.js';

export interface BigQueryDestinationOptions {
  /** Project that owns the dataset and runs the jobs (`--bq-project`). */
  readonly projectId: string;
  /** Dataset the tables go in; created when missing (`--bq-dataset`). */
  readonly dataset: string;
  /**
   * Location of a dataset this creates (`--bq-location`). An existing dataset's own location wins,
   * for every job. @default 'US'
   */
  readonly location?: string;
  /** API root, e.g. a local emulator or test double (`--bq-api-endpoint`). @default https://bigquery.googleapis.com */
  readonly apiEndpoint?: string;
  /** Service-account key file (`--bq-key-file`). @default Application Default Credentials */
  readonly keyFilename?: string;
  /** An auth client to use instead (tests inject a `PassThroughClient`). */
  readonly authClient?: BigQueryOptions['authClient'];
  /** @default a silent logger */
  readonly logger?: Logger;
  /** Attempts per operation for transient errors, the first included. @default 5 */
  readonly maxAttempts?: number;
  /** Attempts of a MERGE that conflicts with another writer's DML on the same table. @default 10 */
  readonly maxConflictAttempts?: number;
  /** Base of the exponential backoff between attempts. @default 1000 */
  readonly retryBaseMs?: number;
  /** Largest NDJSON file of one load job (one MERGE); a larger write is split. @default 134217728 (128 MiB) */
  readonly maxBatchBytes?: number;
  /** Used for backoff and for polling jobs; tests pass one that does not wait. @default setTimeout */
  readonly sleep?: (ms: number) => Promise<void>;
  /** First wait between a job's status polls (then ×1.5, up to 5 s); tests pass a few ms. @default 500 */
  readonly pollMs?: number;
  /** Clock for the staging table's expiration. @default Date.now */
  readonly now?: () => number;
  /**
   * Layout of keyed tables whose rows change (users, conversations; `--bq-upsert`): `auto` gives new
   * tables the change-log layout and leaves existing ones, `log` also migrates an existing table,
   * `merge` gives new tables the MERGE layout. See `log-layout.ts`. @default 'auto'
   */
  readonly upsert?: UpsertLayout;
  /** Time between compactions of a change log (`--bq-compact-every`). @default 86400000 (a day) */
  readonly compactEveryMs?: number;
}

export const DEFAULT_LOCATION = 'US';
const DEFAULT_POLL_MS = 500;
const DEFAULT_MAX_BATCH_BYTES = 128 * 1024 * 1024;
export class BigQueryDestination implements Destination {
  readonly kind = 'bigquery';
  readonly stateLocation: string;
  readonly can: Capabilities;
  private readonly client: BigQuery;
  private readonly target: BigQueryTarget;
  private readonly log: Logger;
  /** `INFORMATION_SCHEMA.PARTITIONS` could not be read once: every owed listing reads every day (said once). */
  private partitionsRefused = false;
  private readonly retry: RetryPolicy;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly now: () => number;
  private readonly jobs: BigQueryJobs;
  private readonly tables: BigQueryTables;
  /** Writes to one table run one after another; those that wait run as one (Coalescing, above). */
  private readonly coalescer = new WriteCoalescer((batches) => this.writeGroup(batches));
  private readonly billed = new BillingTally();
  /** The last job that writes `_query_sync_state` (see `stateTurn`). */
  private stateJobs: Promise<unknown> = Promise.resolve();
  private readonly logLayout: BigQueryLogLayout;
  private readonly writer: BigQueryWriter;
  /** The schema each table was last written with: a refresh recreates a view from it. */
  private readonly schemas = new Map<string, TableSchema>();

  constructor(options: BigQueryDestinationOptions) {
    this.target = { projectId: options.projectId, dataset: options.dataset };
    this.stateLocation = `table ${STATE_TABLE} of BigQuery dataset ${options.projectId}.${options.dataset}`;
    const location = options.location ?? DEFAULT_LOCATION;
    validateTarget(this.target, location);
    this.log = options.logger ?? silentLogger();
    this.retry = retryPolicy(options);
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
      pollMs: options.pollMs ?? DEFAULT_POLL_MS,
      log: this.log,
      onDone: (subject, metadata) => this.billed.add(subject.table, metadata),
    });
    this.tables = new BigQueryTables({
      client: this.client,
      target: this.target,
      location,
      jobs: this.jobs,
      log: this.log,
    });
    this.logLayout = new BigQueryLogLayout({
      client: this.client,
      target: this.target,
      tables: this.tables,
      jobs: this.jobs,
      log: this.log,
      now: this.now,
      mode: options.upsert ?? 'auto',
      compactEveryMs: options.compactEveryMs ?? DEFAULT_COMPACT_EVERY_MS,
      query: (operation, table, sql) =>
        this.jobs.run(this.subject(operation, table), `qs_ddl_${table}_${randomBytes(6).toString('hex')}`, (jobId) =>
          this.createQueryJob(sql, jobId),
        ),
    });
    this.writer = new BigQueryWriter({
      client: this.client,
      target: this.target,
      tables: this.tables,
      jobs: this.jobs,
      logLayout: this.logLayout,
      log: this.log,
      now: this.now,
      maxBatchBytes: options.maxBatchBytes ?? DEFAULT_MAX_BATCH_BYTES,
      schemas: this.schemas,
      writeState: (commit) => this.writeState(commit),
      stateTurn: (job) => this.stateTurn(job),
      ensureStateTable: (commit) => this.ensureStateTable(commit),
      select: (operation, table, sql) => this.select(operation, table, sql),
      createQueryJob: (query, jobId, params) => this.createQueryJob(query, jobId, params),
    });
    this.can = capabilitiesOf(this);
  }

  billing(): BillingTotals {
    return this.billed.totals();
  }

  async describe(table: string): Promise<readonly ColumnDef[] | undefined> {
    if (!(await this.tables.lookupDataset())) return undefined;
    const metadata = await this.tables.metadata(table);
    if (metadata === undefined) return undefined;
    const fields = metadata.schema?.fields ?? [];
    const names = new Set(fields.map((f) => f.name ?? ''));
    // Ours, derived at load time: the row hash, and a partition timestamp beside its ns column.
    const partitionField = metadata.timePartitioning?.field ?? undefined;
    const derived = new Set([ROW_HASH_COLUMN, KEY_BUCKET_COLUMN]);
    if (
      partitionField !== undefined &&
      names.has(partitionField.replace(/_ts$/, '_ns')) &&
      derivedTimestampColumn(partitionField.replace(/_ts$/, '_ns')) === partitionField
    ) {
      derived.add(partitionField);
    }
    const columns: ColumnDef[] = [];
    for (const field of fields) {
      const name = field.name ?? '';
      if (derived.has(name)) continue;
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
    return this.coalescer.write(batch);
  }

  /**
   * The run lease in the dataset (`_query_sync_lease`): BigQuery runs share no file, so the lease
   * lives where the state does.
   */
  get leases(): LeaseProvider {
    return new BigQueryLeases({
      table: tablePath(this.target, LEASE_TABLE),
      dataset: `${this.target.projectId}.${this.target.dataset}`,
      ensureLeaseTable: async () => {
        await this.tables.ensureDataset();
        await this.tables.ensurePlainTable(LEASE_TABLE, LEASE_FIELDS);
      },
      dml: async (operation, sql, params) => {
        const subject = this.subject(operation, LEASE_TABLE);
        const job = await this.jobs.run(subject, `qs_lease_${randomBytes(6).toString('hex')}`, (jobId) =>
          this.createQueryJob(sql, jobId, params === undefined ? undefined : { params }),
        );
        return Number(job.metadata.statistics?.query?.numDmlAffectedRows ?? 0);
      },
      select: (operation, sql, params) => this.select(operation, LEASE_TABLE, sql, params),
    });
  }

  /** Every row of `_query_sync_state`; none when the dataset or the table does not exist. */
  async readState(): Promise<readonly StateRow[]> {
    if (!(await this.tableExists(STATE_TABLE))) return [];
    const rows = await this.select(`read of query-sync's state`, STATE_TABLE, stateSelectSql(this.target));
    return rows.map((r) => ({
      key: String(r['key']),
      value: r['value'] === null || r['value'] === undefined ? null : String(r['value']),
    }));
  }

  /**
   * A state change with no batch: one MERGE into `_query_sync_state` (one statement: atomic), and
   * its reads of the trace book appended with it in one transaction.
   */
  async writeState(commit: StateCommit): Promise<void> {
    await this.ensureStateTable(commit);
    const writes = commitWrites(this.target, commit.rows, commit.traceReads ?? []);
    if (writes.statements.length === 0) return;
    const sql = writes.statements.length === 1 ? (writes.statements[0] ?? '') : transactionSql(writes.statements);
    const subject = this.subject(`MERGE into table ${STATE_TABLE}`, STATE_TABLE);
    await this.stateTurn(() =>
      this.jobs.run(subject, `qs_state_${randomBytes(6).toString('hex')}`, (jobId) =>
        this.createQueryJob(sql, jobId, writes.params),
      ),
    );
  }

  /**
   * The jobs that write `_query_sync_state` (a batch's MERGE with its state, a state MERGE alone)
   * run one at a time: two transactions changing one table at once fail the later to commit
   * (concurrent update, retried only after a backoff). The rest of a write (stage, load job, bridge)
   * runs at once with the others.
   */
  private stateTurn<T>(job: () => Promise<T>): Promise<T> {
    const run = this.stateJobs.then(job);
    this.stateJobs = run.catch(() => undefined);
    return run;
  }

  /** The state table, and the trace book when `commit` appends reads to it. */
  private async ensureStateTable(commit?: StateCommit): Promise<void> {
    await this.tables.ensureDataset();
    await this.tables.ensurePlainTable(STATE_TABLE, STATE_FIELDS);
    if ((commit?.traceReads ?? []).length > 0)
      await this.tables.ensurePlainTable(TRACE_BOOK_TABLE, TRACE_BOOK_FIELDS, TRACE_BOOK_LAYOUT);
  }

  /** What the owed queries need of the events table; `undefined` when it does not exist (nothing is owed). */
  private async owedEventTable(table: string): Promise<OwedEventTable | undefined> {
    if (!(await this.tableExists(table))) return undefined;
    const marksDeletions = (await this.tables.fields(table))?.some((f) => f.name === DELETED_AT_COLUMN) === true;
    return { marksDeletions, bookExists: await this.tableExists(TRACE_BOOK_TABLE) };
  }

  /** The trace book (`trace-book.ts`): up to `limit` events of a project that owe their traces, newest first. */
  async owedTraces(
    query: OwedTraces & { readonly project: string; readonly limit: number },
  ): Promise<readonly { readonly id: string; readonly at: number }[]> {
    const found = await this.owedEventTable(query.eventTable);
    if (found === undefined) return [];
    const days = await this.changedDays(query);
    if (days !== undefined && days.length === 0) return [];
    const events = days === undefined ? found : { ...found, days };
    const rows = await this.select(
      `list of ${query.eventTable} records of project ${query.project} that owe their ${query.resource}`,
      query.eventTable,
      owedSelectSql(this.target, query, events, query.project, query.limit),
    );
    return rows.map((r) => ({ id: String(r['id']), at: Number(r['at']) }));
  }

  /**
   * After a complete listing (`listedThrough`), the days of the events table to list again
   * (`owedDays`), from `INFORMATION_SCHEMA.PARTITIONS` (billed at the metadata minimum); `undefined`
   * (every day) without a mark, at the weekly full listing, or when that view is not readable (said
   * once, as a warning: a full listing is always right, only dearer).
   */
  private async changedDays(query: OwedTraces): Promise<string[] | undefined> {
    const mark = query.listedThrough;
    if (mark === undefined || this.partitionsRefused || query.nowMs - mark.fullAtMs >= OWED_FULL_EVERY_MS)
      return undefined;
    let rows: Record<string, unknown>[];
    try {
      rows = await this.select(
        `partitions of tables ${query.eventTable} and ${TRACE_BOOK_TABLE}`,
        query.eventTable,
        partitionsSql(this.target, [query.eventTable, TRACE_BOOK_TABLE]),
      );
    } catch (error) {
      this.partitionsRefused = true;
      this.log.warn(
        { error: error instanceof Error ? error.message : String(error) },
        'bigquery INFORMATION_SCHEMA.PARTITIONS not readable (it needs bigquery.tables.list on the dataset): the owed listing reads every day of the table',
      );
      return undefined;
    }
    const partitions = rows.flatMap((r) => {
      const id = r['partition_id'];
      const modified = r['last_modified_time'] as { value?: unknown } | null | undefined;
      if (typeof id !== 'string' || modified === null || modified === undefined) return [];
      return [{ table: String(r['table_name']), id, modifiedMs: Date.parse(String(modified.value ?? modified)) }];
    });
    return owedDays(partitions, query.eventTable, mark, query.nowMs, query.settleMs);
  }

  async countOwedTraces(query: OwedTraces): Promise<Readonly<Record<string, number>>> {
    const events = await this.owedEventTable(query.eventTable);
    if (events === undefined) return {};
    const out: Record<string, number> = {};
    const rows = await this.select(
      `count of ${query.eventTable} records that owe their ${query.resource}`,
      query.eventTable,
      owedCountSql(this.target, query, events),
    );
    for (const row of rows) out[String(row['project_id'])] = Number(row['n'] ?? 0);
    return out;
  }

  async forgetTraces(resource: string, project?: string): Promise<void> {
    if (!(await this.tableExists(TRACE_BOOK_TABLE))) return;
    await this.jobs.run(
      this.subject(`DELETE of the reads of ${resource} from table ${TRACE_BOOK_TABLE}`, TRACE_BOOK_TABLE),
      `qs_forget_${randomBytes(6).toString('hex')}`,
      (jobId) => this.createQueryJob(forgetTracesSql(this.target, resource, project), jobId),
    );
  }

  async count(table: string): Promise<number> {
    if (!(await this.tableExists(table))) return 0;
    const rows = await this.select(
      `count of table ${table}`,
      table,
      `SELECT COUNT(*) AS n FROM ${tablePath(this.target, table)}`,
    );
    return Number(rows[0]?.['n'] ?? 0);
  }

  async countWindow(table: string, window: WindowCount): Promise<number> {
    if (!(await this.tableExists(table))) return 0;
    const marks = (await this.tables.fields(table))?.some((f) => f.name === DELETED_AT_COLUMN) === true;
    const sql = windowCountSql(this.target, table, window) + (marks ? ` AND \`${DELETED_AT_COLUMN}\` IS NULL` : '');
    const rows = await this.select(`window count of table ${table} for project ${window.projectId}`, table, sql);
    return Number(rows[0]?.['n'] ?? 0);
  }

  async keysInWindow(table: string, window: WindowCount & { readonly key: string }): Promise<WindowKeys> {
    if (!(await this.tableExists(table))) return { live: [], marked: [] };
    const marks = (await this.tables.fields(table))?.some((f) => f.name === DELETED_AT_COLUMN) === true;
    const rows = await this.select(
      `keys of table ${table} for project ${window.projectId} in a window`,
      table,
      windowKeysSql(this.target, table, window, marks),
    );
    const out = { live: [] as string[], marked: [] as string[] };
    for (const row of rows) (row['m'] === true ? out.marked : out.live).push(String(row['k']));
    return out;
  }

  /**
   * One reconcile window's deletions (`deletions.ts`): `_deleted_at` added where a mark needs
   * it (a schema patch: BigQuery's DDL is not transactional), then one transaction of MERGEs, each
   * pruned to its table's partitions. Rows changed per table are not reported (a script's job gives
   * no per-statement count); the bytes it processed are.
   */
  async applyDeletions(change: DeletionChange): Promise<DeletionResult> {
    const tables: (DeletionTable & { parent: boolean })[] = [];
    for (const t of [
      { table: change.parent.table, column: change.parent.key, parent: true },
      ...change.followers.map((f) => ({ ...f, parent: false })),
    ]) {
      if (!(await this.tableExists(t.table))) continue;
      const fields = (await this.tables.fields(t.table)) ?? [];
      const has = (name: string): boolean => fields.some((f) => f.name === name);
      if (!has(t.column) || !has('project_id')) continue;
      if (change.action === 'unmark' && !has(DELETED_AT_COLUMN)) continue;
      if (change.action === 'mark' && !has(DELETED_AT_COLUMN))
        await this.tables.addFields(t.table, [{ name: DELETED_AT_COLUMN, type: 'TIMESTAMP', mode: 'NULLABLE' }]);
      const day = (await this.tables.metadata(t.table))?.timePartitioning?.field ?? undefined;
      tables.push({
        ...t,
        ...(day === undefined || day === null ? {} : { dayField: day }),
        meta: change.action === 'delete' ? [] : ['_synced_at', '_run_id'].filter(has),
      });
    }
    if (tables.length === 0 || change.ids.length === 0) return { rows: {} };
    const job = await this.jobs.run(
      this.subject(`${change.action} of ${change.ids.length} rows deleted at the source`, change.parent.table),
      `qs_deletions_${randomBytes(6).toString('hex')}`,
      (jobId) => this.createQueryJob(deletionScript(this.target, change, tables), jobId),
    );
    const bytes = Number(job.metadata.statistics?.query?.totalBytesProcessed ?? Number.NaN);
    return { rows: {}, ...(Number.isFinite(bytes) ? { bytesProcessed: bytes } : {}) };
  }

  async countByProject(table: string): Promise<Readonly<Record<string, number>>> {
    if (!(await this.tableExists(table))) return {};
    const sql = `SELECT \`project_id\` AS project_id, COUNT(*) AS n FROM ${tablePath(this.target, table)} GROUP BY 1 ORDER BY 1`;
    const out: Record<string, number> = {};
    for (const row of await this.select(`count per project of table ${table}`, table, sql))
      out[String(row['project_id'])] = Number(row['n'] ?? 0);
    return out;
  }

  async close(): Promise<void> {
    await this.coalescer.drain();
  }

  private async tableExists(table: string): Promise<boolean> {
    return (await this.tables.lookupDataset()) && (await this.tables.fields(table)) !== undefined;
  }

  /** Run a SELECT as a query job in the dataset's location; its rows. */
  private async select(
    operation: string,
    table: string,
    sql: string,
    params?: Record<string, string | number>,
  ): Promise<Record<string, unknown>[]> {
    const subject = this.subject(operation, table);
    const base = `qs_select_${table}_${randomBytes(6).toString('hex')}`;
    const job = await this.jobs.run(subject, base, (jobId) =>
      this.createQueryJob(sql, jobId, params === undefined ? undefined : { params }),
    );
    const [rows] = await this.jobs
      .retrying(subject, () =>
        this.client.job(job.jobId, { location: job.location }).getQueryResults({ autoPaginate: false }),
      )
      .catch((error: unknown) => {
        throw toQuerySyncError(error, subject);
      });
    return rows.filter((r): r is Record<string, unknown> => typeof r === 'object' && r !== null);
  }

  // ---- one write ---------------------------------------------------------------------------

  private async writeGroup(batches: readonly LoadBatch[]): Promise<GroupResult> {
    const group = prepareGroup(batches);
    const { table, rows, rowsPerBatch, state } = group;
    if (rows.length === 0) {
      if (state !== undefined) await this.writeState(state);
      return { bytesProcessed: undefined, rowsPerBatch };
    }
    const { hashes, spec } = checkCells(table, rows);
    return this.writer.write(group, hashes, spec);
  }

  /**
   * `sync --full-refresh`: each table's rows replaced by its shadow's, all in one multi-statement
   * transaction (BigQuery's DDL is not transactional, its DML is): per table a DELETE, then an
   * INSERT … SELECT from the shadow; a table with no shadow (nothing was read) is emptied. Readers
   * see the old rows or the new ones. The shadows are dropped after the commit (one left by a
   * failure is dropped by the next refresh). Billed: a scan of each shadow.
   */
  async replaceTables(swaps: readonly TableSwap[]): Promise<void> {
    await this.tables.ensureDataset();
    const plans: ReplacePlan[] = [];
    // A table in the change-log layout is refreshed through its log (then its view redefined); a
    // missing one is created in that layout when a new table would be.
    const views: TableSchema[] = [];
    for (const { table, shadow } of swaps) {
      const written = this.schemas.get(shadow);
      const schema = written === undefined ? undefined : { ...written, name: table };
      let into = table;
      if (await this.logLayout.isLog(table)) into = logTable(table);
      else if (schema !== undefined && !(await this.tableExists(table)) && this.logLayout.wantsLogForNew(schema)) {
        await this.logLayout.prepare(schema, bigQueryColumns(schema));
        into = logTable(table);
      }
      if (into !== table && schema !== undefined) views.push(schema);
      const columns = await this.tables.takeColumnsOf(into, shadow);
      if (columns !== undefined) plans.push({ table: into, shadow, columns });
      else if (await this.tableExists(into)) plans.push({ table: into });
    }
    if (plans.length > 0) {
      const names = swaps.map((s) => s.table).join(', ');
      const sql = replaceTablesSql(this.target, plans);
      await this.jobs.run(
        this.subject(`replacement of ${names} by their refreshed copies`, swaps[0]?.table),
        `qs_refresh_${randomBytes(6).toString('hex')}`,
        (jobId) => this.createQueryJob(sql, jobId),
      );
    }
    for (const schema of views) {
      this.tables.forget(logTable(schema.name));
      await this.logLayout.refreshView(schema);
    }
    for (const { shadow } of swaps) await this.dropTable(shadow);
  }

  /** Drop a table if it exists (a refresh's shadow). */
  async dropTable(table: string): Promise<void> {
    if (!(await this.tables.lookupDataset())) return;
    const subject = this.subject(`drop of table ${table}`, table);
    await this.jobs
      .retrying(subject, () => this.client.dataset(this.target.dataset).table(table).delete({ ignoreNotFound: true }))
      .catch((error: unknown) => {
        throw toQuerySyncError(error, subject);
      });
    this.tables.forget(table);
  }

  /**
   * `CREATE OR REPLACE VIEW` as a query job in the dataset's location (nothing with `--dry-run`);
   * nothing when the view already has that query (a run with no new column: one tables.get, not a
   * DDL job and its polls).
   */
  async defineView(name: string, select: (sql: ViewDialect) => string): Promise<void> {
    await this.tables.ensureDataset();
    const query = select({ table: (t) => tablePath(this.target, t), column: quoteIdent });
    const current = await this.tables.metadata(name);
    if (current?.type === 'VIEW' && current.view?.query === query) return;
    const sql = `CREATE OR REPLACE VIEW ${tablePath(this.target, name)} AS ${query}`;
    await this.jobs.run(
      this.subject(`definition of view ${name}`, name),
      `qs_view_${name}_${randomBytes(6).toString('hex')}`,
      (jobId) => this.createQueryJob(sql, jobId),
    );
    this.tables.forget(name);
  }

  /** A query job with its query parameters (a commit's: `commitWrites`). */
  private async createQueryJob(query: string, jobId: string, params: QueryParams = {}): Promise<Job> {
    const [job] = await this.client.createQueryJob({
      query,
      jobId,
      location: this.tables.location,
      useLegacySql: false,
      ...params,
    });
    return job;
  }

  private subject(operation: string, table?: string): ErrorSubject {
    return subjectOf(this.target, operation, table);
  }
}
