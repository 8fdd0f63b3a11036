import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { RESOURCES } from '../../connectors/index.js';
import type { BigQueryConfig } from '../config/index.js';
import { DESTINATIONS, type DestinationName } from '../load/registry.js';
import type { ColumnDef } from '../core/types.js';
import type { Destination } from '../load/destination.js';
import { EVENT_COUNTS_TABLE, EVENT_FACETS_TABLE } from './aggregates.js';
import { RUNS_TABLE, SCHEMA_CHANGES_TABLE } from './run-history.js';
import { SEARCH_RESULTS_TABLE } from './searches.js';
import { CONVERSATION_EVENTS_VIEW } from './views.js';
import { createRequire } from 'node:module';
import { SYNCED_AT_COLUMN } from '../core/table-schema.js';
import { layoutOf } from '../publish/layout.js';

/**
 * A dbt `sources.yml` for the warehouse as it is: every table (and view) query-sync writes that
 * exists, every column with its type and what it holds. Columns of API fields are described from
 * the resource; query-sync's own columns and tables from the docs below.
 */

/** Source name in dbt (`{{ source('query_sync', 'events') }}`). */
export const DBT_SOURCE_NAME = 'query_sync';

/** Every table's description: a resource's from its connector (`description`), query-sync's own here. */
const TABLE_DOCS: Readonly<Record<string, string>> = {
  ...Object.fromEntries(RESOURCES.flatMap((r) => (r.description === undefined ? [] : [[r.name, r.description]]))),
  event_signals:
    'Bridge: one row per element of events.signals (key: project_id, event_id, ordinal), rewritten with its event in the same write.',
  [SEARCH_RESULTS_TABLE]:
    'Saved searches (--search): one row per search, project and matching event (key: project_id, search_name, event_id), from /v1/events/search within its 14-day range.',
  [EVENT_COUNTS_TABLE]:
    'Events per project and UTC bucket from /v1/events/timeseries (key: project_id, interval, bucket_start); the last 7 days are refreshed each sync.',
  [EVENT_FACETS_TABLE]:
    'Top values of event_name, user_id and signal over the 7 days before each sync, from /v1/events/facets (key: project_id, snapshot_date, field, value); the greatest as_of of a day is its snapshot.',
  [CONVERSATION_EVENTS_VIEW]:
    "View: the events that name a conversation, with their turn in it and the conversation's start, last message and message count.",
  [RUNS_TABLE]:
    'One row per sync or backfill run (key: run_id): outcome, totals, per-stream results, errors (redacted), settings.',
  [SCHEMA_CHANGES_TABLE]:
    'One row per column a run added (key: run_id, table_name, column_name): new table, new column or variant column.',
};

const COMMON_COLUMNS: Readonly<Record<string, string>> = {
  project_id: 'Project slug the row belongs to.',
  _synced_at: 'When the run that last wrote the row started.',
  _run_id: 'The run that last wrote the row (run_id in _query_sync_runs).',
  _deleted_at:
    "When reconcile found the record deleted at the source (no longer in the API's list of its window); NULL while it is listed. Filter on _deleted_at IS NULL for what the API holds now.",
};

