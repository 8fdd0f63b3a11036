import { duckdbType } from '../../core/column-types.js';
import type { BridgeSchema, LogicalType, TableSchema } from '../../core/types.js';

/** The SQL the DuckDB destination runs, as text (tested and documented on its own). */

/** Our columns a re-read changes without changing the row's content. */
const RUN_ID = '_run_id';
const SYNCED_AT = '_synced_at';

/** The MERGE that upserts the staged batch; exported for tests and for documentation. */
export function mergeSql(table: TableSchema, stage: string): string {
  const on = table.key.map((k) => `t.${ident(k)} = s.${ident(k)}`).join(' AND ');
  const v = table.versionColumn === undefined ? undefined : ident(table.versionColumn);
  // An older copy of a row (e.g. a user seen by a backfill of an old window) never overwrites a newer one.
  const conditions = v === undefined ? [] : [`(t.${v} IS NULL OR s.${v} >= t.${v})`];
  // A copy with the same content (apart from when and by which run it was read) is not written
  // again: a re-read that finds nothing new changes nothing (and the bridge, which follows the
  // rows this run wrote, is left as it is: see `bridgeSql`). Only where rows carry `_run_id`.
  if (table.columns.some((c) => c.name === RUN_ID)) {
    const compared = table.columns.filter(
      (c) => !(table.insertOnly ?? []).includes(c.name) && c.name !== RUN_ID && c.name !== SYNCED_AT,
    );
    if (compared.length > 0)
      conditions.push(
        `(${compared.map((c) => `t.${ident(c.name)} IS DISTINCT FROM s.${ident(c.name)}`).join(' OR ')})`,
      );
  }
  const matched = conditions.length === 0 ? 'WHEN MATCHED' : `WHEN MATCHED AND ${conditions.join(' AND ')}`;
  // Explicit column lists: the table may have columns this batch does not name (they keep their value).
  const names = table.columns.map((c) => ident(c.name));
  // Insert-only columns (e.g. when a search first matched) keep their first value.
  const set = table.columns
    .filter((c) => !(table.insertOnly ?? []).includes(c.name))
    .map((c) => `${ident(c.name)} = s.${ident(c.name)}`)
    .join(', ');
  return `MERGE INTO main.${ident(table.name)} AS t
USING (${castStage(table, stage)}) AS s
ON ${on}
${matched} THEN UPDATE SET ${set}
WHEN NOT MATCHED THEN INSERT (${names.join(', ')}) VALUES (${names.map((n) => `s.${n}`).join(', ')})`;
}

/** The staged batch cast to the table's types, as the MERGE reads it. */
function castStage(table: TableSchema, stage: string): string {
  const casts = table.columns
    .map((c) => `CAST(${ident(c.name)} AS ${duckdbType(c.type)}) AS ${ident(c.name)}`)
    .join(', ');
  return `SELECT ${casts} FROM temp.main.${ident(stage)}`;
}

/**
 * The MERGE's insert clause alone: it writes the staged rows whose keys are not stored and reads
 * the table's key columns alone (the whole MERGE's change test reads every column). Run first for
 * every batch; when it inserted them all (a first sync's, nearly always) it is the whole write, else
 * `mergeSql` follows in the same transaction. (An INSERT ... SELECT would do as much, but DuckDB 1.5.5
 * then corrupted the table's in-memory rows when a batch ran out of memory and was rolled back:
 * "column with index 0 has misaligned count" at the next checkpoint, test/loaders/duckdb.test.ts.)
 */
