import type { TableField, TableMetadata } from '@google-cloud/bigquery';
import type { TableSchema } from '../../core/types.js';
import { SYNCED_AT_COLUMN } from '../../core/table-schema.js';
import { partitionSpec } from './rows.js';
import { clusteringColumns, quoteIdent, tablePath, type BigQueryTarget } from './sql.js';

/**
 * The change-log layout of keyed tables whose rows change in place (users, conversations): SQL and
 * resources only, no I/O (`log-layout.ts` runs them).
 *
 * Why. A MERGE that updates rows is billed for every partition it updates (see
 * docs/bigquery-cost.md): for random keys that is most of the table, every run. A load job that
 * appends is free. So each run appends its rows to `<table>_changes` (partitioned by the day of
 * `_synced_at`, clustered by the key) with a load job, and `<table>` is a view that keeps the
 * latest row per key. A compaction, at most once per `compactEveryMs`, deletes the rows a later
 * row of the same key supersedes (`compactLogSql`).
 *
 * Which row is the latest: the same rule the MERGE applies. With a version column (`last_seen`,
 * `last_message_at`) the highest version wins and a NULL version loses to any other; then the row
 * written last (`_synced_at`); then, so the answer never depends on storage order, the row's whole
 * JSON text. A batch loaded twice (a crash after its load, before its state) gives identical rows,
 * and the view shows one of them: the same row.
 */

/** Suffix of the change log of a table in the log layout: `users` → `users_changes`. */
const LOG_SUFFIX = '_changes';
/** Where `--bq-upsert log` moves a table of the merge layout it migrates. */
export const MERGE_BACKUP_SUFFIX = '_merge_layout';
/** Label of the log holding the epoch seconds of its creation or last compaction. */
const COMPACTED_LABEL = 'query-sync-compacted-at';

export function logTable(table: string): string {
  return `${table}${LOG_SUFFIX}`;
}

/**
 * Whether the table may take the log layout: records of the API that change and come back as newer
 * copies ordered by a version column (users' `last_seen`, conversations' `last_message_at`; not the
 * counts query-sync computes itself), without a full-refresh hash rule or a bridge table rewritten
 * from the stored rows, partitioned on the key's bucket (no time column of theirs stays put), with
 * `_synced_at` to partition the log on, and not one of query-sync's own tables (a refresh's shadow
 * stays a plain table: it is copied, not read).
 */
export function logCandidate(table: TableSchema): boolean {
  return (
    table.versionColumn !== undefined &&
    partitionSpec(table).kind === 'key_bucket' &&
    table.fullRefresh !== true &&
    (table.bridges ?? []).length === 0 &&
    !table.name.startsWith('_query_sync_') &&
    table.columns.some((c) => c.name === SYNCED_AT_COLUMN && c.type === 'timestamp')
  );
}

/** The tables.insert body of a change log: day partitions on `_synced_at`, clustered by the key. */
export function logResource(table: TableSchema, fields: TableField[], nowMs: number): TableMetadata {
  return {
    schema: { fields },
    timePartitioning: { type: 'DAY', field: SYNCED_AT_COLUMN },
    clustering: { fields: clusteringColumns(table) },
    description: `Change log of ${table.name}: every copy query-sync loaded; read the view ${table.name} (latest row per key).`,
    labels: Object.fromEntries(compactionLabels(nowMs)),
  };
}

/** ORDER BY of "latest first" over alias `c` (see the top of this file). */
function latestOrder(table: TableSchema): string {
  const order: string[] = [];
  if (table.versionColumn !== undefined) order.push(`c.${quoteIdent(table.versionColumn)} DESC NULLS LAST`);
  order.push(`c.${quoteIdent(SYNCED_AT_COLUMN)} DESC`, 'TO_JSON_STRING(c) DESC');
  return `ROW_NUMBER() OVER (PARTITION BY ${table.key.map((k) => `c.${quoteIdent(k)}`).join(', ')} ORDER BY ${order.join(', ')}) = 1`;
}

/** `SELECT <columns> FROM <source> AS c WHERE TRUE QUALIFY <latest>` (QUALIFY wants a WHERE beside it). */
function latestSelect(target: BigQueryTarget, table: TableSchema, source: string, columns: readonly string[]): string {
  return `SELECT ${columns.map((c) => `c.${quoteIdent(c)}`).join(', ')} FROM ${tablePath(target, source)} AS c WHERE TRUE QUALIFY ${latestOrder(table)}`;
}

/** The view analysts read under the table's own name: the latest row per key of the log. */
export function latestViewSql(target: BigQueryTarget, table: TableSchema, columns: readonly string[]): string {
  return `CREATE OR REPLACE VIEW ${tablePath(target, table.name)} AS ${latestSelect(target, table, logTable(table.name), columns)}`;
}

/**
 * The log created from a table of the merge layout (a migration: all its rows) in one statement (a
 * CTAS keeps partitioning, clustering and, set explicitly, no expiration whatever the dataset's
 * default). Only run while `<table>` is still a table of the merge layout, when no run appends to
 * the log: a CTAS writes the snapshot it read, so over a log that receives appends it would drop
 * rows loaded while it runs (why the compaction is a DELETE: `compactLogSql`).
 */
