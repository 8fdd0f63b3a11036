import type { BigQuery, TableField, TableMetadata } from '@google-cloud/bigquery';
import { COLUMN_TYPES, bigqueryType } from '../core/column-types.js';
import { LoadError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { LogicalType, TableSchema } from '../core/types.js';
import { toQuerySyncError, type ErrorSubject } from './bigquery-errors.js';
import { kindOf, type BigQueryJobs } from './bigquery-jobs.js';
import { PARTITION_DATE_COLUMN, partitionSpec } from './bigquery-rows.js';
import { bigQueryColumns, clusteringColumns, type BigQueryColumn, type BigQueryTarget } from './bigquery-sql.js';

/**
 * The dataset and tables of the BigQuery destination: created on first use (DAY partitions,
 * clustered by `project_id` + key), new columns patched in before a load, and the schema fields of
 * each table cached so a write patches only what is new.
 */

export interface BigQueryTablesOptions {
  readonly client: BigQuery;
  readonly target: BigQueryTarget;
  /** The configured location; replaced by the dataset's actual one once known. */
  readonly location: string;
  readonly jobs: BigQueryJobs;
  readonly log: Logger;
}

/** BigQuery's legacy type names (tables.get answers with these) → standard SQL names. */
const LEGACY_TYPE_NAMES: Readonly<Record<string, string>> = { INTEGER: 'INT64', FLOAT: 'FLOAT64', BOOLEAN: 'BOOL' };

export class BigQueryTables {
  private readonly options: BigQueryTablesOptions;
  #location: string;
  #datasetReady: Promise<void> | undefined;
  /** Schema fields per table as last seen. */
  readonly #fields = new Map<string, TableField[]>();

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

  private async setupDataset(): Promise<void> {
    const { dataset } = this.options.target;
    const lookup = subjectOf(this.options.target, `lookup of dataset ${dataset}`);
    try {
      const [metadata] = await this.options.jobs.retrying(lookup, () => this.options.client.dataset(dataset).getMetadata());
      this.adoptLocation((metadata as { location?: string }).location);
      return;
    } catch (error) {
      if (kindOf(error) !== 'notFound') throw toQuerySyncError(error, lookup);
    }
    const create = subjectOf(this.options.target, `creation of dataset ${dataset} in ${this.#location}`);
    try {
      await this.options.jobs.retrying(create, () => this.options.client.createDataset(dataset, { location: this.#location }));
      this.options.log.info({ dataset, location: this.#location }, 'bigquery dataset created');
    } catch (error) {
      if (kindOf(error) !== 'alreadyExists') throw toQuerySyncError(error, create);
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
  async fields(table: string): Promise<TableField[] | undefined> {
    const subject = subjectOf(this.options.target, `lookup of table ${table}`, table);
    try {
      const [metadata] = await this.options.jobs.retrying(subject, () =>
        this.options.client.dataset(this.options.target.dataset).table(table).getMetadata(),
      );
      const fields = (metadata as TableMetadata).schema?.fields ?? [];
      this.#fields.set(table, fields);
      return fields;
    } catch (error) {
      if (kindOf(error) === 'notFound') return undefined;
      throw toQuerySyncError(error, subject);
    }
  }

  /** Create the table if missing; return its schema fields. */
  async ensureTable(table: TableSchema): Promise<TableField[]> {
    const cached = this.#fields.get(table.name);
    if (cached !== undefined) return cached;
    const existing = await this.fields(table.name);
    if (existing !== undefined) return existing;
    const subject = subjectOf(this.options.target, `creation of table ${table.name}`, table.name);
    const spec = partitionSpec(table);
    const resource: TableMetadata = {
      schema: { fields: bigQueryColumns(table).map(toField) },
      clustering: { fields: clusteringColumns(table) },
      ...(spec === undefined
        ? {}
        : {
            timePartitioning: {
              type: 'DAY',
              field: spec.kind === 'timestamp' ? spec.column : PARTITION_DATE_COLUMN,
            },
          }),
      ...(spec?.kind === 'epoch_ns'
        ? {
            description:
              `Partitioned on ${PARTITION_DATE_COLUMN}: the UTC date of ${spec.column} (ns epoch), ` +
              'computed by query-sync at load time.',
          }
        : {}),
    };
    try {
      const [, metadata] = await this.options.jobs.retrying(subject, () =>
        this.options.client.dataset(this.options.target.dataset, { location: this.#location }).createTable(table.name, resource),
      );
      this.options.log.info({ table: table.name }, 'bigquery table created');
      const fields = metadata.schema?.fields ?? resource.schema?.fields ?? [];
      this.#fields.set(table.name, fields);
      return fields;
    } catch (error) {
      if (kindOf(error) !== 'alreadyExists') throw toQuerySyncError(error, subject);
      return (await this.fields(table.name)) ?? [];
    }
  }

  /** Add (tables.patch) the columns `table` declares that BigQuery lacks; refuse changed types. */
  async addMissingColumns(
    table: TableSchema,
    existing: readonly TableField[],
    columns: readonly BigQueryColumn[],
  ): Promise<void> {
    const present = new Map(existing.map((f) => [f.name ?? '', standardType(f.type)]));
    const missing: BigQueryColumn[] = [];
    for (const column of columns) {
      const type = present.get(column.name);
      if (type === undefined) missing.push(column);
      else if (type !== column.type) {
        throw new LoadError(
          `BigQuery: column "${column.name}" of table ${table.name} is ${type} in BigQuery ` +
            `but the batch writes ${column.type}; ` +
            'query-sync does not change column types (drop or rename the column to proceed)',
          false,
          { context: { resource: table.name } },
        );
      }
    }
    if (missing.length === 0) return;
    const names = missing.map((c) => c.name).join(', ');
    const subject = subjectOf(this.options.target, `adding columns ${names} to table ${table.name}`, table.name);
    const fields = [...existing, ...missing.map(toField)];
    try {
      const [metadata] = await this.options.jobs.retrying(subject, () =>
        this.options.client.dataset(this.options.target.dataset).table(table.name).setMetadata({ schema: { fields } }),
      );
      this.#fields.set(table.name, (metadata as TableMetadata).schema?.fields ?? fields);
      this.options.log.info({ table: table.name, columns: missing.map((c) => c.name) }, 'bigquery columns added');
    } catch (error) {
      this.#fields.delete(table.name);
      throw toQuerySyncError(error, subject);
    }
  }
}

/** What an error message names: the operation, the project, the dataset and the table. */
export function subjectOf(target: BigQueryTarget, operation: string, table?: string): ErrorSubject {
  return { operation, projectId: target.projectId, dataset: target.dataset, ...(table === undefined ? {} : { table }) };
}

export function toField(column: BigQueryColumn): TableField {
  return {
    name: column.name,
    type: column.type,
    mode: 'NULLABLE',
    ...(column.name === PARTITION_DATE_COLUMN
      ? { description: 'UTC date of the ns-epoch partition column; set by query-sync at load time' }
      : {}),
  };
}

/** Standard SQL name of a BigQuery type as tables.get reports it. */
function standardType(type: string | null | undefined): string {
  const upper = (type ?? '').toUpperCase();
  return LEGACY_TYPE_NAMES[upper] ?? upper;
}

/** The logical type whose BigQuery type (per `column-types.ts`) is `type`, if any. */
export function logicalType(type: string | null | undefined): LogicalType | undefined {
  const standard = standardType(type);
  return (Object.keys(COLUMN_TYPES) as LogicalType[]).find((t) => bigqueryType(t) === standard);
}

