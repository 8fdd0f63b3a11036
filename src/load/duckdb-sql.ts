import { duckdbType } from '../core/column-types.js';
import type { LogicalType, TableSchema } from '../core/types.js';

/** The SQL the DuckDB destination runs, as text (tested and documented on its own). */

/** The MERGE that upserts the staged batch; exported for tests and for documentation. */
export function mergeSql(table: TableSchema, stage: string): string {
  const casts = table.columns
    .map((c) => `CAST(${ident(c.name)} AS ${duckdbType(c.type)}) AS ${ident(c.name)}`)
    .join(', ');
  const on = table.key.map((k) => `t.${ident(k)} = s.${ident(k)}`).join(' AND ');
  const v = table.versionColumn === undefined ? undefined : ident(table.versionColumn);
  // An older copy of a row (e.g. a user seen by a backfill of an old window) never overwrites a newer one.
  const matched = v === undefined ? 'WHEN MATCHED' : `WHEN MATCHED AND (t.${v} IS NULL OR s.${v} >= t.${v})`;
  // Explicit column lists: the table may have columns this batch does not name (they keep their value).
  const names = table.columns.map((c) => ident(c.name));
  const set = names.map((n) => `${n} = s.${n}`).join(', ');
  return `MERGE INTO main.${ident(table.name)} AS t
USING (SELECT ${casts} FROM temp.main.${ident(stage)}) AS s
ON ${on}
${matched} THEN UPDATE SET ${set}
WHEN NOT MATCHED THEN INSERT (${names.join(', ')}) VALUES (${names.map((n) => `s.${n}`).join(', ')})`;
}

export function logicalFromDuckdb(type: string): LogicalType {
  const t = type.toUpperCase();
  if (t === 'BIGINT' || t === 'INTEGER' || t === 'HUGEINT' || t === 'SMALLINT') return 'int64';
  if (t === 'DOUBLE' || t === 'FLOAT' || t.startsWith('DECIMAL')) return 'float64';
  if (t === 'BOOLEAN') return 'bool';
  if (t.startsWith('TIMESTAMP')) return 'timestamp';
  if (t === 'JSON') return 'json';
  return 'string';
}

/** A SQL string literal. */
export function sqlString(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}

/** Quote an identifier for DuckDB. */
export function ident(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
