import { BigQuery, type Query, type TableField, type TableMetadata } from '@google-cloud/bigquery';
import { DELETED_AT_COLUMN } from '../../core/deletions.js';
import { TRACE_BOOK_TABLE, type TraceRead } from '../../core/state-table.js';
import type { OwedMark } from '../../core/state-table.js';
import { OWED_FULL_EVERY_MS, type OwedTraces } from '../destination-capabilities.js';
import { quoteIdent, stringLiteral, tablePath, timestampLiteral, type BigQueryTarget } from './sql.js';

/**
 * The trace book in the dataset (`KeepsTraceBook`, as DuckDB's `load/duckdb/trace-book.ts`):
 * `_query_sync_children`, one row appended per read of an event's traces, by an INSERT in the
 * transaction of the trace rows' MERGE and the state's. Append-only: an event read empty while
 * young and read again at settle has two rows; the owed set asks whether any of them is final.
 *
 * Cost (on-demand bytes). The book is DAY-partitioned on `parent_at` and clustered by resource,
 * project and `parent_id`; the owed queries read the events table's key, time and project columns
 * (plus `_deleted_at` and the `--traces traced` fields when they apply) and the book's six narrow
 * columns, both pruned to the partitions from `--start` on when it is given (the book one day
 * earlier: its `parent_at` is the event's time to the millisecond). No other column is read.
 */

/** The book's schema (persisted names: kept as they are). */
export const TRACE_BOOK_FIELDS: TableField[] = [
  { name: 'resource', type: 'STRING', mode: 'REQUIRED' },
  { name: 'project_id', type: 'STRING', mode: 'REQUIRED' },
  { name: 'parent_id', type: 'STRING', mode: 'REQUIRED' },
  { name: 'parent_at', type: 'TIMESTAMP', mode: 'REQUIRED' },
  { name: 'children', type: 'INT64', mode: 'REQUIRED' },
  { name: 'read_at', type: 'TIMESTAMP', mode: 'REQUIRED' },
];

/** Its partitioning and clustering (`tables.insert` resource fields). */
export const TRACE_BOOK_LAYOUT: Pick<TableMetadata, 'timePartitioning' | 'clustering'> = {
  timePartitioning: { type: 'DAY', field: 'parent_at' },
  clustering: { fields: ['resource', 'project_id', 'parent_id'] },
};

/** Name of the query parameter holding the reads (as the jobs' SQL has always named it). */
const READS_PARAM = 'child_reads';

const DAY_MS = 86_400_000;

/** Append the reads of `@child_reads` (a statement of the batch's transaction). */
export function traceReadsInsertSql(target: BigQueryTarget): string {
  return (
    `INSERT INTO ${tablePath(target, TRACE_BOOK_TABLE)} (\`resource\`, \`project_id\`, \`parent_id\`, \`parent_at\`, \`children\`, \`read_at\`)\n` +
    `SELECT r.\`resource\`, r.\`project_id\`, r.\`parent_id\`, r.\`parent_at\`, r.\`children\`, r.\`read_at\` FROM UNNEST(@${READS_PARAM}) AS r`
  );
}

/** The query parameters of `traceReadsInsertSql`. */
export function traceReadsParams(reads: readonly TraceRead[]): Required<Pick<Query, 'params' | 'types'>> {
  return {
    params: {
      [READS_PARAM]: reads.map((r) => ({
        resource: r.resource,
        project_id: r.projectId,
        parent_id: r.eventId,
        // The client sends a TIMESTAMP's `.value` (a bare string would go as NULL); INT64 as its decimal text.
        parent_at: BigQuery.timestamp(r.eventAt),
        children: String(r.traces),
        read_at: BigQuery.timestamp(r.readAt),
      })),
    },
    types: {
      [READS_PARAM]: [
        {
          resource: 'STRING',
          project_id: 'STRING',
          parent_id: 'STRING',
          parent_at: 'TIMESTAMP',
          children: 'INT64',
          read_at: 'TIMESTAMP',
        },
      ],
    },
  };
}

/** What the owed queries need to know of the events table. */
export interface OwedEventTable {
  /** The events table has `_deleted_at` (records deleted at the source are marked there). */
  readonly marksDeletions: boolean;
  /** The book exists (without it, every event owes). */
  readonly bookExists: boolean;
  /**
   * Only these days (`YYYY-MM-DD`, UTC) of the events table and the book are read (`owedDays`: those
   * changed since the last complete listing, and those within the settle horizon). @default every day
   */
  readonly days?: readonly string[];
}

