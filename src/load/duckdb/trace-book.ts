import type { DuckDBConnection } from '@duckdb/node-api';
import { TRACE_BOOK_TABLE, type TraceRead } from '../../core/state-table.js';
import type { LogicalType } from '../../core/types.js';
import { DELETED_AT_COLUMN } from '../../core/deletions.js';
import type { OwedTraces } from '../destination-capabilities.js';
import { ident, sqlString } from './sql.js';

/**
 * The trace book in the DuckDB file (`KeepsTraceBook`): `_query_sync_children`, one row appended
 * per read of an event's traces, in the transaction of the trace rows (and the state) it
 * describes. Append-only: an event read empty while young and read again at settle has two rows;
 * the owed set asks whether any of them is final.
 */

/** The book's columns, as the destination's table cache records them (persisted names: kept as they are). */
export const TRACE_BOOK_COLUMNS: ReadonlyMap<string, LogicalType> = new Map<string, LogicalType>([
  ['resource', 'string'],
  ['project_id', 'string'],
  ['parent_id', 'string'],
  ['parent_at', 'timestamp'],
  ['children', 'int64'],
  ['read_at', 'timestamp'],
]);

/** Book rows per INSERT statement. */
const READS_PER_INSERT = 200;

export async function createTraceBook(connection: DuckDBConnection): Promise<void> {
  await connection.run(
    `CREATE TABLE IF NOT EXISTS main.${ident(TRACE_BOOK_TABLE)} (resource VARCHAR, project_id VARCHAR, parent_id VARCHAR, parent_at TIMESTAMPTZ, children BIGINT, read_at TIMESTAMPTZ)`,
  );
}

/** Append `reads` (in the caller's transaction). */
export async function writeTraceReads(connection: DuckDBConnection, reads: readonly TraceRead[]): Promise<void> {
  const literal = traceReadsSql(reads);
  if (literal !== undefined) {
    if (literal.length > 0) await connection.run(literal.join(';\n'));
    return;
  }
  for (let i = 0; i < reads.length; i += READS_PER_INSERT) {
    const chunk = reads.slice(i, i + READS_PER_INSERT);
    const values = chunk
      .map(
        (_, j) =>
          `($${6 * j + 1}, $${6 * j + 2}, $${6 * j + 3}, CAST($${6 * j + 4} AS TIMESTAMPTZ), CAST($${6 * j + 5} AS BIGINT), CAST($${6 * j + 6} AS TIMESTAMPTZ))`,
      )
      .join(', ');
    await connection.run(
      `INSERT INTO main.${ident(TRACE_BOOK_TABLE)} VALUES ${values}`,
      chunk.flatMap((r) => [r.resource, r.projectId, r.eventId, r.eventAt, String(r.traces), r.readAt]),
    );
  }
}

/**
 * The events that owe their traces, as a FROM … WHERE over the events table `p` (without the
 * book: every event owes), with its parameters. One place says what "owed" is, for the drain's
 * list and for the counts of `status`, `plan` and the run summary.
 */