const COLUMN_DOCS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  event_signals: {
    event_id: 'The event (events.id).',
    ordinal: "Position of the signal in the event's signals array, from 0.",
    signal_id: 'The signal (signals.id).',
    signal_name: "The signal's name as the event carries it.",
    score: 'The score of the match.',
    signal: 'The whole array element as JSON (whatever else it carries).',
  },
  [SEARCH_RESULTS_TABLE]: {
    search_name: 'Name of the saved search (--search name=query).',
    event_id: 'The matching event (events.id).',
    relevance_score: 'The relevance score the search gave, as of the last run that matched it.',
    event_timestamp: "The event's timestamp.",
    first_matched_at: 'Start of the first run that found the match.',
    last_matched_at: 'Start of the last run that found the match.',
    query: 'The query the search was read with.',
    mode: 'text, semantic or regex.',
    search_in: 'Fields searched (NULL: the service default).',
  },
  [EVENT_COUNTS_TABLE]: {
    interval: 'day or hour.',
    bucket_start: 'Start of the UTC bucket.',
    event_count: 'Events in the bucket as the API counted them at as_of.',
    as_of: 'Start of the run that counted the bucket (the bucket holding it is partial).',
  },
  [EVENT_FACETS_TABLE]: {
    snapshot_date: 'UTC day of the snapshot.',
    field: 'event_name, user_id or signal.',
    value: 'A value of the field.',
    event_count: 'Events with that value in [window_from, window_to).',
    window_from: 'Start of the counted window.',
    window_to: 'End of the counted window (the run start).',
    as_of: 'Start of the run that took the snapshot.',
  },
  [CONVERSATION_EVENTS_VIEW]: {
    turn: 'Position of the event in its conversation, from 1 (by timestamp, then id).',
    convo_started_at: 'conversations.started_at.',
    convo_last_message_at: 'conversations.last_message_at.',
    convo_message_count: 'conversations.message_count.',
  },
  [RUNS_TABLE]: {
    run_id: 'The run (a UUID; _run_id of the rows it wrote).',
    command: 'sync or backfill.',
    started_at: "The run's start.",
    ended_at: "The run's end.",
    outcome: 'ok, or failed when any stream failed.',
    rows: 'Rows written.',
    pages: 'Pages read.',
    requests: 'API requests made.',
    retries: 'Requests retried.',
    rate_limited: '429 answers.',
    streams: 'JSON: per resource and scope, outcome and figures.',
    errors: 'JSON: the distinct errors (the API key redacted).',
    settings: 'JSON: scope, resources, lookback, privacy rules.',
  },
  [SCHEMA_CHANGES_TABLE]: {
    run_id: 'The run that made the change.',
    changed_at: 'When that run ended.',
    table_name: 'The table.',
    column_name: 'The column added.',
    column_type: 'Its logical type (string, int64, float64, bool, timestamp, json).',
    change: 'new table, new column or variant column.',
  },
};

/** Every table query-sync may write, in the order the file lists them. */
function knownTables(): string[] {
  const bridges = RESOURCES.flatMap((r) => (r.bridges ?? []).map((b) => b.table));
  return [
    ...RESOURCES.map((r) => r.name),
    ...bridges,
    CONVERSATION_EVENTS_VIEW,
    SEARCH_RESULTS_TABLE,
    EVENT_COUNTS_TABLE,
    EVENT_FACETS_TABLE,
    RUNS_TABLE,
    SCHEMA_CHANGES_TABLE,
  ];
}

/** What a column holds, for the docs. */
function describeColumn(table: string, column: string): string {
  const own = COLUMN_DOCS[table]?.[column] ?? COMMON_COLUMNS[column];
  if (own !== undefined) return own;
  const resource = RESOURCES.find(
    (r) => r.name === table || (table === CONVERSATION_EVENTS_VIEW && r.name === 'events'),
  );
  const variant = /^(.*)__v_([a-z0-9]+)$/.exec(column);
  if (variant !== null)
    return `Values of field ${variant[1] ?? ''} that did not fit its column's type, as ${variant[2] ?? ''}.`;
  if (resource !== undefined && column === resource.key)
    return `The ${resource.name} record's key (${column}), as text.`;
  if (resource !== undefined)
    return `Field ${column} of ${resource.path}, as the API returned it (nested values as JSON).`;
  return `Column ${column}.`;
}

export interface DbtTarget {
  readonly destination: DestinationName;
  readonly bigquery?: BigQueryConfig;
  /** DuckDB: the published copy dbt reads (`--duckdb-path`), named in the file for the profile's `path`. */
  readonly duckdbPath?: string;
  /**
   * How often the read copy is published (`--publish-every`, 0 when it is not): the freshness
   * thresholds follow it.
   */
  readonly publishEveryMs: number;
}

