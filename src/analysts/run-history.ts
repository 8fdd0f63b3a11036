import type { RunEndCode } from '../core/exit-codes.js';
import { redact, type Logger } from '../core/log.js';
import type { ColumnDef, Row, TableSchema } from '../core/types.js';
import { tableSchema } from '../core/table-schema.js';
import type { BillingTotals, Destination } from '../load/destination.js';
import type { StreamResult } from '../sync/frame.js';
import type { BacklogForecast } from '../reports/freshness.js';

/**
 * Run history and schema drift in the warehouse itself (as dlt's `_dlt_loads`): one row per run in
 * `_query_sync_runs`, one row per column a run added in `_query_sync_schema_changes`. Written with
 * the destination's ordinary keyed write, so every destination (DuckDB, BigQuery) keeps them.
 */

export const RUNS_TABLE = '_query_sync_runs';
export const SCHEMA_CHANGES_TABLE = '_query_sync_schema_changes';

const RUNS_SCHEMA: TableSchema = tableSchema(RUNS_TABLE, ['run_id'], {
  run_id: 'string',
  command: 'string',
  started_at: 'timestamp',
  ended_at: 'timestamp',
  // `ok`, `failed`, `mismatch` or `stopped`, chosen as the exit code is (`runEndCode`); NULL for a row written without one.
  outcome: 'string',
  // The process's exit code (docs/exit-codes.md).
  exit_code: 'int64',
  rows: 'int64',
  pages: 'int64',
  requests: 'int64',
  retries: 'int64',
  rate_limited: 'int64',
  streams: 'json',
  errors: 'json',
  settings: 'json',
  // BigQuery on-demand bytes the run's queries were billed; NULL where queries are free (DuckDB).
  bytes_billed: 'int64',
  // What the run's reconcile proved and did not: windows that differed, remaining, and each
  // resource it could not check (per-event traces, users, conversations) with why; NULL when off.
  reconcile: 'json',
  // Each per-event backlog at the run's end and when it will be whole at the budget (`reports/freshness.ts`
  // BacklogForecast); NULL where none is read one event at a time. The report charts it over time.
  backlog: 'json',
});

const SCHEMA_CHANGES_SCHEMA: TableSchema = tableSchema(SCHEMA_CHANGES_TABLE, ['run_id', 'table_name', 'column_name'], {
  run_id: 'string',
  changed_at: 'timestamp',
  table_name: 'string',
  column_name: 'string',
  column_type: 'string',
  change: 'string',
});

/** `new table`: the run created the table; `new column`: a field seen for the first time; `variant column`: a value of another type (`<field>__v_<type>`). */
type SchemaChangeKind = 'new table' | 'new column' | 'variant column';

export interface SchemaChange {
  readonly table: string;
  readonly column: string;
  readonly type: string;
  readonly change: SchemaChangeKind;
}

/** The columns of each table now (`undefined`: no such table yet). */
export async function columnsOf(
  destination: Destination,
  tables: readonly string[],
): Promise<Map<string, readonly ColumnDef[] | undefined>> {
  const out = new Map<string, readonly ColumnDef[] | undefined>();
  for (const table of tables) out.set(table, await destination.describe(table));
  return out;
}

/** Columns in `after` that `before` lacked, per table, in column order. Pure. */
export function schemaChanges(
  before: ReadonlyMap<string, readonly ColumnDef[] | undefined>,
  after: ReadonlyMap<string, readonly ColumnDef[] | undefined>,
): SchemaChange[] {
  const changes: SchemaChange[] = [];
  for (const [table, columns] of after) {
    if (columns === undefined) continue;
    const old = before.get(table);
    const known = new Set((old ?? []).map((c) => c.name));
    for (const c of columns) {
      if (known.has(c.name)) continue;
      const change: SchemaChangeKind =
        old === undefined ? 'new table' : /__v_[a-z0-9]+$/.test(c.name) ? 'variant column' : 'new column';
      changes.push({ table, column: c.name, type: c.type, change });
    }
  }
  return changes;
}

