import { existsSync } from 'node:fs';
import type { ReportConfig } from '../config/index.js';
import { ConfigError } from '../core/errors.js';
import type { BacklogForecast } from './freshness.js';
import { RUNS_TABLE, SCHEMA_CHANGES_TABLE } from '../analysts/run-history.js';
import { PUBLISHED_TABLE } from '../publish/publisher.js';
import { DuckDBInstance } from '../load/duckdb/instance.js';

/**
 * What `report --html` draws, read from the published read copy (`--duckdb-path`): the run history
 * (`_query_sync_runs`), the schema changes and what the copy holds (`_query_sync_published`). The
 * copy, not the working file: a reader of it never makes a running sync wait or exit 4.
 */

/** Runs drawn at most (the newest): a year of hourly runs would make a page of 9,000 bars no one reads. */
const REPORT_RUNS = 240;

interface ReportStream {
  readonly resource: string;
  readonly scope: string;
  readonly outcome: string;
  readonly rows: number;
  readonly requests: number;
  readonly rateLimited: number;
}

export interface ReportRun {
  readonly runId: string;
  readonly command: string;
  readonly startedMs: number;
  readonly endedMs: number;
  readonly outcome: string;
  readonly rows: number;
  readonly requests: number;
  readonly retries: number;
  readonly rateLimited: number;
  readonly streams: readonly ReportStream[];
  /** The per-endpoint minute limit the run was given (`settings.maxRpm`), when recorded. */
  readonly maxRpm?: number;
  readonly reconcile?: { readonly checked: number; readonly differed: number; readonly remaining: number };
  readonly backlog?: readonly BacklogForecast[];
  readonly errors: readonly string[];
}

interface ReportSchemaChange {
  readonly runId: string;
  readonly changedMs: number;
  readonly table: string;
  readonly column: string;
  readonly type: string;
  readonly change: string;
}

export interface ReportData {
  readonly warehouse: string;
  readonly generatedMs: number;
  readonly published?: { readonly asOfMs: number; readonly publish: number; readonly runId: string | null };
  readonly runs: readonly ReportRun[];
  /** Runs in the history in all (the page draws the newest `REPORT_RUNS`). */
  readonly totalRuns: number;
  readonly schemaChanges: readonly ReportSchemaChange[];
}

type Row = Readonly<Record<string, unknown>>;

/** Read the copy through one read-only connection (a reader holds no lock the sync needs). */
async function withCopy<T>(path: string, read: (select: (sql: string) => Promise<Row[]>) => Promise<T>): Promise<T> {
  const instance = await DuckDBInstance.create(path, { access_mode: 'READ_ONLY' });
  try {
    const connection = await instance.connect();
    try {
      await connection.run("SET TimeZone = 'UTC'");
      return await read(async (sql) => {
        const reader = await connection.runAndReadAll(sql);
        const columns = reader.columnNames();
        return (reader.getRowsJson() as unknown as unknown[][]).map((row) =>
          Object.fromEntries(columns.map((c, i) => [c, row[i]])),
        );
      });
    } finally {
      connection.closeSync();
    }
  } finally {
    instance.closeSync();
  }
}

export async function readReport(config: ReportConfig, nowMs: number): Promise<ReportData> {
  if (config.destination !== 'duckdb')
    throw new ConfigError(
      `report --html reads the DuckDB published copy; for BigQuery, query ${RUNS_TABLE} in the dataset (docs/report.md)`,
    );
  const path = config.duckdbPath;
  if (!existsSync(path))
    throw new ConfigError(
      `report: no published copy at ${path} yet: a sync writes it (or --duckdb-path names another)`,
    );
  return withCopy(path, (select) => readHistory(select, path, nowMs));
}

