import type { LogicalType } from './types.js';

/**
 * The one mapping from logical column types to each destination's SQL types. Both destinations read
 * it, so a column means the same thing in DuckDB and in BigQuery.
 *
 * | logical   | DuckDB      | BigQuery  | written as                                  |
 * |-----------|-------------|-----------|---------------------------------------------|
 * | string    | VARCHAR     | STRING    | the exact string                            |
 * | int64     | BIGINT      | INT64     | exact integer (`bigint`), e.g. `*_ns` fields |
 * | float64   | DOUBLE      | FLOAT64   | number                                      |
 * | bool      | BOOLEAN     | BOOL      | boolean                                     |
 * | timestamp | TIMESTAMPTZ | TIMESTAMP | ISO-8601 instant                            |
 * | json      | JSON        | JSON      | JSON text of a nested object or array       |
 */
export const COLUMN_TYPES: Readonly<Record<LogicalType, { readonly duckdb: string; readonly bigquery: string }>> = {
  string: { duckdb: 'VARCHAR', bigquery: 'STRING' },
  int64: { duckdb: 'BIGINT', bigquery: 'INT64' },
  float64: { duckdb: 'DOUBLE', bigquery: 'FLOAT64' },
  bool: { duckdb: 'BOOLEAN', bigquery: 'BOOL' },
  timestamp: { duckdb: 'TIMESTAMPTZ', bigquery: 'TIMESTAMP' },
  json: { duckdb: 'JSON', bigquery: 'JSON' },
};

export function duckdbType(type: LogicalType): string {
  return COLUMN_TYPES[type].duckdb;
}

export function bigqueryType(type: LogicalType): string {
  return COLUMN_TYPES[type].bigquery;
}
