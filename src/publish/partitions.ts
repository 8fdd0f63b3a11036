import type { LogicalType, ResourceDefinition, Row, TableSchema } from '../core/types.js';

/**
 * How a published table is cut into Parquet partitions by UTC day (`dt=2026-11-26`), so a publish
 * rewrites only the days a run touched. Only tables whose day column never changes for a key are
 * partitioned (an event's `timestamp`, a span's `start_time_ns`): a row that moved between days
 * would leave its old copy in a partition not rewritten. Every other table is one file, rewritten
 * when touched (they are small beside events and traces). The day column is the resource's
 * `partitionColumn`, declared once in connectors/ (BigQuery partitions by it too); a table without
 * one, or whose column is missing or of another type, is unpartitioned. (BigQuery's own
 * partitioning of the warehouse table is another thing: `load/bigquery/rows.ts` `BigQueryPartitioning`.)
 */
export interface DayCut {
  readonly column: string;
  /** `timestamp`: a TIMESTAMPTZ; `ns`: a BIGINT of Unix nanoseconds. */
  readonly kind: 'timestamp' | 'ns';
}

/** The cut of a day column by its type: an instant, or Unix nanoseconds; none for another type. */
function specOf(column: string | undefined, type: LogicalType | undefined): DayCut | undefined {
  if (column === undefined) return undefined;
  if (type === 'timestamp') return { column, kind: 'timestamp' };
  if (type === 'int64') return { column, kind: 'ns' };
  return undefined;
}

/** The tables cut by day, by name: each resource with a `partitionColumn` of a declared day type. */
export function partitionedTables(
  resources: readonly Pick<ResourceDefinition, 'name' | 'partitionColumn' | 'columns'>[],
): Readonly<Record<string, DayCut>> {
  const out: Record<string, DayCut> = {};
  for (const r of resources) {
    const spec = specOf(
      r.partitionColumn,
      r.partitionColumn === undefined ? undefined : r.columns?.[r.partitionColumn],
    );
    if (spec !== undefined) out[r.name] = spec;
  }
  return out;
}

/** The day cut of a table as written (its schema carries its resource's `partitionColumn`). */
export function partitionOfTable(table: Pick<TableSchema, 'partitionColumn' | 'columns'>): DayCut | undefined {
  const column = table.partitionColumn;
  return specOf(column, table.columns.find((c) => c.name === column)?.type);
}

/** The partition of a table with no day column. */
export const WHOLE = '';
/** The partition of rows whose day column is NULL. */
const NULL_DAY = 'dt=null';

const NS_PER_MS = 1_000_000n;

/** The partition (`dt=YYYY-MM-DD`) of a row as written: undefined when its day cannot be told (then the whole table is rewritten). */
export function partitionOfRow(spec: DayCut, row: Row): string | undefined {
  const value = row[spec.column];
  if (value === null || value === undefined) return NULL_DAY;
  let ms: number;
  if (spec.kind === 'timestamp') ms = Date.parse(String(value));
  else {
    try {
      ms = Number(BigInt(typeof value === 'bigint' ? value : String(value)) / NS_PER_MS);
    } catch {
      return undefined;
    }
  }
  if (!Number.isFinite(ms)) return undefined;
  return `dt=${new Date(ms).toISOString().slice(0, 10)}`;
}

/** SQL giving a row's partition name (the session is in UTC). */
export function partitionSql(spec: DayCut | undefined, quote: (name: string) => string): string {
  if (spec === undefined) return `''`;
  const c = quote(spec.column);
  const day = spec.kind === 'timestamp' ? c : `make_timestamp(${c} // 1000)`;
  return `CASE WHEN ${c} IS NULL THEN '${NULL_DAY}' ELSE 'dt=' || strftime(${day}, '%Y-%m-%d') END`;
}

/** SQL condition selecting one partition's rows: a range on the column, so DuckDB skips row groups by their min/max. */
export function partitionFilter(spec: DayCut | undefined, partition: string, quote: (name: string) => string): string {
  if (spec === undefined || partition === WHOLE) return 'TRUE';
  const c = quote(spec.column);
  if (partition === NULL_DAY) return `${c} IS NULL`;
  const day = /^dt=(\d{4}-\d{2}-\d{2})$/.exec(partition)?.[1];
  if (day === undefined) throw new Error(`unreachable: partition name ${partition}`);
  const from = Date.parse(`${day}T00:00:00Z`);
  const to = from + 86_400_000;
  if (spec.kind === 'timestamp') {
    return `${c} >= TIMESTAMPTZ '${new Date(from).toISOString()}' AND ${c} < TIMESTAMPTZ '${new Date(to).toISOString()}'`;
  }
  return `${c} >= ${BigInt(from) * NS_PER_MS} AND ${c} < ${BigInt(to) * NS_PER_MS}`;
}