/**
 * The events that owe their traces, as `FROM … WHERE …` over the events table `p` joined to the
 * book's verdict per event `b` (the same rule as DuckDB's `owedWhere`): owed when never read, or
 * when no read is final (`children` > 0, or read once the event was settle-old) and the event is
 * settle-old now. A LEFT JOIN to a grouped book, not a correlated NOT EXISTS: BigQuery refuses
 * correlated subqueries it cannot turn into a join, and this one reads the book once.
 */
function owedFrom(target: BigQueryTarget, query: OwedTraces, events: OwedEventTable, project?: string): string {
  const time = `p.${quoteIdent(query.eventTime)}`;
  const key = `CAST(p.${quoteIdent(query.eventKey)} AS STRING)`;
  const filters: string[] = [`${time} IS NOT NULL`];
  if (query.fromIso !== undefined) filters.push(`${time} >= ${timestampLiteral(query.fromIso)}`);
  if (query.toIso !== undefined) filters.push(`${time} < ${timestampLiteral(query.toIso)}`);
  if (project !== undefined) filters.push(`p.\`project_id\` = ${stringLiteral(project)}`);
  if (events.marksDeletions) filters.push(`p.${quoteIdent(DELETED_AT_COLUMN)} IS NULL`);
  // The same literal-date IN list as the MERGE's pruning predicate: only those partitions are read.
  const days = events.days === undefined ? undefined : events.days.map((d) => `DATE '${d}'`).join(', ');
  if (days !== undefined) filters.push(days === '' ? 'FALSE' : `DATE(${time}) IN (${days})`);
  if (query.shownBy !== undefined && query.shownBy.length > 0) {
    const shown = query.shownBy.map(
      (c) =>
        `COALESCE(TRIM(TO_JSON_STRING(p.${quoteIdent(c)}), '"'), '') NOT IN ('', '[]', '{}', 'null', 'false', '""')`,
    );
    filters.push(`(${shown.join(' OR ')})`);
  }
  let from = `FROM ${tablePath(target, query.eventTable)} AS p`;
  if (events.bookExists) {
    const settleMs = Math.max(0, Math.round(query.settleMs));
    const bookFilters = [`\`resource\` = ${stringLiteral(query.resource)}`];
    if (project !== undefined) bookFilters.push(`\`project_id\` = ${stringLiteral(project)}`);
    if (query.fromIso !== undefined)
      bookFilters.push(
        `\`parent_at\` >= ${timestampLiteral(new Date(Date.parse(query.fromIso) - DAY_MS).toISOString())}`,
      );
    if (query.toIso !== undefined)
      bookFilters.push(`\`parent_at\` < ${timestampLiteral(new Date(Date.parse(query.toIso) + DAY_MS).toISOString())}`);
    // A book row's `parent_at` is its parent's time (to the millisecond): the same day's partition.
    if (days !== undefined) bookFilters.push(days === '' ? 'FALSE' : `DATE(\`parent_at\`) IN (${days})`);
    const final =
      settleMs > 0
        ? `LOGICAL_OR(\`children\` > 0 OR \`read_at\` >= TIMESTAMP_ADD(\`parent_at\`, INTERVAL ${settleMs} MILLISECOND))`
        : 'TRUE';
    from +=
      ` LEFT JOIN (SELECT \`project_id\`, \`parent_id\`, ${final} AS final FROM ${tablePath(target, TRACE_BOOK_TABLE)} ` +
      `WHERE ${bookFilters.join(' AND ')} GROUP BY 1, 2) AS b ON b.\`project_id\` = p.\`project_id\` AND b.\`parent_id\` = ${key}`;
    const young =
      settleMs > 0
        ? ` AND ${time} <= TIMESTAMP_SUB(${timestampLiteral(new Date(query.nowMs).toISOString())}, INTERVAL ${settleMs} MILLISECOND)`
        : '';
    filters.push(`(b.\`parent_id\` IS NULL OR (NOT b.final${young}))`);
  }
  return `${from} WHERE ${filters.join(' AND ')}`;
}