function owedWhere(
  query: OwedTraces,
  bookExists: boolean,
  project: string | undefined,
  /** Whether the events table has `_deleted_at` (records deleted at the source are marked there). */
  marksDeletions = false,
): { readonly sql: string; readonly params: readonly string[] } {
  const params: string[] = [];
  const param = (value: string): string => {
    params.push(value);
    return `$${params.length}`;
  };
  const time = `p.${ident(query.eventTime)}`;
  const eventFilters: string[] = [`${time} IS NOT NULL`];
  if (query.fromIso !== undefined) eventFilters.push(`${time} >= CAST(${param(query.fromIso)} AS TIMESTAMPTZ)`);
  if (query.toIso !== undefined) eventFilters.push(`${time} < CAST(${param(query.toIso)} AS TIMESTAMPTZ)`);
  if (project !== undefined) eventFilters.push(`p.project_id = ${param(project)}`);
  // Events deleted at the source owe nothing (their spans follow them: `--deletions`).
  if (marksDeletions) eventFilters.push(`p.${ident(DELETED_AT_COLUMN)} IS NULL`);
  if (query.shownBy !== undefined && query.shownBy.length > 0) {
    const shown = query.shownBy.map(
      (c) => `COALESCE(TRIM(CAST(p.${ident(c)} AS VARCHAR)), '') NOT IN ('', '[]', '{}', 'null', 'false')`,
    );
    eventFilters.push(`(${shown.join(' OR ')})`);
  }
  if (bookExists) {
    const settle = `INTERVAL (${Math.max(0, Math.round(query.settleMs))}) MILLISECOND`;
    // A read is final when it answered traces, or when its event was settle-old; an event read
    // empty while young is not due again until it is settle-old itself.
    const settled =
      query.settleMs > 0
        ? `b.children > 0 OR b.read_at >= b.parent_at + ${settle} OR ` +
          `${time} > CAST(${param(new Date(query.nowMs).toISOString())} AS TIMESTAMPTZ) - ${settle}`
        : 'TRUE';
    eventFilters.push(
      `NOT EXISTS (SELECT 1 FROM main.${ident(TRACE_BOOK_TABLE)} AS b WHERE b.resource = ${param(query.resource)} ` +
        `AND b.project_id = p.project_id AND b.parent_id = CAST(p.${ident(query.eventKey)} AS VARCHAR) AND (${settled}))`,
    );
  }
  return { sql: `FROM main.${ident(query.eventTable)} AS p WHERE ${eventFilters.join(' AND ')}`, params };
}

/** Up to `limit` owed events of a project, newest first (ties by id, so pages are stable). */
export function owedSelectSql(
  query: OwedTraces,
  bookExists: boolean,
  project: string,
  limit: number,
  marksDeletions = false,
) {
  const where = owedWhere(query, bookExists, project, marksDeletions);
  const time = `p.${ident(query.eventTime)}`;
  const key = `CAST(p.${ident(query.eventKey)} AS VARCHAR)`;
  return {
    sql: `SELECT ${key} AS id, epoch_ms(${time}) AS at ${where.sql} ORDER BY ${time} DESC, ${key} DESC LIMIT ${Math.max(1, Math.floor(limit))}`,
    params: where.params,
  };
}

/** Owed events per project. */
export function owedCountSql(query: OwedTraces, bookExists: boolean, marksDeletions = false) {
  const where = owedWhere(query, bookExists, undefined, marksDeletions);
  return { sql: `SELECT p.project_id, COUNT(*) ${where.sql} GROUP BY 1 ORDER BY 1`, params: where.params };
}

/**
 * `writeTraceReads` as statements with their values written in, so the caller can send them with
 * others in one call; `undefined` when a value holds a NUL character (then they go as parameters).
 */
export function traceReadsSql(reads: readonly TraceRead[]): string[] | undefined {
  if (reads.length === 0) return [];
  const texts = (r: TraceRead): string[] => [r.resource, r.projectId, r.eventId, r.eventAt, r.readAt];
  if (reads.some((r) => texts(r).some((t) => t.includes('\u0000')) || !Number.isSafeInteger(r.traces)))
    return undefined;
  const statements: string[] = [];
  for (let i = 0; i < reads.length; i += READS_PER_INSERT) {
    const values = reads
      .slice(i, i + READS_PER_INSERT)
      .map(
        (r) =>
          `(${sqlString(r.resource)}, ${sqlString(r.projectId)}, ${sqlString(r.eventId)}, CAST(${sqlString(r.eventAt)} AS TIMESTAMPTZ), ${r.traces}, CAST(${sqlString(r.readAt)} AS TIMESTAMPTZ))`,
      )
      .join(', ');
    statements.push(`INSERT INTO main.${ident(TRACE_BOOK_TABLE)} VALUES ${values}`);
  }
  return statements;
}
