import { BigQuery, type Query, type TableField, type TableMetadata } from '@google-cloud/bigquery';
import { DELETED_AT_COLUMN } from '../../core/deletions.js';
import { CHILD_BOOK_TABLE, type ChildRead } from '../../core/state-table.js';
import type { OwedChildren } from '../destination-capabilities.js';
import { quoteIdent, stringLiteral, tablePath, timestampLiteral, type BigQueryTarget } from './sql.js';

/**
 * The children book in the dataset (`KeepsChildBook`, as DuckDB's `load/duckdb/children.ts`):
 * `_query_sync_children`, one row appended per read of a parent's children, by an INSERT in the
 * transaction of the children rows' MERGE and the state's. Append-only: a parent read empty while
 * young and read again at settle has two rows; the owed set asks whether any of them is final.
 *
 * Cost (on-demand bytes). The book is DAY-partitioned on `parent_at` and clustered by resource,
 * project and parent id; the owed queries read the parent table's key, time and project columns
 * (plus `_deleted_at` and the `--traces traced` fields when they apply) and the book's six narrow
 * columns, both pruned to the partitions from `--start` on when it is given (the book one day
 * earlier: its `parent_at` is the parent's time to the millisecond). No other column is read.
 */

/** The book's schema. */
export const CHILD_BOOK_FIELDS: TableField[] = [
  { name: 'resource', type: 'STRING', mode: 'REQUIRED' },
  { name: 'project_id', type: 'STRING', mode: 'REQUIRED' },
  { name: 'parent_id', type: 'STRING', mode: 'REQUIRED' },
  { name: 'parent_at', type: 'TIMESTAMP', mode: 'REQUIRED' },
  { name: 'children', type: 'INT64', mode: 'REQUIRED' },
  { name: 'read_at', type: 'TIMESTAMP', mode: 'REQUIRED' },
];

/** Its partitioning and clustering (`tables.insert` resource fields). */
export const CHILD_BOOK_LAYOUT: Pick<TableMetadata, 'timePartitioning' | 'clustering'> = {
  timePartitioning: { type: 'DAY', field: 'parent_at' },
  clustering: { fields: ['resource', 'project_id', 'parent_id'] },
};

/** Name of the query parameter holding the reads. */
const READS_PARAM = 'child_reads';

const DAY_MS = 86_400_000;

/** Append the reads of `@child_reads` (a statement of the batch's transaction). */
export function childReadsInsertSql(target: BigQueryTarget): string {
  return (
    `INSERT INTO ${tablePath(target, CHILD_BOOK_TABLE)} (\`resource\`, \`project_id\`, \`parent_id\`, \`parent_at\`, \`children\`, \`read_at\`)\n` +
    `SELECT r.\`resource\`, r.\`project_id\`, r.\`parent_id\`, r.\`parent_at\`, r.\`children\`, r.\`read_at\` FROM UNNEST(@${READS_PARAM}) AS r`
  );
}