/** Up to `limit` owed events of a project, newest first (ties by id, so pages are stable); `at` in epoch ms. */
export function owedSelectSql(
  target: BigQueryTarget,
  query: OwedTraces,
  events: OwedEventTable,
  project: string,
  limit: number,
): string {
  const time = `p.${quoteIdent(query.eventTime)}`;
  const key = `CAST(p.${quoteIdent(query.eventKey)} AS STRING)`;
  return (
    `SELECT ${key} AS id, UNIX_MILLIS(${time}) AS at ${owedFrom(target, query, events, project)} ` +
    `ORDER BY ${time} DESC, id DESC LIMIT ${Math.max(1, Math.floor(limit))}`
  );
}

/** Owed events per project. */
export function owedCountSql(target: BigQueryTarget, query: OwedTraces, events: OwedEventTable): string {
  return `SELECT p.\`project_id\` AS project_id, COUNT(*) AS n ${owedFrom(target, query, events)} GROUP BY 1 ORDER BY 1`;
}

/** Forget every read of `resource` (of one project, when given). */
export function forgetTracesSql(target: BigQueryTarget, resource: string, project?: string): string {
  return (
    `DELETE FROM ${tablePath(target, TRACE_BOOK_TABLE)} WHERE \`resource\` = ${stringLiteral(resource)}` +
    (project === undefined ? '' : ` AND \`project_id\` = ${stringLiteral(project)}`)
  );
}

/**
 * Partitions of the events table and the book, with when each was last modified:
 * `INFORMATION_SCHEMA.PARTITIONS`, a metadata query billed at a fixed small rate (10 MB minimum per
 * query on demand, whatever the tables' sizes), not by the tables' bytes. `partition_id` is
 * `YYYYMMDD` for a DAY partition, `__NULL__` for rows whose partitioning value is NULL,
 * `__UNPARTITIONED__` for rows still in the streaming buffer.
 */
export function partitionsSql(target: BigQueryTarget, tables: readonly string[]): string {
  return (
    `SELECT table_name, partition_id, last_modified_time ` +
    `FROM \`${target.projectId}\`.\`${target.dataset}\`.INFORMATION_SCHEMA.PARTITIONS ` +
    `WHERE table_name IN (${tables.map(stringLiteral).join(', ')})`
  );
}

/** One row of `partitionsSql`. */
export interface TablePartition {
  readonly table: string;
  /** `YYYYMMDD`, `__NULL__` or `__UNPARTITIONED__`. */
  readonly id: string;
  readonly modifiedMs: number;
}

/** Clock skew between this host and BigQuery's, and rows a job commits after the mark's instant. */
export const OWED_MARGIN_MS = 10 * 60_000;

/**
 * The days of the events table the owed listing must read after `mark`, or `undefined` for all of
 * them (no mark, the mark's full listing too old, rows in a streaming buffer whose day is unknown).
 *
 * Exact: an event is owed now and was not at the mark only if (a) its row was written since (its
 * partition modified), (b) a book row of it was removed (a book partition modified: a DELETE
 * modifies it; `reset` also clears the mark), or (c) it was read empty while young and turned
 * settle-old since: its time is after `mark - settle`, so its day is within the settle horizon.
 * Events owed at the mark were all read since (the mark is set only when the drain ran dry).
 */
export function owedDays(
  partitions: readonly TablePartition[],
  eventTable: string,
  mark: OwedMark | undefined,
  nowMs: number,
  settleMs: number,
): string[] | undefined {
  if (mark === undefined || nowMs - mark.fullAtMs >= OWED_FULL_EVERY_MS) return undefined;
  if (partitions.some((p) => p.id === '__UNPARTITIONED__')) return undefined;
  const sinceMs = mark.listedAtMs - OWED_MARGIN_MS;
  // With no settle every read is final: no event turns owed by age alone.
  const horizonMs = settleMs > 0 ? sinceMs - settleMs : Number.POSITIVE_INFINITY;
  const days = new Set<string>();
  for (const p of partitions) {
    if (!/^\d{8}$/.test(p.id)) continue;
    const day = `${p.id.slice(0, 4)}-${p.id.slice(4, 6)}-${p.id.slice(6, 8)}`;
    const dayEndMs = Date.parse(`${day}T00:00:00Z`) + DAY_MS;
    if (p.modifiedMs >= sinceMs || (p.table === eventTable && dayEndMs > horizonMs)) days.add(day);
  }
  return [...days].sort();
}