export function insertSql(table: TableSchema, stage: string): string {
  const on = table.key.map((k) => `t.${ident(k)} = s.${ident(k)}`).join(' AND ');
  const names = table.columns.map((c) => ident(c.name));
  return `MERGE INTO main.${ident(table.name)} AS t
USING (${castStage(table, stage)}) AS s
ON ${on}
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

/**
 * The statements that rewrite a bridge table for the parent keys of a staged batch, run after the
 * parent's MERGE in the same transaction: delete the bridge rows of every parent key the MERGE
 * applied, then unnest those staged arrays (what the MERGE just stored). A staged row the MERGE did
 * not apply (an older copy: its version is below the stored one) leaves its parent's bridge rows as
 * they were. Reading the stage, not the table, keeps each write's cost to its own rows (the
 * parent's JSON column is never scanned whole). `hasArrays`: some staged row carries the array
 * (otherwise there is nothing to insert, only rows to delete). `allApplied`: the batch was inserted
 * whole (`insertSql`), so every staged row is applied without reading the parent back.
 */
export function bridgeSql(
  parent: TableSchema,
  bridge: BridgeSchema,
  stage: string,
  hasArrays: boolean,
  allApplied = false,
): string[] {
  const [projectKey, parentKey] = parent.key as [string, string];
  const b = bridge.definition;
  const table = `main.${ident(bridge.table.name)}`;
  const p = ident(projectKey);
  const k = ident(parentKey);
  const v = parent.versionColumn === undefined ? undefined : ident(parent.versionColumn);
  const versionType = parent.columns.find((c) => c.name === parent.versionColumn)?.type ?? 'string';
  // After the MERGE, a staged row was applied when the stored version is not above it (an
  // equi-join, which DuckDB hashes; a NOT EXISTS here was measured ten times slower).
  // Where rows carry `_run_id`, a staged row the MERGE left as it was (the same content) has the
  // stored row's run id, not this run's: its bridge rows stay as they are.
  const byRun = parent.columns.some((c) => c.name === RUN_ID);
  const appliedWhere = (extra?: string): string => {
    const conditions = [
      ...(v === undefined ? [] : [`(t.${v} IS NULL OR t.${v} <= CAST(s.${v} AS ${duckdbType(versionType)}))`]),
      ...(byRun ? [`t.${ident(RUN_ID)} IS NOT DISTINCT FROM s.${ident(RUN_ID)}`] : []),
      ...(extra === undefined ? [] : [extra]),
    ];
    // Every staged row applied (the batch was inserted: `insertSql`): no need to ask the parent.
    if (allApplied)
      return `SELECT s.* FROM temp.main.${ident(stage)} AS s${extra === undefined ? '' : ` WHERE ${extra}`}`;
    const join =
      v === undefined && !byRun ? '' : ` JOIN main.${ident(parent.name)} AS t ON t.${p} = s.${p} AND t.${k} = s.${k}`;
    return `SELECT s.* FROM temp.main.${ident(stage)} AS s${join}${conditions.length === 0 ? '' : ` WHERE ${conditions.join(' AND ')}`}`;
  };
  const applied = appliedWhere();
  const statements = [
    `DELETE FROM ${table} AS b WHERE EXISTS (SELECT 1 FROM (${applied}) AS s WHERE s.${p} = b.${ident('project_id')} AND s.${k} = b.${ident(b.parentColumn)})`,
  ];
  if (!hasArrays) return statements;
  const src = `CAST(s.${ident(bridge.sourceColumn)} AS JSON)`;
  const fields = b.elementFields.map((f) => {
    const path = sqlString(`$.${JSON.stringify(f.field)}`);
    const extracted =
      f.type === 'string'
        ? `json_extract_string(j.value, ${path})`
        : `TRY_CAST(json_extract(j.value, ${path}) AS ${duckdbType(f.type)})`;
    return `CASE WHEN json_type(j.value) = 'OBJECT' THEN ${extracted} END`;
  });
  const columns = bridge.table.columns.map((c) => ident(c.name));
  // The parent's metadata as staged (a writer without a run id stages no `_run_id`).
  const meta = (name: string, type: string): string =>
    parent.columns.some((c) => c.name === name) ? `CAST(s.${ident(name)} AS ${type})` : `CAST(NULL AS ${type})`;
  statements.push(
    `INSERT INTO ${table} (${columns.join(', ')})
SELECT s.${p}, s.${k}, CAST(j.key AS BIGINT), ${fields.join(', ')}, j.value, ${meta('_synced_at', 'TIMESTAMPTZ')}, ${meta('_run_id', 'VARCHAR')}
FROM (${appliedWhere(`s.${ident(bridge.sourceColumn)} IS NOT NULL`)}) AS s, json_each(${src}) AS j
WHERE json_type(${src}) = 'ARRAY'`,
  );
  return statements;
}
