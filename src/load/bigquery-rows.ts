import { LoadError } from '../core/errors.js';
import type { CellValue, ColumnDef, Row, TableSchema } from '../core/types.js';

/**
 * Rows → newline-delimited JSON for a BigQuery load job, and the partition dates a batch touches.
 * Pure: no I/O, no client.
 *
 * How each logical type is written (load-job rules from
 * https://cloud.google.com/bigquery/docs/loading-data-cloud-storage-json):
 * - `int64`: a quoted decimal string. The docs ask for integers outside ±(2^53−1) to be passed as
 *   strings "to avoid data corruption"; writing every INT64 that way keeps `*_ns` values exact.
 * - `json`: the JSON text spliced in as a raw JSON value ("a field declared as JSON type is loaded
 *   with the raw JSON values"). Quoting it would store a JSON *string*. Splicing the text (never
 *   re-serialising it) keeps integers beyond 2^53 as the exact digits the normalizer wrote.
 * - `timestamp`: the ISO-8601 string, fractional seconds cut to microseconds (BigQuery's precision).
 * - `float64`: a JSON number; NaN and ±Infinity, which JSON cannot write, as the strings BigQuery
 *   accepts for FLOAT64.
 * - `string`, `bool`: as JSON. Unicode is written unescaped (UTF-8), which the load accepts.
 */

/**
 * Derived DATE column the table is partitioned on when the partition column is an INT64 ns epoch
 * (traces' `start_time_ns`). BigQuery partitions only on a DATE/TIMESTAMP/DATETIME column or an
 * integer range, not on an expression over INT64, so the date is computed here at load time.
 */
export const PARTITION_DATE_COLUMN = '_partition_date';

const NS_PER_DAY = 86_400_000_000_000n;
const MS_PER_DAY = 86_400_000;

/** How a table is partitioned in BigQuery (by day), derived from `table.partitionColumn`. */
export type PartitionSpec =
  /** `PARTITION BY DATE(column)` on a TIMESTAMP column. */
  | { readonly kind: 'timestamp'; readonly column: string }
  /** `PARTITION BY _partition_date`, filled from an INT64 nanosecond epoch column. */
  | { readonly kind: 'epoch_ns'; readonly column: string };

/** The UTC dates a batch writes into: what the MERGE may prune to. */
export interface PartitionRange {
  /** Smallest partition date (`YYYY-MM-DD`), absent when every row has a NULL partition value. */
  readonly min: string | undefined;
  readonly max: string | undefined;
  /** Some row has a NULL partition value (BigQuery's `__NULL__` partition). */
  readonly hasNull: boolean;
}

/**
 * The partitioning of `table`, or `undefined` when it has no partition column. Throws `LoadError`
 * (terminal) when the column is missing or of a type BigQuery cannot partition by day.
 */
export function partitionSpec(table: TableSchema): PartitionSpec | undefined {
  const name = table.partitionColumn;
  if (name === undefined) return undefined;
  const column = table.columns.find((c) => c.name === name);
  if (column === undefined) {
    throw new LoadError(
      `BigQuery: partition column "${name}" is not among the columns of table ${table.name}`,
      false,
      { context: { resource: table.name } },
    );
  }
  if (column.type === 'timestamp') return { kind: 'timestamp', column: name };
  if (column.type === 'int64') return { kind: 'epoch_ns', column: name };
  throw new LoadError(
    `BigQuery: partition column "${name}" of table ${table.name} is ${column.type}; expected timestamp or int64 (ns epoch)`,
    false,
    { context: { resource: table.name } },
  );
}

/** UTC date (`YYYY-MM-DD`) of a nanosecond epoch, computed on the exact bigint (floor division). */
export function dateOfEpochNs(ns: bigint): string {
  let days = ns / NS_PER_DAY; // truncates toward zero
  if (ns % NS_PER_DAY < 0n) days -= 1n; // floor for instants before 1970
  // |days| < 2^17 for any int64 ns, so the Number is exact.
  return new Date(Number(days) * MS_PER_DAY).toISOString().slice(0, 10);
}

/**
 * UTC date (`YYYY-MM-DD`) of an ISO-8601 instant, as BigQuery's `DATE(timestamp)` computes it.
 * Fractional seconds are dropped first: a day boundary falls on a whole second, so they never move
 * the date, and `Date.parse` would otherwise round sub-millisecond digits.
 */
export function dateOfTimestamp(iso: string): string | undefined {
  const ms = Date.parse(iso.replace(/(\d{2}:\d{2}:\d{2})\.\d+/, '$1'));
  if (Number.isNaN(ms)) return undefined;
  return new Date(ms).toISOString().slice(0, 10);
}

