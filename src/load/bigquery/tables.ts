import type { BigQuery, TableField, TableMetadata } from '@google-cloud/bigquery';
import { LoadError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { TableSchema } from '../../core/types.js';
import { errorInfo, toQuerySyncError } from './errors.js';
import { missingColumns, standardType, subjectOf, tableResource, toField } from './fields.js';
import { kindOf, type BigQueryJobs } from './jobs.js';
import type { BigQueryColumn, BigQueryTarget } from './sql.js';

/**
 * The dataset and tables of the BigQuery destination: created on first use (DAY partitions,
 * clustered by `project_id` + key, expiration off), new columns patched in before a load, and the
 * schema fields of each table cached so a write patches only what is new.
 *
 * Location: every job runs where the dataset is. The dataset is looked up before the first job of
 * any kind (writes, counts, status), and its location replaces `--bq-location`.
 *
 * Expiration: a dataset's default table or partition expiration (sandbox datasets: 60 days) would
 * silently delete tables, or their old partitions, that state says are loaded. Tables this creates
 * get both cleared right after creation (a tables.patch setting them to null), and a warning names
 * the dataset default; an existing table that expires is warned about, not changed.
 *
 * Column patches re-read the table (schema and etag) right before patching and send the etag
 * (If-Match), so a column another process added in between is kept: a stale etag (412) re-reads
 * and tries again.
 *
 * Lookups (tables.get) are kept for the destination's life, one run: the run holds the lease, and
 * the run's own changes (a table created, columns patched, a label set, a view or a log replaced by
 * a query job, a table dropped) replace or drop what is kept. A run so asks BigQuery about a table
 * once, not at each describe, count and write (a sync with nothing new: 21 tables.get before, 11
 * after). A sync and a backfill may run at once (each holds a lease of its own), so what a write
 * decides from a lookup is asked afresh where another process may have changed it: a column patch
 * reads the table (its etag guards the patch), a create that finds the table exists reads it, and
 * a table's layout is decided on a fresh lookup of a table found missing. What the other process
 * changes in a table this run has found (a column added) its describes see at the next run.
 */

/** Attempts of a column patch that lost a race with another writer (412 on the etag). */
const PATCH_RACE_ATTEMPTS = 5;

export interface BigQueryTablesOptions {
  readonly client: BigQuery;
  readonly target: BigQueryTarget;
  /** The configured location; replaced by the dataset's actual one once known. */
  readonly location: string;
  readonly jobs: BigQueryJobs;
  readonly log: Logger;
}

export class BigQueryTables {
  private readonly options: BigQueryTablesOptions;
  #location: string;
  #datasetReady: Promise<void> | undefined;
  #datasetLookup: Promise<boolean> | undefined;
  /** Schema fields per table as last seen. */
  readonly #fields = new Map<string, TableField[]>();
  /** The column each table is partitioned on, as BigQuery reports it (`null`: not partitioned). */
  readonly #partitionField = new Map<string, string | null>();
  /** Each table's resource as last read or written by this run (`undefined`: it does not exist). */
  readonly #metadata = new Map<string, Promise<TableMetadata | undefined>>();
  /** Tables the kept lookup found missing. */
  readonly #missing = new Set<string>();

  constructor(options: BigQueryTablesOptions) {
    this.options = options;
    this.#location = options.location;
  }

  /** Where jobs run: the dataset's actual location once known. */
  get location(): string {
    return this.#location;
  }

  ensureDataset(): Promise<void> {
    this.#datasetReady ??= this.setupDataset().catch((error: unknown) => {
      this.#datasetReady = undefined;
      throw error;
    });
    return this.#datasetReady;
  }

  /**
   * Whether the dataset exists; adopts its location and warns about default expirations. Every
   * job-sending path (write, count, status, verify) calls this first, so jobs run where the data is.
   */
  lookupDataset(): Promise<boolean> {
    this.#datasetLookup ??= this.readDataset().catch((error: unknown) => {
      this.#datasetLookup = undefined;
      throw error;
    });
    return this.#datasetLookup;
  }

  private async readDataset(): Promise<boolean> {
    const { dataset } = this.options.target;
    const lookup = subjectOf(this.options.target, `lookup of dataset ${dataset}`);
    try {
      const [metadata] = await this.options.jobs.retrying(lookup, () =>
        this.options.client.dataset(dataset).getMetadata(),
      );
      const m = metadata as {
        location?: string;
        defaultTableExpirationMs?: string;
        defaultPartitionExpirationMs?: string;
      };
      this.adoptLocation(m.location);
      if (m.defaultTableExpirationMs != null || m.defaultPartitionExpirationMs != null) {
        this.options.log.warn(
          {
            dataset,
            defaultTableExpirationMs: m.defaultTableExpirationMs,
            defaultPartitionExpirationMs: m.defaultPartitionExpirationMs,
          },
          'bigquery dataset has a default expiration: tables query-sync creates have it cleared, but tables created ' +
            'otherwise, and every table in a sandbox dataset (60 days), are deleted when it passes while state still ' +
            'says they are loaded; remove the default (bq update --default_table_expiration 0 ' +
            '--default_partition_expiration 0) or re-sync after it',
        );
      }
      return true;
    } catch (error) {
      if (kindOf(error) !== 'notFound') throw toQuerySyncError(error, lookup);
      return false;
    }
  }

  private async setupDataset(): Promise<void> {
    const { dataset } = this.options.target;
    if (await this.lookupDataset()) return;
    const create = subjectOf(this.options.target, `creation of dataset ${dataset} in ${this.#location}`);
    try {
      await this.options.jobs.retrying(create, () =>
        this.options.client.createDataset(dataset, { location: this.#location }),
      );
      this.options.log.info({ dataset, location: this.#location }, 'bigquery dataset created');
      this.#datasetLookup = Promise.resolve(true);
    } catch (error) {
      if (kindOf(error) !== 'alreadyExists') throw toQuerySyncError(error, create);
      // Created by another process meanwhile, perhaps elsewhere: read its location.
      this.#datasetLookup = undefined;
      await this.lookupDataset();
    }
  }

  private adoptLocation(location: string | undefined): void {
    if (location === undefined || location.toUpperCase() === this.#location.toUpperCase()) return;
    this.options.log.warn(
      { dataset: this.options.target.dataset, configured: this.#location, actual: location },
      'bigquery dataset exists in another location; jobs run there',
    );
    this.#location = location;
  }

  /** The table's schema fields, or undefined when it (or the dataset) does not exist. */
  async fields(table: string, fresh = false): Promise<TableField[] | undefined> {
    return (await this.metadata(table, fresh))?.schema?.fields ?? undefined;
  }

  /**
   * The table's resource (schema, etag, expiration), or undefined when it does not exist: as this
   * run last read or wrote it (one tables.get a table a run, lookups at once sharing it), or as
   * BigQuery has it now with `fresh`.
   */
  metadata(table: string, fresh: boolean | 'if-missing' = false): Promise<TableMetadata | undefined> {
    const again = fresh === true || (fresh === 'if-missing' && this.#missing.has(table));
    const kept = again ? undefined : this.#metadata.get(table);
    if (kept !== undefined) return kept;
    const read = this.readMetadata(table);
    this.#metadata.set(table, read);
    this.#missing.delete(table);
    read.then(
      (found) => {
        if (found === undefined && this.#metadata.get(table) === read) this.#missing.add(table);
      },
      () => {
        if (this.#metadata.get(table) === read) this.#metadata.delete(table);
      },
    );
    return read;
  }

  private async readMetadata(table: string): Promise<TableMetadata | undefined> {
    const subject = subjectOf(this.options.target, `lookup of table ${table}`, table);
    try {
      const [metadata] = await this.options.jobs.retrying(subject, () =>
        this.options.client.dataset(this.options.target.dataset).table(table).getMetadata(),
      );
      const resource = metadata as TableMetadata;
      resource.schema = { fields: resource.schema?.fields ?? [] };
      this.#fields.set(table, resource.schema.fields ?? []);
      this.#partitionField.set(table, resource.timePartitioning?.field ?? resource.rangePartitioning?.field ?? null);
      return resource;
    } catch (error) {
      if (kindOf(error) === 'notFound') return undefined;
      throw toQuerySyncError(error, subject);
    }
  }

  /** Keep `resource` as the table's, as the run's own create or patch returned it. */
  private keep(table: string, resource: TableMetadata): void {
    const kept: TableMetadata = { ...resource, schema: { fields: resource.schema?.fields ?? [] } };
    this.#metadata.set(table, Promise.resolve(kept));
    this.#missing.delete(table);
  }

  /** Create the table if missing (as `resource` says: by default a target table's); return its schema fields. */
  async ensureTable(table: TableSchema, resource: TableMetadata = tableResource(table)): Promise<TableField[]> {
    const cached = this.#fields.get(table.name);
    if (cached !== undefined) return cached;
    const existing = await this.metadata(table.name);
    if (existing !== undefined) {
      this.warnIfExpiring(table.name, existing);
      return existing.schema?.fields ?? [];
    }
    const subject = subjectOf(this.options.target, `creation of table ${table.name}`, table.name);
    let created: TableMetadata;
    try {
      const [, metadata] = await this.options.jobs.retrying(subject, () =>
        this.options.client
          .dataset(this.options.target.dataset, { location: this.#location })
          .createTable(table.name, resource),
      );
      created = metadata as TableMetadata;
      this.options.log.info({ table: table.name }, 'bigquery table created');
    } catch (error) {
      if (kindOf(error) !== 'alreadyExists') throw toQuerySyncError(error, subject);
      return (await this.fields(table.name, true)) ?? [];
    }
    const after = await this.clearExpiration(table.name, created);
    const fields = after.schema?.fields ?? resource.schema?.fields ?? [];
    this.keep(table.name, { ...after, schema: { fields } });
    this.#fields.set(table.name, fields);
    this.#partitionField.set(table.name, resource.timePartitioning?.field ?? resource.rangePartitioning?.field ?? null);
    return fields;
  }

  /**
   * Create a small table of query-sync's own (the state, the lease) if missing: no partitioning,
   * no clustering, never expiring (a dataset default expiration is cleared as for data tables).
   */
  async ensurePlainTable(
    name: string,
    fields: TableField[],
    /** Partitioning and clustering of the table when it is created. */
    layout: Pick<TableMetadata, 'timePartitioning' | 'clustering'> = {},
  ): Promise<void> {
    if (this.#fields.has(name)) return;
    if ((await this.metadata(name)) !== undefined) return;
    const subject = subjectOf(this.options.target, `creation of table ${name}`, name);
    try {
      const [, metadata] = await this.options.jobs.retrying(subject, () =>
        this.options.client
          .dataset(this.options.target.dataset, { location: this.#location })
          .createTable(name, { schema: { fields }, ...layout }),
      );
      this.keep(name, await this.clearExpiration(name, metadata as TableMetadata));
      this.options.log.info({ table: name }, 'bigquery table created');
    } catch (error) {
      if (kindOf(error) !== 'alreadyExists') throw toQuerySyncError(error, subject);
      // Created meanwhile by another process: read it when asked.
      this.#metadata.delete(name);
      this.#missing.delete(name);
    }
    this.#fields.set(name, fields);
  }

  /**
   * Make `table` ready to take every row of `source` (a full refresh's shadow): created with the
   * source's schema, partitioning and clustering when missing, else given the columns it lacks (a
   * column both have with another type is refused). The source's column names, or `undefined`
   * when there is no source (nothing was read).
   */
  async takeColumnsOf(table: string, source: string): Promise<string[] | undefined> {
    const from = await this.metadata(source);
    if (from === undefined) return undefined;
    const fields = from.schema?.fields ?? [];
    const operation = `preparing table ${table} for its refreshed rows`;
    if ((await this.metadata(table)) === undefined) {
      const subject = subjectOf(this.options.target, operation, table);
      const resource: TableMetadata = {
        schema: { fields },
        ...(from.timePartitioning ? { timePartitioning: from.timePartitioning } : {}),
        ...(from.rangePartitioning ? { rangePartitioning: from.rangePartitioning } : {}),
        ...(from.clustering ? { clustering: from.clustering } : {}),
        ...(from.description ? { description: from.description } : {}),
        labels: { 'query-sync': 'table' },
      };
      try {
        const [, created] = await this.options.jobs.retrying(subject, () =>
          this.options.client
            .dataset(this.options.target.dataset, { location: this.#location })
            .createTable(table, resource),
        );
        await this.clearExpiration(table, created as TableMetadata);
        this.forget(table);
        return fields.map((f) => f.name ?? '');
      } catch (error) {
        // Created meanwhile by another process: give it the columns it lacks, as below.
        if (kindOf(error) !== 'alreadyExists') throw toQuerySyncError(error, subject);
      }
    }
    await this.patchColumns(table, operation, (existing) => {
      const present = new Map(existing.map((f) => [(f.name ?? '').toLowerCase(), f]));
      return fields.filter((field) => {
        const found = present.get((field.name ?? '').toLowerCase());
        if (found === undefined) return true;
        if (standardType(found.type) !== standardType(field.type) || found.name !== field.name) {
          throw new LoadError(
            `BigQuery: column "${found.name ?? ''}" of table ${table} is ${standardType(found.type)} but its refreshed copy ${source} has ` +
              `"${field.name ?? ''}" ${standardType(field.type)}; query-sync does not change column types or names (drop the table, then sync --full-refresh again)`,
            false,
            { context: { resource: table } },
          );
        }
        return false;
      });
    });
    return fields.map((f) => f.name ?? '');
  }

  /** Forget what is cached of a table (dropped, or changed by a refresh). */
  forget(table: string): void {
    this.#metadata.delete(table);
    this.#missing.delete(table);
    this.#fields.delete(table);
    this.#partitionField.delete(table);
  }

  /**
   * Whether a MERGE into `table` may prune on `field`: only when the table really is partitioned
   * on it. A table created otherwise (by an earlier version, unpartitioned, or by hand) has rows
   * whose `field` is NULL or not what query-sync would compute; pruning on it would miss them and
   * insert the rows again. Such a table is merged unpruned (exact, costlier), with a warning.
   */
  prunesOn(table: string, field: string): boolean {
    const actual = this.#partitionField.get(table);
    if (actual === field) return true;
    if (!this.#warnedUnpruned.has(table)) {
      this.#warnedUnpruned.add(table);
      this.options.log.warn(
        { table, expectedPartitionColumn: field, actualPartitionColumn: actual ?? null },
        'bigquery table is not partitioned the way query-sync creates it: every MERGE scans the whole table; ' +
          'to cut the cost, re-create it (drop it and run a full re-sync of that resource)',
      );
    }
    return false;
  }

  readonly #warnedUnpruned = new Set<string>();

  /** A table this created inherited the dataset's default expiration: turn it off. */
  private async clearExpiration(table: string, created: TableMetadata): Promise<TableMetadata> {
    const partitionExpiry = created.timePartitioning?.expirationMs;
    if (created.expirationTime == null && partitionExpiry == null) return created;
    const subject = subjectOf(this.options.target, `clearing the expiration of table ${table}`, table);
    const patch: TableMetadata = {
      ...(created.expirationTime == null ? {} : { expirationTime: null as unknown as string }),
      ...(partitionExpiry == null
        ? {}
        : { timePartitioning: { ...created.timePartitioning, expirationMs: null as unknown as string } }),
      ...(created.etag === undefined ? {} : { etag: created.etag }),
    };
    const [metadata] = await this.options.jobs
      .retrying(subject, () => this.options.client.dataset(this.options.target.dataset).table(table).setMetadata(patch))
      .catch((error: unknown) => {
        throw toQuerySyncError(error, subject);
      });
    const after = metadata as TableMetadata;
    this.options.log.warn(
      { table, inheritedExpirationTime: created.expirationTime, inheritedPartitionExpirationMs: partitionExpiry },
      'bigquery table inherited the dataset default expiration; cleared it so loaded rows are not deleted',
    );
    this.warnIfExpiring(table, after);
    return after;
  }

  private warnIfExpiring(table: string, metadata: TableMetadata): void {
    if (metadata.expirationTime == null && metadata.timePartitioning?.expirationMs == null) return;
    this.options.log.warn(
      {
        table,
        expirationTime: metadata.expirationTime,
        partitionExpirationMs: metadata.timePartitioning?.expirationMs,
      },
      'bigquery table expires (or its partitions do): BigQuery will delete rows that state says are loaded; ' +
        'clear it (bq update --expiration 0 --time_partitioning_expiration 0) or re-sync after it passes',
    );
  }

  /** Add (tables.patch) `fields` to `table` where it lacks them (reconcile's `_deleted_at`). */
  async addFields(table: string, fields: readonly TableField[]): Promise<void> {
    await this.patchColumns(table, `adding ${fields.map((f) => f.name).join(', ')} to table ${table}`, (existing) =>
      fields.filter((f) => !existing.some((e) => e.name === f.name)),
    );
  }

  /**
   * Add (tables.patch) the columns `table` declares that BigQuery lacks; refuse changed types.
   * `cached` is the schema as last seen: when it already has every column, nothing is sent.
   */
  async addMissingColumns(
    table: TableSchema,
    cached: readonly TableField[],
    columns: readonly BigQueryColumn[],
  ): Promise<void> {
    if (missingColumns(table, cached, columns).length === 0) return;
    await this.patchColumns(table.name, `adding columns to table ${table.name}`, (existing) =>
      missingColumns(table, existing, columns).map(toField),
    );
  }

  /**
   * Add to `table` the fields `missingOf` says it lacks, as it is now: re-read (schema + etag) and
   * patched with If-Match, so another process's new column is never dropped; a 412 (someone
   * patched in between) re-reads and tries again. `missingOf` throws for a column it cannot add.
   */
  private async patchColumns(
    table: string,
    operation: string,
    missingOf: (existing: readonly TableField[]) => TableField[],
  ): Promise<void> {
    const subject = subjectOf(this.options.target, operation, table);
    for (let attempt = 1; ; attempt += 1) {
      const fresh = await this.metadata(table, true);
      const existing = fresh?.schema?.fields ?? [];
      const missing = missingOf(existing);
      if (missing.length === 0) return;
      const fields = [...existing, ...missing];
      try {
        const [metadata] = await this.options.jobs.retrying(subject, () =>
          this.options.client
            .dataset(this.options.target.dataset)
            .table(table)
            .setMetadata({ schema: { fields }, ...(fresh?.etag === undefined ? {} : { etag: fresh.etag }) }),
        );
        const patched = metadata as TableMetadata;
        this.keep(table, { ...patched, schema: { fields: patched.schema?.fields ?? fields } });
        this.#fields.set(table, patched.schema?.fields ?? fields);
        this.options.log.info({ table, columns: missing.map((c) => c.name) }, 'bigquery columns added');
        return;
      } catch (error) {
        this.#metadata.delete(table);
        this.#missing.delete(table);
        this.#fields.delete(table);
        if (errorInfo(error).status === 412 && attempt < PATCH_RACE_ATTEMPTS) {
          this.options.log.debug({ table, attempt }, 'bigquery table changed while adding columns; re-reading');
          continue;
        }
        throw toQuerySyncError(error, subject);
      }
    }
  }
}
