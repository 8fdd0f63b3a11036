import { bigqueryType } from '../../core/column-types.js';
import { ConfigError, LoadError } from '../../core/errors.js';
import type { BridgeSchema, TableSchema } from '../../core/types.js';
import { canonicalTimestamp } from '../../normalize/timestamp.js';
import {
  KEY_BUCKETS,
  KEY_BUCKET_COLUMN,
  ROW_HASH_COLUMN,
  partitionSpec,
  type PartitionDates,
  type BigQueryPartitioning,
} from './rows.js';

/**
 * The BigQuery DDL and MERGE text, as pure functions: the destination sends the equivalent REST
 * requests (datasets.insert, tables.insert/patch, jobs.insert) and prints these in a dry run, and
 * tests read them without a client.
 */

/** Where tables live. */
export interface BigQueryTarget {
  readonly projectId: string;
  readonly dataset: string;
}

/** One column as BigQuery stores it (standard SQL type name). */
export interface BigQueryColumn {
  readonly name: string;
  readonly type: string;
}

/** How long a staging table lives if the run dies before dropping it. */
export const STAGE_EXPIRATION_MS = 24 * 60 * 60 * 1000;

/**
 * BigQuery allows at most four clustering columns
 * (https://cloud.google.com/bigquery/docs/clustered-tables#limitations).
 */
const MAX_CLUSTERING_COLUMNS = 4;

/**
 * Column names: letters, digits, underscores, not starting with a digit, at most 300 characters,
 * and none of the reserved prefixes, compared case-insensitively
 * (https://cloud.google.com/bigquery/docs/schemas#column_names).
 */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,299}$/;
const RESERVED_COLUMN_PREFIXES: readonly string[] = [
  '_TABLE_',
  '_FILE_',
  '_PARTITION',
  '_ROW_TIMESTAMP',
  '__ROOT__',
  '_COLIDENTIFIER',
];
/** Dataset ids: letters, digits and underscores, up to 1,024 characters. */
const DATASET_ID = /^[A-Za-z0-9_]{1,1024}$/;