export function seedLogSql(
  target: BigQueryTarget,
  table: TableSchema,
  source: string,
  columns: readonly string[],
  nowMs: number,
): string {
  const select = `SELECT ${columns.map((c) => `c.${quoteIdent(c)}`).join(', ')} FROM ${tablePath(target, source)} AS c`;
  return (
    `CREATE OR REPLACE TABLE ${tablePath(target, logTable(table.name))}\n` +
    `PARTITION BY DATE(${quoteIdent(SYNCED_AT_COLUMN)})\n` +
    `CLUSTER BY ${clusteringColumns(table).map(quoteIdent).join(', ')}\n` +
    `OPTIONS (expiration_timestamp = NULL, partition_expiration_days = NULL, labels = [${compactionLabels(nowMs)
      .map(([k, v]) => `('${k}', '${v}')`)
      .join(', ')}])\n` +
    `AS ${select}`
  );
}

/** The labels of a change log: what it is, and when it was created or last compacted (epoch seconds). */
export function compactionLabels(nowMs: number): [string, string][] {
  return [
    ['query-sync', 'change-log'],
    [COMPACTED_LABEL, String(Math.floor(nowMs / 1000))],
  ];
}

/**
 * The compaction: one DELETE of the rows some other row of the same key supersedes.
 *
 * Why a DELETE and not a rebuild. A `sync` and a `backfill` hold different leases and may append
 * to one log at the same time. A `CREATE OR REPLACE TABLE … AS SELECT` writes the snapshot it read,
 * so rows a load job appended while it ran were lost. A DELETE is a mutating DML statement: it reads
 * a snapshot taken when the job starts and removes rows of that snapshot only; BigQuery runs load
 * jobs that append (WRITE_APPEND) concurrently with it and never counts them as a conflict (only
 * another UPDATE/DELETE/MERGE of the same partitions conflicts, and `BigQueryJobs` retries that).
 * Rows appended after the snapshot are not in it, so they survive; a row superseded in the snapshot
 * stays superseded whatever is appended, so the view (latest row per key) is the same before and
 * after. Sources: https://cloud.google.com/bigquery/docs/data-manipulation-language (DML
 * concurrency, statement conflicts), https://cloud.google.com/bigquery/docs/transactions
 * (concurrency: appends by load jobs run alongside a mutation of the table).
 *
 * Which rows go: those whose (key, version, `_synced_at`) is not the top of their key by the view's
 * order without its last tie-break (version DESC NULLS LAST, `_synced_at` DESC). Rows tied on all
 * three are all kept (a replayed batch's copies, or rows of one batch differing elsewhere): the view
 * still chooses among them by their JSON text, exactly as before. The match is on a JSON text of the
 * tuple (`TO_JSON_STRING`), never NULL, so a NULL version compares as a value rather than making
 * `NOT IN` unknown (which would keep every row). Billed (partitioned table, DML rule): the narrow
 * columns read twice plus every column of the partitions it deletes from, in practice the whole log
 * (docs/bigquery-cost.md: about twice the rebuild's single scan, the price of not losing rows).
 */
export function compactLogSql(target: BigQueryTarget, table: TableSchema): string {
  const log = tablePath(target, logTable(table.name));
  const tuple = [...table.key, ...(table.versionColumn === undefined ? [] : [table.versionColumn]), SYNCED_AT_COLUMN];
  const fingerprint = (alias: string): string =>
    `TO_JSON_STRING(STRUCT(${tuple.map((c) => `${alias}.${quoteIdent(c)}`).join(', ')}))`;
  const order: string[] = [];
  if (table.versionColumn !== undefined) order.push(`c.${quoteIdent(table.versionColumn)} DESC NULLS LAST`);
  order.push(`c.${quoteIdent(SYNCED_AT_COLUMN)} DESC`);
  const top = `ROW_NUMBER() OVER (PARTITION BY ${table.key.map((k) => `c.${quoteIdent(k)}`).join(', ')} ORDER BY ${order.join(', ')}) = 1`;
  return `DELETE FROM ${log} AS t\nWHERE ${fingerprint('t')} NOT IN (SELECT ${fingerprint('c')} FROM ${log} AS c WHERE TRUE QUALIFY ${top})`;
}

/** `ALTER TABLE … RENAME TO …`: a migrated table of the merge layout kept aside. */
export function renameTableSql(target: BigQueryTarget, from: string, to: string): string {
  return `ALTER TABLE ${tablePath(target, from)} RENAME TO ${quoteIdent(to)}`;
}

/** When the log was created or last compacted (epoch ms), from its label; undefined when unlabelled. */
export function compactedAtMs(metadata: TableMetadata): number | undefined {
  const value = metadata.labels?.[COMPACTED_LABEL];
  return value === undefined || !/^\d+$/.test(value) ? undefined : Number(value) * 1000;
}