/** The rows as NDJSON (one line per row, `\n`-terminated) and the partition dates they touch. */
export interface EncodedBatch {
  readonly ndjson: string;
  readonly range: PartitionRange | undefined;
}

/**
 * Encode `rows` for a load job into a table with `table.columns` (+ `_partition_date` when the
 * partition column is an ns epoch). Every declared column is written, NULL as `null`; cells of
 * columns the table does not declare are not written. Throws `LoadError` (terminal) for a cell
 * that cannot be written as its column's type.
 */
export function encodeRows(table: TableSchema, rows: readonly Row[]): EncodedBatch {
  const spec = partitionSpec(table);
  const names = table.columns.map((c) => JSON.stringify(c.name));
  const partitionKey = JSON.stringify(PARTITION_DATE_COLUMN);
  let min: string | undefined;
  let max: string | undefined;
  let hasNull = false;
  const lines: string[] = [];
  for (const row of rows) {
    const parts: string[] = [];
    table.columns.forEach((column, i) => {
      parts.push(`${names[i] ?? ''}:${encodeCell(table.name, column, row[column.name])}`);
    });
    if (spec !== undefined) {
      const date = partitionDateOf(table.name, spec, row[spec.column]);
      if (date === undefined) hasNull = true;
      else {
        if (min === undefined || date < min) min = date;
        if (max === undefined || date > max) max = date;
      }
      if (spec.kind === 'epoch_ns') parts.push(`${partitionKey}:${date === undefined ? 'null' : `"${date}"`}`);
    }
    lines.push(`{${parts.join(',')}}\n`);
  }
  return { ndjson: lines.join(''), range: spec === undefined ? undefined : { min, max, hasNull } };
}

function partitionDateOf(table: string, spec: PartitionSpec, value: CellValue | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (spec.kind === 'epoch_ns') return dateOfEpochNs(BigInt(int64Text(table, spec.column, value)));
  const date = typeof value === 'string' ? dateOfTimestamp(value) : undefined;
  if (date === undefined) throw cellError(table, spec.column, 'an ISO-8601 timestamp', value);
  return date;
}

function encodeCell(table: string, column: ColumnDef, value: CellValue | undefined): string {
  if (value === null || value === undefined) return 'null';
  switch (column.type) {
    case 'string':
      return JSON.stringify(typeof value === 'string' ? value : String(value));
    case 'int64':
      return `"${int64Text(table, column.name, value)}"`;
    case 'float64':
      return float64Text(table, column.name, value);
    case 'bool':
      if (typeof value === 'boolean') return value ? 'true' : 'false';
      throw cellError(table, column.name, 'a boolean', value);
    case 'timestamp':
      if (typeof value === 'string') return JSON.stringify(value.replace(/(\.\d{6})\d+/, '$1'));
      throw cellError(table, column.name, 'an ISO-8601 timestamp string', value);
    case 'json':
      return rawJson(table, column.name, value);
  }
}

/** Exact decimal digits of an int64 cell; never goes through a float. */
function int64Text(table: string, column: string, value: CellValue): string {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  if (typeof value === 'string' && /^-?\d+$/.test(value)) return value;
  throw cellError(table, column, 'an integer', value);
}

function float64Text(table: string, column: string, value: CellValue): string {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number') {
    if (Number.isFinite(value)) return JSON.stringify(value);
    return Number.isNaN(value) ? '"NaN"' : value > 0 ? '"Infinity"' : '"-Infinity"';
  }
  throw cellError(table, column, 'a number', value);
}

/**
 * A JSON cell spliced in as a raw value. Valid JSON cannot hold a raw line break inside a string,
 * so any CR/LF left after validation is insignificant whitespace and is flattened to keep one row
 * per line.
 */
function rawJson(table: string, column: string, value: NonNullable<CellValue>): string {
  if (typeof value === 'number') return float64Text(table, column, value);
  if (typeof value === 'bigint' || typeof value === 'boolean') return String(value);
  try {
    JSON.parse(value);
  } catch {
    throw cellError(table, column, 'JSON text', value);
  }
  return value.replace(/[\r\n]+/g, ' ');
}

function cellError(table: string, column: string, expected: string, value: CellValue): LoadError {
  // The value itself is not quoted: it is record data and may be sensitive.
  return new LoadError(
    `BigQuery: column "${column}" of table ${table} expects ${expected}, got a ${typeof value} that is not one`,
    false,
    { context: { resource: table } },
  );
}