/** Check the project, dataset and location options; throws `ConfigError`. */
export function validateTarget(target: BigQueryTarget, location: string): void {
  if (target.projectId.length === 0 || /[`\s]/.test(target.projectId)) {
    throw new ConfigError(`--bq-project: expected a Google Cloud project id, got "${target.projectId}"`);
  }
  if (!DATASET_ID.test(target.dataset)) {
    throw new ConfigError(
      `--bq-dataset: expected letters, digits and underscores (at most 1024), got "${target.dataset}"`,
    );
  }
  if (!/^[A-Za-z0-9-]+$/.test(location)) {
    throw new ConfigError(
      `--bq-location: expected a BigQuery location such as US, EU or europe-west1, got "${location}"`,
    );
  }
}

/** A column or table name, backquoted (GoogleSQL reserves words such as `to`, `range`, `rows`). */
export function quoteIdent(name: string): string {
  if (!IDENTIFIER.test(name)) {
    throw new LoadError(
      `BigQuery: "${name}" is not a valid column or table name (letters, digits, underscores; not starting with a digit; ` +
        'at most 300 characters)',
      false,
    );
  }
  return `\`${name}\``;
}

/**
 * Throw, before anything is sent, when a column name is one BigQuery refuses: invalid characters or
 * length, a reserved prefix (case-insensitive), or two names that differ only in case. A field of
 * the API that breaks these rules needs a rename in its connector.
 */
export function assertColumnNames(table: string, columns: readonly BigQueryColumn[]): void {
  const seen = new Map<string, string>();
  for (const { name } of columns) {
    quoteIdent(name);
    const upper = name.toUpperCase();
    const prefix = RESERVED_COLUMN_PREFIXES.find((p) => upper.startsWith(p));
    if (prefix !== undefined) {
      throw new LoadError(
        `BigQuery: column "${name}" of table ${table} starts with ${prefix}, a prefix BigQuery reserves (in any case); ` +
          'rename the field in its connector (transform) to load it',
        false,
        { context: { resource: table } },
      );
    }
    const prior = seen.get(name.toLowerCase());
    if (prior !== undefined) {
      throw new LoadError(
        `BigQuery: columns "${prior}" and "${name}" of table ${table} differ only in case, and BigQuery column names are ` +
          'case-insensitive; rename one of the fields in its connector (transform) to load both',
        false,
        { context: { resource: table } },
      );
    }
    seen.set(name.toLowerCase(), name);
  }
}

/** `project`.`dataset`.`table`, each part quoted on its own (domain-scoped project ids contain `:`). */
export function tablePath(target: BigQueryTarget, table: string): string {
  return `\`${target.projectId}\`.\`${target.dataset}\`.${quoteIdent(table)}`;
}

/**
 * The columns a table (and its staging table) holds: declared ones, plus the derived partition
 * timestamp when the partition column is an ns epoch, plus `row_hash` for full-refresh tables.
 */
export function bigQueryColumns(table: TableSchema): BigQueryColumn[] {
  const columns = table.columns.map((c) => ({ name: c.name, type: bigqueryType(c.type) }));
  const spec = partitionSpec(table);
  if (spec.kind === 'epoch_ns' && !columns.some((c) => c.name === spec.field))
    columns.push({ name: spec.field, type: 'TIMESTAMP' });
  if (spec.kind === 'key_bucket' && !columns.some((c) => c.name === spec.field))
    columns.push({ name: spec.field, type: 'INT64' });
  if (table.fullRefresh === true && !columns.some((c) => c.name === ROW_HASH_COLUMN))
    columns.push({ name: ROW_HASH_COLUMN, type: 'STRING' });
  return columns;
}

/** Clustering columns: `project_id` and the key (`table.key`), as far as BigQuery allows. */
export function clusteringColumns(table: TableSchema): string[] {
  return table.key.slice(0, MAX_CLUSTERING_COLUMNS);
}

function createSchemaDdl(target: BigQueryTarget, location: string): string {
  return `CREATE SCHEMA IF NOT EXISTS \`${target.projectId}\`.\`${target.dataset}\` OPTIONS (location = '${location}');`;
}

/** `CREATE TABLE IF NOT EXISTS` with day partitioning and clustering. */
export function createTableDdl(target: BigQueryTarget, table: TableSchema): string {
  const spec = partitionSpec(table);
  const lines = [
    `CREATE TABLE IF NOT EXISTS ${tablePath(target, table.name)} (`,
    bigQueryColumns(table)
      .map((c) => `  ${quoteIdent(c.name)} ${c.type}`)
      .join(',\n'),
    ')',
  ];
  lines.push(
    spec.kind === 'key_bucket'
      ? `PARTITION BY RANGE_BUCKET(${quoteIdent(spec.field)}, GENERATE_ARRAY(0, ${KEY_BUCKETS}, 1))`
      : `PARTITION BY DATE(${quoteIdent(spec.field)})`,
  );
  lines.push(`CLUSTER BY ${clusteringColumns(table).map(quoteIdent).join(', ')}`);
  // Expiration off explicitly: a dataset default would otherwise delete tables (or old
  // partitions) that state says are loaded.
  const options = ['expiration_timestamp = NULL'];
  if (spec.kind !== 'key_bucket') options.push('partition_expiration_days = NULL');
  if (spec.kind === 'epoch_ns') {
    options.push(
      `description = '${spec.field} = ${spec.column} (ns epoch) as a TIMESTAMP, computed by query-sync at load time'`,
    );
  }
  lines.push(`OPTIONS (${options.join(', ')})`);
  return `${lines.join('\n')};`;
}

/** The staging table: same columns, no partitioning, expires after a day. */
function createStageDdl(target: BigQueryTarget, table: TableSchema, stage: string): string {
  const columns = bigQueryColumns(table)
    .map((c) => `  ${quoteIdent(c.name)} ${c.type}`)
    .join(',\n');
  const hours = STAGE_EXPIRATION_MS / 3_600_000;
  return (
    `CREATE TABLE ${tablePath(target, stage)} (\n${columns}\n)\n` +
    `OPTIONS (expiration_timestamp = TIMESTAMP_ADD(CURRENT_TIMESTAMP(), INTERVAL ${hours} HOUR));`
  );
}

/** `ALTER TABLE … ADD COLUMN IF NOT EXISTS …` for columns the table lacks (undefined when none). */
function addColumnsDdl(target: BigQueryTarget, table: string, columns: readonly BigQueryColumn[]): string | undefined {
  if (columns.length === 0) return undefined;
  const adds = columns.map((c) => `ADD COLUMN IF NOT EXISTS ${quoteIdent(c.name)} ${c.type}`).join(',\n  ');
  return `ALTER TABLE ${tablePath(target, table)}\n  ${adds};`;
}

/**
 * The partition-pruning condition for the MERGE's ON clause: the exact set of dates the batch
 * writes into, as an IN list of literal dates (a BETWEEN would scan every day in between for an
 * unordered batch). Rows whose partition value is NULL live in the `__NULL__` partition, which the
 * IN list does not reach, so it is added explicitly when the batch has such rows.
 */
export function pruningPredicate(spec: BigQueryPartitioning, partitions: PartitionDates): string {
  const column = `T.${quoteIdent(spec.field)}`;
  const isNull = `${column} IS NULL`;
  if (spec.kind === 'key_bucket') return `${column} IN (${partitions.dates.join(', ')})`;
  if (partitions.dates.length === 0) return isNull;
  const dates = partitions.dates.map((d) => `DATE '${d}'`).join(', ');
  const inList = `DATE(${column}) IN (${dates})`;
  return partitions.hasNull ? `(${inList} OR ${isNull})` : inList;
}

/**
 * The one statement that upserts the staged batch into the target.
 *
 * - ON: the key columns, plus the partition-pruning predicate when the table is partitioned. This
 *   assumes a row's partition value never changes (an event's `timestamp`, a span's start): a
 *   copy of a key in another partition would not be matched.
 * - WHEN MATCHED: with a version column, only when the incoming version is >= the stored one or the
 *   stored one is NULL (an older copy never overwrites a newer one). Same rule as DuckDB.
 * - Explicit column lists: the target may have columns this batch does not name; they keep their
 *   value on update and are NULL on insert.
 */
export function mergeSql(params: {
  readonly target: BigQueryTarget;
  readonly table: TableSchema;
  readonly stage: string;
  readonly partitions?: PartitionDates;
}): string {
  const { target, table, stage, partitions } = params;
  const spec = partitionSpec(table);
  const names = bigQueryColumns(table).map((c) => quoteIdent(c.name));
  const keys = new Set(table.key);
  const on = table.key.map((k) => `T.${quoteIdent(k)} = S.${quoteIdent(k)}`);
  if (partitions !== undefined) on.push(pruningPredicate(spec, partitions));
  const lines = [
    `MERGE ${tablePath(target, table.name)} AS T`,
    `USING ${tablePath(target, stage)} AS S`,
    `ON ${on.join(' AND ')}`,
  ];
  // The key bucket is a function of the key: never updated; nor are insert-only columns.
  const updates = bigQueryColumns(table)
    .filter((c) => !keys.has(c.name) && c.name !== KEY_BUCKET_COLUMN && !(table.insertOnly ?? []).includes(c.name))
    .map((c) => `${quoteIdent(c.name)} = S.${quoteIdent(c.name)}`);
  if (updates.length > 0) {
    const v = table.versionColumn === undefined ? undefined : quoteIdent(table.versionColumn);
    const h = quoteIdent(ROW_HASH_COLUMN);
    // Full refresh: a row that did not change is not rewritten.
    const condition =
      v !== undefined
        ? ` AND (T.${v} IS NULL OR S.${v} >= T.${v})`
        : table.fullRefresh === true
          ? ` AND (T.${h} IS DISTINCT FROM S.${h})`
          : '';
    lines.push(`WHEN MATCHED${condition} THEN`, `  UPDATE SET ${updates.join(', ')}`);
  }
  lines.push(
    'WHEN NOT MATCHED THEN',
    `  INSERT (${names.join(', ')}) VALUES (${names.map((n) => `S.${n}`).join(', ')})`,
  );
  return `${lines.join('\n')};`;
}

/** Everything one write does, as text: what a dry run prints. */
export interface BigQueryWritePlan {
  readonly createSchema?: string;
  readonly createTable?: string;
  readonly alterTable?: string;
  readonly createStage: string;
  readonly load: string;
  readonly merge: string;
  readonly dropStage: string;
}

/**
 * Build the statements for one write. `include.createSchema`/`createTable` say whether the dataset
 * and table are (believed) missing; `newColumns` are columns the table lacks.
 */
export function planWrite(params: {
  readonly target: BigQueryTarget;
  readonly location: string;
  readonly table: TableSchema;
  readonly stage: string;
  readonly rowCount: number;
  readonly partitions?: PartitionDates;
  readonly createSchema: boolean;
  readonly createTable: boolean;
  readonly newColumns: readonly BigQueryColumn[];
}): BigQueryWritePlan {
  const { target, table, stage } = params;
  const alter = addColumnsDdl(target, table.name, params.newColumns);
  return {
    ...(params.createSchema ? { createSchema: createSchemaDdl(target, params.location) } : {}),
    ...(params.createTable ? { createTable: createTableDdl(target, table) } : {}),
    ...(alter === undefined ? {} : { alterTable: alter }),
    createStage: createStageDdl(target, table, stage),
    load:
      `-- load job: ${params.rowCount} row(s) as NEWLINE_DELIMITED_JSON into ${tablePath(target, stage)} ` +
      '(createDisposition CREATE_NEVER, writeDisposition WRITE_EMPTY)',
    merge: mergeSql({
      target,
      table,
      stage,
      ...(params.partitions === undefined ? {} : { partitions: params.partitions }),
    }),
    dropStage: `DROP TABLE IF EXISTS ${tablePath(target, stage)};`,
  };
}

/** The plan as printable lines, in execution order. */
export function planLines(plan: BigQueryWritePlan): string[] {
  return [
    plan.createSchema,
    plan.createTable,
    plan.alterTable,
    plan.createStage,
    plan.load,
    plan.merge,
    plan.dropStage,
  ].filter((s): s is string => s !== undefined);
}

/**
 * The script that rewrites a bridge table for the parent keys of a staged batch, after the parent's
 * MERGE, in one transaction: delete the bridge rows of every parent key in the stage, then unnest
 * those parents' arrays as stored (`JSON_QUERY_ARRAY … WITH OFFSET`). A parent table without the
 * array column yet only has rows deleted. The DuckDB destination runs the same two statements.
 */
export function bridgeScript(params: {
  readonly target: BigQueryTarget;
  readonly parent: TableSchema;
  readonly bridge: BridgeSchema;
  readonly stage: string;
  readonly parentHasSource: boolean;
  /** The batch's partitions: the parent is read only there (as the MERGE prunes), not whole. */
  readonly partitions?: PartitionDates;
}): string {
  const { target, parent, bridge, stage } = params;
  const [projectKey, parentKey] = parent.key as [string, string];
  const b = bridge.definition;
  const q = quoteIdent;
  const table = tablePath(target, bridge.table.name);
  const inStage = (alias: string, projectColumn: string, keyColumn: string): string =>
    `EXISTS (SELECT 1 FROM ${tablePath(target, stage)} AS S WHERE S.${q(projectKey)} = ${alias}.${q(projectColumn)} AND S.${q(parentKey)} = ${alias}.${q(keyColumn)})`;
  const lines = [
    'BEGIN TRANSACTION;',
    `DELETE FROM ${table} AS B WHERE ${inStage('B', 'project_id', b.parentColumn)};`,
  ];
  if (params.parentHasSource) {
    const fields = b.elementFields.map((f) => {
      const value = `JSON_VALUE(E, '$."${f.field.replace(/["'\\]/g, '')}"')`;
      return f.type === 'string' ? value : `SAFE_CAST(${value} AS ${bigqueryType(f.type)})`;
    });
    const columns = bridge.table.columns.map((c) => q(c.name));
    // The parent's metadata columns (a writer without a run id has no `_run_id` in its schema).
    const meta = (name: string, type: string): string =>
      parent.columns.some((c) => c.name === name) ? `T.${q(name)}` : `CAST(NULL AS ${type})`;
    lines.push(
      `INSERT INTO ${table} (${columns.join(', ')})`,
      `SELECT ${[`T.${q(projectKey)}`, `T.${q(parentKey)}`, 'O', ...fields, 'E', meta('_synced_at', 'TIMESTAMP'), meta('_run_id', 'STRING')].join(', ')}`,
      `FROM ${tablePath(target, parent.name)} AS T, UNNEST(JSON_QUERY_ARRAY(T.${q(bridge.sourceColumn)})) AS E WITH OFFSET AS O`,
      `WHERE ${inStage('T', projectKey, parentKey)}${params.partitions === undefined ? '' : ` AND ${pruningPredicate(partitionSpec(parent), params.partitions)}`};`,
    );
  }
  lines.push('COMMIT TRANSACTION;');
  return lines.join('\n');
}

/** A table a refresh replaces: by its shadow's rows (with the shadow's columns), or by none (emptied). */
export type ReplacePlan = { readonly table: string } & (
  | { readonly shadow: string; readonly columns: readonly string[] }
  | { readonly shadow?: undefined }
);

/**
 * `sync --full-refresh`'s swap as one multi-statement transaction (BigQuery's DDL is not
 * transactional, its DML is): per table a DELETE, then an INSERT … SELECT from its shadow.
 */
export function replaceTablesSql(target: BigQueryTarget, plans: readonly ReplacePlan[]): string {
  const statements = plans.flatMap((p) => {
    const del = `DELETE FROM ${tablePath(target, p.table)} WHERE TRUE;`;
    if (p.shadow === undefined) return [del];
    const list = p.columns.map(quoteIdent).join(', ');
    return [
      del,
      `INSERT INTO ${tablePath(target, p.table)} (${list})\nSELECT ${list} FROM ${tablePath(target, p.shadow)};`,
    ];
  });
  return ['BEGIN TRANSACTION;', ...statements, 'COMMIT TRANSACTION;'].join('\n');
}

/** Rows of one project whose `window.column` lies in [fromIso, toIso) (`countWindow`). */
export function windowCountSql(
  target: BigQueryTarget,
  table: string,
  window: { readonly projectId: string; readonly column: string; readonly fromIso: string; readonly toIso: string },
): string {
  const column = quoteIdent(window.column);
  return (
    `SELECT COUNT(*) AS n FROM ${tablePath(target, table)} WHERE \`project_id\` = ${stringLiteral(window.projectId)} ` +
    `AND ${column} >= ${timestampLiteral(window.fromIso)} AND ${column} < ${timestampLiteral(window.toIso)}`
  );
}

/** A GoogleSQL string literal. */
export function stringLiteral(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/** A GoogleSQL TIMESTAMP literal of an ISO instant, in UTC. */
export function timestampLiteral(iso: string): string {
  const canonical = canonicalTimestamp(iso);
  if (canonical === undefined) throw new Error(`not an ISO-8601 instant with an offset: ${iso}`);
  return `TIMESTAMP '${canonical.replace('T', ' ').replace('Z', '+00')}'`;
}