export interface RunRecord {
  readonly command: string;
  readonly startedAt: string;
  readonly endedAt: string;
  readonly streams: readonly StreamResult[];
  /** Settings worth keeping with the run: scope, resources, privacy rules (never a secret). */
  readonly settings: Readonly<Record<string, unknown>>;
  /** Literal secrets scrubbed from every error message. */
  readonly secrets: readonly string[];
  /** What the run's queries were billed (`Destination.can.billing`), absent where they are free. */
  readonly billing?: BillingTotals;
  /** The reconcile step's outcome in brief (`reconcileBrief`), absent when it did not run. */
  readonly reconcile?: Readonly<Record<string, unknown>>;
  /** The run's exit code and its name (`runEndCode`); absent: `ok` when every stream is, else `failed`, and no code. */
  readonly end?: RunEndCode;
  /**
   * Every request the run sent, as the server counts them (plan, probes, reconcile, settle
   * re-reads, per-event reads: `ApiClient.requestsSent`); absent: the streams' own counts summed.
   */
  readonly requests?: number;
  /** Every 429 the run was answered (the scheduler's count); absent: the streams' summed. */
  readonly rateLimited?: number;
  /** Each per-event backlog's forecast at the run's end, absent where none is read. */
  readonly backlog?: readonly BacklogForecast[];
}

/**
 * Log one line per schema change (one per new table), then write the run's row and its changes.
 * Best effort: the data and the marks are already stored, so a failure here is a warning, not a
 * failed run. `runId` is the run's (`Run.runId`), the one its rows carry in `_run_id`.
 */
export async function recordRun(
  destination: Destination,
  run: RunRecord,
  changes: readonly SchemaChange[],
  logger: Logger,
  runId: string,
): Promise<void> {
  const created = new Map<string, number>();
  for (const c of changes) {
    if (c.change === 'new table') created.set(c.table, (created.get(c.table) ?? 0) + 1);
    else
      logger.info(
        { table: c.table, column: c.column, type: c.type, change: c.change },
        `schema change: ${c.change} ${c.table}.${c.column} (${c.type})`,
      );
  }
  for (const [table, columns] of created)
    logger.info({ table, columns, change: 'new table' }, `schema change: new table ${table} (${columns} columns)`);

  const sum = (f: (s: StreamResult) => number): bigint => BigInt(run.streams.reduce((n, s) => n + f(s), 0));
  const clean = (text: string): string => redact(text, run.secrets);
  const errors = [
    ...new Set(
      run.streams.filter((s) => s.outcome !== 'ok' && s.error !== undefined).map((s) => clean(s.error?.message ?? '')),
    ),
  ];
  const row: Row = {
    run_id: runId,
    command: run.command,
    started_at: run.startedAt,
    ended_at: run.endedAt,
    outcome: run.end?.outcome ?? (run.streams.every((s) => s.outcome === 'ok') ? 'ok' : 'failed'),
    exit_code: run.end === undefined ? null : BigInt(run.end.code),
    rows: sum((s) => s.rows),
    pages: sum((s) => s.pages),
    requests: run.requests === undefined ? sum((s) => s.stats.requests) : BigInt(run.requests),
    retries: sum((s) => s.stats.retries),
    rate_limited: run.rateLimited === undefined ? sum((s) => s.stats.rateLimited) : BigInt(run.rateLimited),
    streams: JSON.stringify(
      run.streams.map((s) => ({
        resource: s.resource,
        scope: s.scope,
        outcome: s.outcome,
        rows: s.rows,
        pages: s.pages,
        requests: s.stats.requests,
        retries: s.stats.retries,
        rate_limited: s.stats.rateLimited,
        seconds: Math.round(s.seconds * 10) / 10,
        ...(s.lists === undefined ? {} : { lists: s.lists }),
        ...(s.outcome !== 'ok' && s.error !== undefined ? { error: clean(s.error.message) } : {}),
      })),
    ),
    errors: JSON.stringify(errors),
    settings: JSON.stringify(run.settings),
    bytes_billed: run.billing === undefined ? null : BigInt(run.billing.bytesBilled),
    reconcile: run.reconcile === undefined ? null : JSON.stringify(run.reconcile),
    backlog: run.backlog === undefined ? null : JSON.stringify(run.backlog),
  };
  try {
    if (changes.length > 0) {
      const changeRows: Row[] = changes.map((c) => ({
        run_id: runId,
        changed_at: run.endedAt,
        table_name: c.table,
        column_name: c.column,
        column_type: c.type,
        change: c.change,
      }));
      await destination.write({ table: SCHEMA_CHANGES_SCHEMA, rows: changeRows });
    }
    await destination.write({ table: RUNS_SCHEMA, rows: [row] });
  } catch (error) {
    logger.warn(
      { err: clean((error as Error).message) },
      `could not write the run history (${RUNS_TABLE}); the run's data and state are stored`,
    );
  }
}
