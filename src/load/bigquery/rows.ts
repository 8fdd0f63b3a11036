import { createHash } from 'node:crypto';
import { LoadError } from '../../core/errors.js';
import type { CellValue, ColumnDef, Row, TableSchema } from '../../core/types.js';
import { canonicalTimestamp } from '../../normalize/timestamp.js';

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
 * The derived TIMESTAMP column a table is partitioned on when its partition column is an INT64 ns
 * epoch (traces' `start_time_ns` → `start_time_ts`). BigQuery partitions only on a DATE, TIMESTAMP
 * or DATETIME column (or an integer range), not on an expression over INT64
 * (https://cloud.google.com/bigquery/docs/partitioned-tables), so query-sync writes the instant,
 * truncated to microseconds, at load time. The name must not start with `_PARTITION`: BigQuery
 * reserves that prefix for column names (https://cloud.google.com/bigquery/docs/schemas#column_names).
 */
export function derivedTimestampColumn(column: string): string {
  return `${column.replace(/_ns$/, '')}_ts`;
}

/** Per-row hash of a full-refresh table (see `rowHash`): unchanged rows are neither loaded nor merged. */
export const ROW_HASH_COLUMN = 'row_hash';

/**
 * Integer-range partition column of tables with no time column that never changes (users,
 * conversations, signals: `first_seen` or `started_at` can move earlier when a late event is
 * indexed, and a row whose partition value moves would be missed by a pruned MERGE and inserted
 * twice). The key's hash is the one value that never changes, so a MERGE can prune to the buckets
 * of the keys it writes. 4,000 buckets: BigQuery lets one job modify at most 4,000 partitions and a
 * table hold 10,000 (https://cloud.google.com/bigquery/quotas#partitioned_tables).
 */
export const KEY_BUCKET_COLUMN = 'key_bucket';
export const KEY_BUCKETS = 4_000;

/**
 * How a table is partitioned in BigQuery, derived from `table.partitionColumn` (the published read
 * copy's cut into Parquet files by day is another thing: `publish/partitions.ts` `DayCut`).
 */
export type BigQueryPartitioning =
  /** `PARTITION BY DATE(column)` on a TIMESTAMP column. */
  | { readonly kind: 'timestamp'; readonly column: string; readonly field: string }
  /** `PARTITION BY DATE(field)`, `field` a TIMESTAMP filled from the INT64 ns epoch `column`. */
  | { readonly kind: 'epoch_ns'; readonly column: string; readonly field: string }
  /** `PARTITION BY RANGE_BUCKET(key_bucket, …)`, `key_bucket` a hash of the key, filled at load time. */
  | { readonly kind: 'key_bucket'; readonly column: string; readonly field: string };

/** The partitions a batch writes into: what the MERGE prunes to. */
export interface PartitionDates {
  /** Every partition value of the batch (a `YYYY-MM-DD` date, or a key bucket number), sorted. */
  readonly dates: readonly string[];
  /** Some row has a NULL partition value (BigQuery's `__NULL__` partition). */
  readonly hasNull: boolean;
}

/**
 * The partitioning of `table`, or `undefined` when it has no partition column. Throws `LoadError`
 * (terminal) when the column is missing or of a type BigQuery cannot partition by day.
 */
export function partitionSpec(table: TableSchema): BigQueryPartitioning {
  const name = table.partitionColumn;
  if (name === undefined) return { kind: 'key_bucket', column: KEY_BUCKET_COLUMN, field: KEY_BUCKET_COLUMN };
  const column = table.columns.find((c) => c.name === name);
  if (column === undefined) {
    throw new LoadError(`BigQuery: partition column "${name}" is not among the columns of table ${table.name}`, false, {
      context: { resource: table.name },
    });
  }
  if (column.type === 'timestamp') return { kind: 'timestamp', column: name, field: name };
  if (column.type === 'int64') return { kind: 'epoch_ns', column: name, field: derivedTimestampColumn(name) };
  throw new LoadError(
    `BigQuery: partition column "${name}" of table ${table.name} is ${column.type}; expected timestamp or int64 (ns epoch)`,
    false,
    { context: { resource: table.name } },
  );
}

/** The canonical UTC timestamp (microseconds, truncated) of a nanosecond epoch, exact on the bigint. */
export function timestampOfEpochNs(ns: bigint): string {
  let seconds = ns / 1_000_000_000n;
  let rest = ns % 1_000_000_000n;
  if (rest < 0n) {
    seconds -= 1n;
    rest += 1_000_000_000n;
  }
  const whole = new Date(Number(seconds) * 1000).toISOString().slice(0, 19);
  const micros = (rest / 1000n).toString().padStart(6, '0').replace(/0+$/, '');
  return `${whole}${micros.length > 0 ? `.${micros}` : ''}Z`;
}

/**
 * UTC date (`YYYY-MM-DD`) of an instant, as BigQuery's `DATE(timestamp)` computes it. The instant
 * is canonicalised first (see `normalize/timestamp.ts`), so offsets and missing seconds are handled
 * the same way the loaded value is.
 */
export function dateOfTimestamp(iso: string): string | undefined {
  return canonicalTimestamp(iso)?.slice(0, 10);
}

/** One encoded row: its NDJSON line (`\n`-terminated), its partition date, and its hash when asked. */
export interface EncodedRow {
  readonly line: string;
  /** UTC date of the partition value; `null` for the `__NULL__` partition; undefined when unpartitioned. */
  readonly date: string | null | undefined;
}

/**
 * Encode one row for a load job into a table with `table.columns` (+ the derived partition column
 * when the partition column is an ns epoch, + `row_hash` when given). Every declared column is
 * written, NULL as `null`; cells of columns the table does not declare are not written. Throws
 * `LoadError` (terminal) for a cell that cannot be written as its column's type.
 */
export function encodeRow(
  table: TableSchema,
  row: Row,
  spec: BigQueryPartitioning | undefined,
  hash?: string,
): EncodedRow {
  const parts: string[] = [];
  for (const column of table.columns)
    parts.push(`${JSON.stringify(column.name)}:${encodeCell(table.name, column, row[column.name])}`);
  let date: string | null | undefined;
  if (spec !== undefined) {
    const value = row[spec.column];
    if (spec.kind === 'key_bucket') {
      const bucket = keyBucket(table, row);
      parts.push(`${JSON.stringify(spec.field)}:"${bucket}"`);
      date = String(bucket);
    } else if (spec.kind === 'epoch_ns') {
      const ts =
        value === null || value === undefined
          ? null
          : timestampOfEpochNs(BigInt(int64Text(table.name, spec.column, value)));
      parts.push(`${JSON.stringify(spec.field)}:${ts === null ? 'null' : `"${ts}"`}`);
      date = ts === null ? null : ts.slice(0, 10);
    } else {
      date = partitionDateOf(table.name, spec, value) ?? null;
    }
  }
  if (hash !== undefined) parts.push(`${JSON.stringify(ROW_HASH_COLUMN)}:"${hash}"`);
  return { line: `{${parts.join(',')}}\n`, date };
}

/** The rows as NDJSON (one line per row) and the partition dates they touch; for tests and small batches. */
export interface EncodedBatch {
  readonly ndjson: string;
  readonly partitions: PartitionDates | undefined;
}

export function encodeRows(table: TableSchema, rows: readonly Row[]): EncodedBatch {
  const spec = partitionSpec(table);
  const dates = new PartitionDateSet();
  const lines: string[] = [];
  for (const row of rows) {
    const encoded = encodeRow(table, row, spec);
    dates.add(encoded.date);
    lines.push(encoded.line);
  }
  return { ndjson: lines.join(''), partitions: dates.value() };
}

/** Collects the partition dates of a batch. */
export class PartitionDateSet {
  private readonly dates = new Set<string>();
  private hasNull = false;

  add(date: string | null | undefined): void {
    if (date === null) this.hasNull = true;
    else if (date !== undefined) this.dates.add(date);
  }

  value(): PartitionDates {
    // Dates sort as text; bucket numbers as numbers.
    return {
      dates: [...this.dates].sort((a, b) =>
        /^\d+$/.test(a) && /^\d+$/.test(b) ? Number(a) - Number(b) : a < b ? -1 : a > b ? 1 : 0,
      ),
      hasNull: this.hasNull,
    };
  }
}

/** The key's bucket: the first 32 bits of SHA-256 over the key cells, modulo `KEY_BUCKETS`. */
export function keyBucket(table: TableSchema, row: Row): number {
  const hash = createHash('sha256');
  for (const column of table.key) hash.update(`${String(row[column])}\u0000`);
  return hash.digest().readUInt32BE(0) % KEY_BUCKETS;
}

function partitionDateOf(table: string, spec: BigQueryPartitioning, value: CellValue | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
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
    case 'timestamp': {
      // The canonical UTC form: the only one BigQuery's JSON loader is sure to accept.
      const canonical = typeof value === 'string' ? canonicalTimestamp(value) : undefined;
      if (canonical !== undefined) return JSON.stringify(canonical);
      throw cellError(table, column.name, 'an ISO-8601 timestamp with an offset', value);
    }
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

/**
 * A hash of what a row says, for full-refresh tables: every non-null cell but `excluded` (the
 * `_synced_at` and `_run_id` of the run), in column-name order, as it would be loaded. A column that appears
 * later with NULLs in old rows does not change old rows' hashes.
 */
export function rowHash(table: TableSchema, row: Row, excluded: readonly string[]): string {
  const hash = createHash('sha256');
  const columns = [...table.columns]
    .filter((c) => !excluded.includes(c.name))
    .sort((a, b) => (a.name < b.name ? -1 : 1));
  for (const column of columns) {
    const value = row[column.name];
    if (value === null || value === undefined) continue;
    hash.update(`${column.name}\u0000${encodeCell(table.name, column, value)}\u0000`);
  }
  return hash.digest('hex').slice(0, 32);
}