async function readHistory(select: (sql: string) => Promise<Row[]>, path: string, nowMs: number): Promise<ReportData> {
  const names = new Set(
    (
      await select(
        `SELECT view_name AS name FROM duckdb_views() WHERE NOT internal UNION SELECT table_name FROM duckdb_tables()`,
      )
    ).map((r) => String(r.name)),
  );
  const has = (table: string): boolean => names.has(table);
  const published = has(PUBLISHED_TABLE)
    ? (await select(`SELECT publish, epoch_ms(as_of) AS as_of_ms, run_id FROM ${PUBLISHED_TABLE}`))[0]
    : undefined;
  const total = has(RUNS_TABLE) ? Number((await select(`SELECT count(*) AS n FROM ${RUNS_TABLE}`))[0]?.n ?? 0) : 0;
  const runs = has(RUNS_TABLE)
    ? await select(
        `SELECT * EXCLUDE (started_at, ended_at), epoch_ms(started_at) AS started_ms, epoch_ms(ended_at) AS ended_ms
         FROM ${RUNS_TABLE} ORDER BY started_at DESC LIMIT ${REPORT_RUNS}`,
      )
    : [];
  const oldest = runs.reduce((m, r) => Math.min(m, Number(r.started_ms)), Number.POSITIVE_INFINITY);
  const changes =
    has(SCHEMA_CHANGES_TABLE) && runs.length > 0
      ? await select(
          `SELECT run_id, epoch_ms(changed_at) AS changed_ms, table_name, column_name, column_type, change
           FROM ${SCHEMA_CHANGES_TABLE} WHERE epoch_ms(changed_at) >= ${oldest} ORDER BY changed_at, table_name, column_name`,
        )
      : [];
  return {
    warehouse: path,
    generatedMs: nowMs,
    ...(published === undefined
      ? {}
      : {
          published: {
            asOfMs: Number(published.as_of_ms),
            publish: Number(published.publish),
            runId: published.run_id === null ? null : String(published.run_id),
          },
        }),
    runs: runs.reverse().map(runOf),
    totalRuns: total,
    schemaChanges: changes.map((c) => ({
      runId: String(c.run_id),
      changedMs: Number(c.changed_ms),
      table: String(c.table_name),
      column: String(c.column_name),
      type: String(c.column_type),
      change: String(c.change),
    })),
  };
}

function runOf(r: Row): ReportRun {
  const settings = json<{ maxRpm?: unknown }>(r.settings) ?? {};
  const reconcile = json<{ checked?: unknown; differed?: unknown; remaining?: unknown }>(r.reconcile);
  const backlog = json<BacklogForecast[]>(r.backlog);
  const streams = json<Record<string, unknown>[]>(r.streams) ?? [];
  return {
    runId: String(r.run_id),
    command: String(r.command),
    startedMs: Number(r.started_ms),
    endedMs: Number(r.ended_ms),
    outcome: String(r.outcome),
    rows: Number(r.rows ?? 0),
    requests: Number(r.requests ?? 0),
    retries: Number(r.retries ?? 0),
    rateLimited: Number(r.rate_limited ?? 0),
    streams: streams.map((s) => ({
      resource: String(s.resource),
      scope: String(s.scope),
      outcome: String(s.outcome),
      rows: Number(s.rows ?? 0),
      requests: Number(s.requests ?? 0),
      rateLimited: Number(s.rate_limited ?? 0),
    })),
    ...(typeof settings.maxRpm === 'number' ? { maxRpm: settings.maxRpm } : {}),
    ...(reconcile === undefined
      ? {}
      : {
          reconcile: {
            checked: Number(reconcile.checked ?? 0),
            differed: Number(reconcile.differed ?? 0),
            remaining: Number(reconcile.remaining ?? 0),
          },
        }),
    ...(backlog === undefined ? {} : { backlog }),
    errors: json<string[]>(r.errors) ?? [],
  };
}

/** A JSON column's value (DuckDB hands JSON back as text); `undefined` for NULL or text that is not JSON. */
function json<T>(value: unknown): T | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value !== 'string') return value as T;
  try {
    return JSON.parse(value) as T;
  } catch {
    return undefined;
  }
}
