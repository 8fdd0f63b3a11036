import type { TableField, TableMetadata } from '@google-cloud/bigquery';
import { COLUMN_TYPES, bigqueryType } from '../../core/column-types.js';
import { LoadError } from '../../core/errors.js';
import type { LogicalType, TableSchema } from '../../core/types.js';
import type { ErrorSubject } from './errors.js';
import { KEY_BUCKETS, partitionSpec } from './rows.js';
import { bigQueryColumns, clusteringColumns, type BigQueryColumn, type BigQueryTarget } from './sql.js';

/**
 * BigQuery table resources and schema fields as query-sync writes and reads them (pure): the
 * tables.insert body of a target table, a column as a field, a field's type back as a logical
 * type, the columns a table lacks, and what an error message names.
 */

/** BigQuery's legacy type names (tables.get answers with these) → standard SQL names. */
const LEGACY_TYPE_NAMES: Readonly<Record<string, string>> = { INTEGER: 'INT64', FLOAT: 'FLOAT64', BOOLEAN: 'BOOL' };

/** Columns BigQuery lacks; throws when a column exists with another type. */
export function missingColumns(
  table: TableSchema,
  existing: readonly TableField[],
  columns: readonly BigQueryColumn[],
): BigQueryColumn[] {
  const present = new Map(
    existing.map((f) => [(f.name ?? '').toLowerCase(), { name: f.name ?? '', type: standardType(f.type) }]),
  );
  const missing: BigQueryColumn[] = [];
  for (const column of columns) {
    const found = present.get(column.name.toLowerCase());
    if (found === undefined) missing.push(column);
    else if (found.type !== column.type || found.name !== column.name) {
      throw new LoadError(
        `BigQuery: column "${found.name}" of table ${table.name} is ${found.type} in BigQuery ` +
          `but the batch writes "${column.name}" ${column.type}; ` +
          'query-sync does not change column types or names (drop or rename the column to proceed)',
        false,
        { context: { resource: table.name } },
      );
    }
  }
  return missing;
}

/** The tables.insert body of a target table (also what a dry run prints). */
export function tableResource(table: TableSchema): TableMetadata {
  const spec = partitionSpec(table);
  return {
    schema: { fields: bigQueryColumns(table).map(toField) },
    clustering: { fields: clusteringColumns(table) },
    ...(spec.kind === 'key_bucket'
      ? { rangePartitioning: { field: spec.field, range: { start: '0', end: String(KEY_BUCKETS), interval: '1' } } }
      : { timePartitioning: { type: 'DAY', field: spec.field } }),
    ...(spec.kind === 'epoch_ns'
      ? {
          description: `Partitioned on ${spec.field}: ${spec.column} (ns epoch) as a TIMESTAMP, computed by query-sync at load time.`,
        }
      : {}),
    labels: { 'query-sync': 'table' },
  };
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
  };
}

/** Standard SQL name of a BigQuery type as tables.get reports it. */
export function standardType(type: string | null | undefined): string {
  const upper = (type ?? '').toUpperCase();
  return LEGACY_TYPE_NAMES[upper] ?? upper;
}

/** The logical type whose BigQuery type (per `column-types.ts`) is `type`, if any. */
export function logicalType(type: string | null | undefined): LogicalType | undefined {
  const standard = standardType(type);
  return (Object.keys(COLUMN_TYPES) as LogicalType[]).find((t) => bigqueryType(t) === standard);
}