/** The sources.yml text for the tables of `destination` as they are now, and how many it lists. */
async function dbtSources(
  destination: Destination,
  target: DbtTarget,
): Promise<{ readonly text: string; readonly tables: number }> {
  const tables: {
    name: string;
    description: string;
    columns: { name: string; description: string; data_type: string }[];
  }[] = [];
  for (const name of knownTables()) {
    const columns = await destination.describe(name);
    if (columns === undefined) continue;
    tables.push({
      name,
      description: TABLE_DOCS[name] ?? `Table ${name}.`,
      // `dbt source freshness` tells when the sync stopped: `_synced_at` is the start of the run that wrote the row.
      ...(columns.some((c) => c.name === SYNCED_AT_COLUMN)
        ? { loaded_at_field: SYNCED_AT_COLUMN, freshness: freshnessOf(target.publishEveryMs) }
        : {}),
      columns: columns.map((c: ColumnDef) => ({
        name: c.name,
        description: describeColumn(name, c.name),
        data_type: sqlType(c, target),
      })),
    });
  }
  const source = {
    name: DBT_SOURCE_NAME,
    description:
      'The Query API, synced by query-sync (https://github.com/…/query-sync): exact, incremental, one row per key.',
    ...(target.destination === 'bigquery' && target.bigquery !== undefined
      ? { database: target.bigquery.projectId, schema: target.bigquery.dataset }
      : {
          schema: 'main',
          ...(target.duckdbPath === undefined
            ? {}
            : {
                meta: {
                  published_copy: layoutOf(target.duckdbPath).published,
                  parquet: layoutOf(target.duckdbPath).files,
                  profile_hint: 'dbt-duckdb: path: <published_copy>, read-only',
                },
              }),
        }),
    tables,
  };
  const text = `# Written by query-sync dbt-sources: the tables and columns as they are in the warehouse now.\n${toYaml({ version: 2, sources: [source] })}`;
  return { text, tables: tables.length };
}

function sqlType(column: ColumnDef, target: DbtTarget): string {
  return DESTINATIONS[target.destination].sqlType(column.type);
}

/**
 * Freshness thresholds from the publish interval: a row reaches readers at most one interval plus a
 * publish after it is written, and a scheduled run's `_synced_at` is its start, so with hourly (or
 * more frequent) runs the newest row is under an hour and an interval old while syncs run. Warn at
 * twice that, error at six times (a run missed, then several).
 */
function freshnessOf(publishEveryMs: number): {
  warn_after: { count: number; period: 'minute' };
  error_after: { count: number; period: 'minute' };
} {
  const basisMinutes = Math.ceil((HOUR_MS + Math.max(0, publishEveryMs)) / 60_000);
  return {
    warn_after: { count: 2 * basisMinutes, period: 'minute' },
    error_after: { count: 6 * basisMinutes, period: 'minute' },
  };
}

const HOUR_MS = 3_600_000;

/** Write the sources file (its folder made if missing); returns its absolute path and the tables it lists. */
export async function writeDbtSources(
  destination: Destination,
  path: string,
  target: DbtTarget,
): Promise<{ readonly path: string; readonly tables: number }> {
  const { text, tables } = await dbtSources(destination, target);
  const absolute = resolve(path);
  await mkdir(dirname(absolute), { recursive: true });
  await writeFile(absolute, text);
  return { path: absolute, tables };
}

/**
 * The YAML writer, loaded when a sources file is written (`dbt-sources`, `sync --dbt-sources`):
 * importing yaml was 50 ms of every other start. CommonJS build, as in options.ts.
 */
function toYaml(value: unknown): string {
  return (createRequire(import.meta.url)('yaml') as typeof import('yaml')).stringify(value, { lineWidth: 0 });
}