/** The query parameters of `childReadsInsertSql`. */
export function childReadsParams(reads: readonly ChildRead[]): Required<Pick<Query, 'params' | 'types'>> {
  return {
    params: {
      [READS_PARAM]: reads.map((r) => ({
        resource: r.resource,
        project_id: r.projectId,
        parent_id: r.parentId,
        // The client sends a TIMESTAMP's `.value` (a bare string would go as NULL); INT64 as its decimal text.
        parent_at: BigQuery.timestamp(r.parentAt),
        children: String(r.children),
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

/** What the owed queries need to know of the parent table. */
export interface OwedParent {
  /** The parent table has `_deleted_at` (records deleted at the source are marked there). */
  readonly marksDeletions: boolean;
  /** The book exists (without it, every parent owes). */
  readonly bookExists: boolean;
}

/**
 * The parents that owe their children, as `FROM … WHERE …` over the parent table `p` joined to the
 * book's verdict per parent `b` (the same rule as DuckDB's `owedWhere`): owed when never read, or
 * when no read is final (children > 0, or read once the parent was settle-old) and the parent is
 * settle-old now. A LEFT JOIN to a grouped book, not a correlated NOT EXISTS: BigQuery refuses
 * correlated subqueries it cannot turn into a join, and this one reads the book once.
 */
function owedFrom(target: BigQueryTarget, query: OwedChildren, parent: OwedParent, project?: string): string {
  const time = `p.${quoteIdent(query.parentTime)}`;
  const key = `CAST(p.${quoteIdent(query.parentKey)} AS STRING)`;
  const filters: string[] = [`${time} IS NOT NULL`];
  if (query.fromIso !== undefined) filters.push(`${time} >= ${timestampLiteral(query.fromIso)}`);
  if (query.toIso !== undefined) filters.push(`${time} < ${timestampLiteral(query.toIso)}`);
  if (project !== undefined) filters.push(`p.\`project_id\` = ${stringLiteral(project)}`);
  if (parent.marksDeletions) filters.push(`p.${quoteIdent(DELETED_AT_COLUMN)} IS NULL`);
  if (query.shownBy !== undefined && query.shownBy.length > 0) {
    const shown = query.shownBy.map(
      (c) =>
        `COALESCE(TRIM(TO_JSON_STRING(p.${quoteIdent(c)}), '"'), '') NOT IN ('', '[]', '{}', 'null', 'false', '""')`,
    );
    filters.push(`(${shown.join(' OR ')})`);
  }
  let from = `FROM ${tablePath(target, query.parentTable)} AS p`;
  if (parent.bookExists) {
    const settleMs = Math.max(0, Math.round(query.settleMs));
    const bookFilters = [`\`resource\` = ${stringLiteral(query.child)}`];
    if (project !== undefined) bookFilters.push(`\`project_id\` = ${stringLiteral(project)}`);
    if (query.fromIso !== undefined)
      bookFilters.push(
        `\`parent_at\` >= ${timestampLiteral(new Date(Date.parse(query.fromIso) - DAY_MS).toISOString())}`,
      );
    if (query.toIso !== undefined)
      bookFilters.push(`\`parent_at\` < ${timestampLiteral(new Date(Date.parse(query.toIso) + DAY_MS).toISOString())}`);
    const final =
      settleMs > 0
        ? `LOGICAL_OR(\`children\` > 0 OR \`read_at\` >= TIMESTAMP_ADD(\`parent_at\`, INTERVAL ${settleMs} MILLISECOND))`
        : 'TRUE';
    from +=
      ` LEFT JOIN (SELECT \`project_id\`, \`parent_id\`, ${final} AS final FROM ${tablePath(target, CHILD_BOOK_TABLE)} ` +
      `WHERE ${bookFilters.join(' AND ')} GROUP BY 1, 2) AS b ON b.\`project_id\` = p.\`project_id\` AND b.\`parent_id\` = ${key}`;
    const young =
      settleMs > 0
        ? ` AND ${time} <= TIMESTAMP_SUB(${timestampLiteral(new Date(query.nowMs).toISOString())}, INTERVAL ${settleMs} MILLISECOND)`
        : '';
    filters.push(`(b.\`parent_id\` IS NULL OR (NOT b.final${young}))`);
  }
  return `${from} WHERE ${filters.join(' AND ')}`;
}

/** Up to `limit` owed parents of a project, newest first (ties by id, so pages are stable); `at` in epoch ms. */
export function owedSelectSql(
  target: BigQueryTarget,
  query: OwedChildren,
  parent: OwedParent,
  project: string,
  limit: number,
): string {
  const time = `p.${quoteIdent(query.parentTime)}`;
  const key = `CAST(p.${quoteIdent(query.parentKey)} AS STRING)`;
  return (
    `SELECT ${key} AS id, UNIX_MILLIS(${time}) AS at ${owedFrom(target, query, parent, project)} ` +
    `ORDER BY ${time} DESC, id DESC LIMIT ${Math.max(1, Math.floor(limit))}`
  );
}

/** Owed parents per project. */
export function owedCountSql(target: BigQueryTarget, query: OwedChildren, parent: OwedParent): string {
  return `SELECT p.\`project_id\` AS project_id, COUNT(*) AS n ${owedFrom(target, query, parent)} GROUP BY 1 ORDER BY 1`;
}

/** Forget every read of `child` (of one project, when given). */
export function forgetChildrenSql(target: BigQueryTarget, child: string, project?: string): string {
  return (
    `DELETE FROM ${tablePath(target, CHILD_BOOK_TABLE)} WHERE \`resource\` = ${stringLiteral(child)}` +
    (project === undefined ? '' : ` AND \`project_id\` = ${stringLiteral(project)}`)
  );
}
