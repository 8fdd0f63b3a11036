import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, resolve } from 'node:path';
import { ConfigError } from '../core/errors.js';
import { PROJECT_HEADERS } from '../../connectors/service.js';
import { RESOURCE_NAMES } from '../../connectors/index.js';
import type { TraceSelection } from '../core/types.js';
import { DEFAULT_RATE_LIMITS } from '../http/scheduler/budget.js';
import { DEFAULT_MEMORY_LIMIT_BYTES } from '../load/duckdb/memory.js';
import { sizeText } from './size.js';
import { DEFAULT_MAX_RETRY_AFTER_MS } from '../http/retry-after.js';
import { DEFAULT_TIMEOUTS } from '../http/timeouts.js';
import { DESTINATION_NAMES } from '../load/registry.js';

/**
 * The one table of settings: each flag's environment variable (`QUERY_SYNC_<FLAG>`), default, unit
 * and help group, and the commands that take it. The CLI builds its flags and `--help` from it;
 * `collect` below merges flags, environment and config file (flag > environment > file >
 * default), each parsed by its kind and choices (`config/reader.ts`: one parser per kind). A
 * choice's `default` is applied from here; the other defaults are the `DEFAULT_*` constants below,
 * which `config/` applies and this table shows in the help, so changing one changes both.
 */

export type CommandName =
  | 'sync'
  | 'check'
  | 'backfill'
  | 'plan'
  | 'verify'
  | 'status'
  | 'reset'
  | 'dbt-sources'
  | 'sql'
  | 'publish'
  | 'report';

export type OptionKind =
  /** Free text. */
  | 'string'
  /** A file or folder path; relative paths in a config file are relative to that file. */
  | 'path'
  | 'boolean'
  /** A positive number (`--max-rpm 400`). */
  | 'number'
  /** A whole number ≥ 1. */
  | 'integer'
  /** A length of time with a unit: `500ms`, `30s`, `15m`, `1h`, `1d`, `1w`. */
  | 'duration'
  /** A size with a unit: `32MB`, `1GB`, `512MiB`. */
  | 'size'
  /** An ISO-8601 instant with its offset: `2026-01-01T00:00:00Z`. */
  | 'instant'
  | 'choice';

export type OptionGroup =
  | 'Connection'
  | 'Scope'
  | 'Destination'
  | 'Privacy and schema'
  | 'State and run'
  | 'Pacing'
  | 'Logging and output'
  | 'Monitoring';

export interface OptionSpec {
  /** Flag name (kebab-case); its key in a config file. */
  readonly name: string;
  readonly kind: OptionKind;
  readonly group: OptionGroup;
  readonly describe: string;
  /** The default as help shows it (the value itself is applied by `config/run.ts` and `config/commands.ts`). */
  readonly defaultText?: string;
  readonly choices?: readonly string[];
  /**
   * A choice's value when none is given, applied by `config/reader.ts` (`choice`) and shown by the
   * help (unless `defaultText` says more): held here once.
   */
  readonly default?: string;
  /** How a refused choice's message lists the choices (`expected …, got "x"`); by default `a, b or c`. */
  readonly expected?: string;
  /** Older environment names still read (after `QUERY_SYNC_<FLAG>`). */
  readonly envAliases?: readonly string[];
  /** Read only from the environment: never a flag (visible in `ps`) nor a config file. */
  readonly secret?: boolean;
  readonly commands: readonly CommandName[];
  /**
   * Given more than once (`--search a=x --search b=y`), a list in a config file, one a line in the
   * environment; read as one text, one item a line.
   */
  readonly repeatable?: boolean;
}

const RUN: readonly CommandName[] = ['sync', 'check', 'backfill', 'plan', 'verify'];
const WRITES: readonly CommandName[] = ['sync', 'backfill', 'verify'];
const WAREHOUSE: readonly CommandName[] = [...RUN, 'status', 'reset', 'dbt-sources'];
const STATE: readonly CommandName[] = [...RUN, 'status', 'reset'];
/** The scheduled runs an operator monitors (docs/monitoring.md). */
const MONITORED: readonly CommandName[] = ['sync', 'backfill'];

/** Filled with the `DEFAULT_*` constants below, so help and behaviour share one source. */
interface OptionDefaults {
  readonly connectTimeoutMs: number;
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly maxRetryAfterMs: number;
  readonly batchBytes: number;
  readonly maxRpm: number;
  readonly searchRpm: number;
  readonly maxRps: number;
  readonly searchGateRps: number;
  readonly duckdbMemoryLimitBytes: number;
  readonly duckdbPath: string;
  readonly statePath: string;
  readonly lookback: string;
  readonly settle: string;
  readonly traces: string;
  readonly window: string;
  readonly concurrency: number;
  readonly batchRows: { readonly duckdb: number; readonly bigquery: number };
  readonly projectHeader: string;
  readonly bqLocation: string;
  readonly progressInterval: string;
  readonly dryRunLimit: number;
  readonly splitConcurrency: number;
  readonly publishEvery: string;
  readonly maxLag: string;
  readonly maxBacklogEta: string;
}

function optionTable(d: OptionDefaults): readonly OptionSpec[] {
  const ms = (n: number): string => {
    for (const [unit, size] of [
      ['d', 86_400_000],
      ['h', 3_600_000],
      ['m', 60_000],
      ['s', 1000],
    ] as const)
      if (n % size === 0) return `${n / size}${unit}`;
    return `${n}ms`;
  };
  return [
    // Connection
    {
      name: 'base-url',
      kind: 'string',
      group: 'Connection',
      describe: 'Query API base URL (a trailing /v1 is accepted)',
      defaultText: 'https://query.raindrop.ai (as the SDK)',
      envAliases: ['QUERY_API_BASE_URL'],
      commands: RUN,
    },
    {
      name: 'api-key',
      kind: 'string',
      group: 'Connection',
      secret: true,
      describe:
        'Organization API Key: best from the environment (QUERY_SYNC_API_KEY or QUERY_API_KEY) or --api-key-file',
      envAliases: ['QUERY_API_KEY'],
      commands: RUN,
    },
    {
      name: 'api-key-file',
      kind: 'path',
      group: 'Connection',
      describe: 'file holding the API key (a mounted Kubernetes secret); trailing newline ignored',
      commands: RUN,
    },
    {
      name: 'project',
      kind: 'string',
      group: 'Connection',
      describe: 'project slug, or "*" for all projects; absent: no header (the service reads "default")',
      envAliases: ['QUERY_API_PROJECT'],
      commands: [...RUN, 'reset'],
    },
    {
      name: 'project-header',
      kind: 'string',
      group: 'Connection',
      defaultText: d.projectHeader,
      describe:
        'project header name; by default both X-Raindrop-Project-Id (the vendor SDK) and X-Service-Project-Id (the spec) are sent, so either server reads the scope',
      commands: RUN,
    },
    {
      name: 'connect-timeout',
      kind: 'duration',
      group: 'Connection',
      defaultText: ms(d.connectTimeoutMs),
      describe: 'TCP/TLS connect timeout',
      commands: RUN,
    },
    {
      name: 'headers-timeout',
      kind: 'duration',
      group: 'Connection',
      defaultText: ms(d.headersTimeoutMs),
      describe: 'time to wait for response headers',
      commands: RUN,
    },
    {
      name: 'body-timeout',
      kind: 'duration',
      group: 'Connection',
      defaultText: ms(d.bodyTimeoutMs),
      describe: 'longest pause while reading a response body',
      commands: RUN,
    },
    {
      name: 'request-timeout',
      kind: 'duration',
      group: 'Connection',
      defaultText: ms(d.requestTimeoutMs),
      describe: 'longest time for one request, connect to last byte of the body',
      commands: RUN,
    },
    {
      name: 'max-retry-after',
      kind: 'duration',
      group: 'Pacing',
      defaultText: ms(d.maxRetryAfterMs),
      describe: 'longest Retry-After honoured; a longer one fails the stream, naming the wait',
      commands: RUN,
    },
    // Scope
    {
      name: 'resources',
      kind: 'string',
      group: 'Scope',
      defaultText: 'all',
      describe: `comma-separated: ${RESOURCE_NAMES.join(',')}`,
      commands: STATE,
    },
    {
      name: 'project-ids',
      kind: 'string',
      group: 'Scope',
      describe: 'comma-separated slugs narrowing "*" (sent as project_ids)',
      commands: RUN,
    },
    {
      name: 'start',
      kind: 'instant',
      group: 'Scope',
      defaultText: 'all history',
      describe: 'the oldest data a first sync (or --full-refresh) reads, e.g. 2026-01-01T00:00:00Z',
      commands: RUN,
    },
    {
      name: 'lookback',
      kind: 'duration',
      group: 'Scope',
      defaultText: d.lookback,
      describe: 're-read this far before the high-water mark (late-indexed events)',
      commands: RUN,
    },
    {
      name: 'settle',
      kind: 'duration',
      group: 'Scope',
      defaultText: d.settle,
      describe:
        're-read each events, users and conversations window once it is this old, for the fields the service adds later (0: off); what lands later than this is never seen',
      commands: RUN,
    },
    {
      name: 'traces',
      kind: 'choice',
      group: 'Scope',
      choices: ['traced', 'all', 'none'],
      default: d.traces,
      expected: 'all, traced (events whose tool_calls, error_spans or model show a trace) or none',
      describe:
        'where traces are read one event at a time, for which events: all; traced (only those whose tool_calls, error_spans or model show a trace: fewer requests, but spans of other events are never read); none reads no traces',
      commands: RUN,
    },
    {
      name: 'reconcile',
      kind: 'choice',
      group: 'Scope',
      choices: ['off', 'check', 'repair'],
      default: 'repair',
      expected: 'off, check (report differences, exit 5) or repair (re-read them)',
      describe:
        "after its writes, compare the API's event counts with the warehouse per project (recent two days hourly, plus what the run read) and re-read the windows that differ; check: report only (exit 5); off: no requests",
      commands: ['sync', 'plan'],
    },
    {
      name: 'deletions',
      kind: 'choice',
      group: 'Scope',
      choices: ['mark', 'delete', 'keep'],
      default: 'mark',
      expected: 'mark (set _deleted_at), delete (remove the rows) or keep (leave them, said once per window)',
      describe:
        "rows reconcile finds in the warehouse but no longer in the API's list of their window (deleted at the source), with their spans and event_signals rows: mark sets _deleted_at (cleared if the record is listed again); delete removes them; keep leaves them, said once per window",
      commands: ['sync'],
    },
    {
      name: 'from',
      kind: 'instant',
      group: 'Scope',
      describe: 'start of the interval (inclusive), with its offset, e.g. 2026-01-01T00:00:00Z',
      commands: ['backfill', 'plan', 'verify'],
    },
    {
      name: 'to',
      kind: 'instant',
      group: 'Scope',
      describe: 'end of the interval (exclusive), with its offset',
      commands: ['backfill', 'plan', 'verify'],
    },
    {
      name: 'window',
      kind: 'duration',
      group: 'Scope',
      defaultText: d.window,
      describe: 'window length the interval is sliced into',
      commands: ['backfill', 'plan', 'verify'],
    },
    {
      name: 'search',
      kind: 'string',
      group: 'Scope',
      repeatable: true,
      describe:
        'a saved search kept in search_results: name=query[,mode=text|semantic|regex][,search_in=user_input|assistant_output] (repeat the flag; one a line in the environment; a list in a config file)',
      commands: ['sync', 'check', 'plan'],
    },
    {
      name: 'aggregates',
      kind: 'boolean',
      group: 'Scope',
      defaultText: 'false',
      describe: 'refresh event_counts (from /v1/events/timeseries) and event_facets (from /v1/events/facets) each sync',
      commands: ['sync', 'check', 'plan'],
    },
    {
      name: 'aggregates-interval',
      kind: 'choice',
      group: 'Scope',
      choices: ['day', 'hour'],
      default: 'day',
      describe:
        'the buckets of event_counts: day or hour (each kept under its own interval value; a change starts that interval from --start)',
      commands: ['sync', 'check', 'plan'],
    },
    // Destination
    {
      name: 'destination',
      kind: 'choice',
      group: 'Destination',
      choices: DESTINATION_NAMES,
      default: 'duckdb',
      describe: 'where rows go',
      commands: [...WAREHOUSE, 'report'],
    },
    {
      name: 'duckdb-path',
      kind: 'path',
      group: 'Destination',
      defaultText: d.duckdbPath,
      describe:
        'DuckDB file readers open: the published read copy (the sync writes <name>.work.duckdb beside it; docs/analysts.md). Relative to the working directory: give an absolute path in cron',
      commands: [...WAREHOUSE, 'sql', 'publish', 'report'],
    },
    {
      name: 'publish-every',
      kind: 'duration',
      group: 'Destination',
      defaultText: d.publishEvery,
      describe:
        "DuckDB: during a run, publish the read copy (--duckdb-path, and its Parquet set) this often; also at every run's end (0: only at the end). See docs/analysts.md. The metrics (--metrics-file, --pushgateway) are published as often",
      commands: ['sync', 'backfill', 'dbt-sources'],
    },
    {
      name: 'duckdb-memory-limit',
      kind: 'size',
      group: 'Destination',
      defaultText: sizeText(d.duckdbMemoryLimitBytes),
      describe:
        "DuckDB's memory limit in this process (larger operations spill to <file>.tmp; never raised on its own: rows too large for it fail naming this flag)",
      commands: WAREHOUSE,
    },
    {
      name: 'bq-project',
      kind: 'string',
      group: 'Destination',
      describe: 'BigQuery project (with --destination bigquery)',
      commands: WAREHOUSE,
    },
    { name: 'bq-dataset', kind: 'string', group: 'Destination', describe: 'BigQuery dataset', commands: WAREHOUSE },
    {
      name: 'bq-location',
      kind: 'string',
      group: 'Destination',
      defaultText: d.bqLocation,
      describe: 'BigQuery location for a new dataset',
      commands: WAREHOUSE,
    },
    {
      name: 'bq-api-endpoint',
      kind: 'string',
      group: 'Destination',
      describe: 'another BigQuery endpoint (local emulator or test double)',
      commands: WAREHOUSE,
    },
    {
      name: 'bq-key-file',
      kind: 'path',
      group: 'Destination',
      defaultText: 'Application Default Credentials',
      describe: 'service-account key file',
      commands: WAREHOUSE,
    },
    {
      name: 'bq-upsert',
      kind: 'choice',
      group: 'Destination',
      choices: ['auto', 'log', 'merge'],
      defaultText: 'auto',
      describe:
        'users and conversations in BigQuery: auto gives new tables the change-log layout (a free load job a run, read through a view) and keeps existing ones; log also migrates an existing table; merge keeps one MERGE a run (docs/bigquery-cost.md)',
      commands: WAREHOUSE,
    },
    {
      name: 'bq-compact-every',
      kind: 'duration',
      group: 'Destination',
      defaultText: '24h',
      describe:
        'how often a change log (users_changes, conversations_changes) is compacted to its latest rows, before a run appends to it',
      commands: WAREHOUSE,
    },
    {
      name: 'dry-run',
      kind: 'boolean',
      group: 'Destination',
      defaultText: 'false',
      describe: 'BigQuery: print the requests each write would send (DDL, load job, MERGE), send nothing',
      commands: RUN,
    },
    {
      name: 'dry-run-limit',
      kind: 'integer',
      group: 'Destination',
      defaultText: String(d.dryRunLimit),
      describe: 'with --dry-run: rows each stream reads before it stops',
      commands: RUN,
    },
    {
      name: 'batch-bytes',
      kind: 'size',
      group: 'Destination',
      defaultText: sizeText(d.batchBytes),
      describe: 'also write a batch once its rows hold this much text',
      commands: RUN,
    },
    {
      name: 'batch-rows',
      kind: 'integer',
      group: 'Destination',
      defaultText: `${d.batchRows.duckdb} (DuckDB), ${d.batchRows.bigquery} (BigQuery)`,
      describe: 'rows per write + checkpoint',
      commands: RUN,
    },
    // Privacy and schema
    {
      name: 'exclude-columns',
      kind: 'string',
      group: 'Privacy and schema',
      describe: 'resource.field items never written, e.g. events.user_input,traces.input',
      commands: RUN,
    },
    {
      name: 'hash-columns',
      kind: 'string',
      group: 'Privacy and schema',
      describe: 'resource.field items written as a salted SHA-256 (HMAC) hex string; salt from QUERY_SYNC_HASH_SALT',
      commands: RUN,
    },
    {
      name: 'hash-salt',
      kind: 'string',
      group: 'Privacy and schema',
      secret: true,
      describe: 'salt of --hash-columns: environment only',
      commands: RUN,
    },
    {
      name: 'schema-contract',
      kind: 'choice',
      group: 'Privacy and schema',
      choices: ['evolve', 'freeze-columns', 'freeze'],
      default: 'evolve',
      expected: 'one of evolve, freeze-columns, freeze',
      describe:
        'evolve: new fields become columns; freeze-columns: a new field or a type change fails the stream; freeze: nor may a table be created',
      commands: RUN,
    },
    // State and run
    {
      name: 'config',
      kind: 'path',
      group: 'State and run',
      describe: 'settings file (YAML or JSON; keys are flag names); flags and environment override it',
      commands: [...STATE, 'dbt-sources', 'sql', 'publish', 'report'],
    },
    {
      name: 'state',
      kind: 'path',
      group: 'State and run',
      defaultText: d.statePath,
      describe:
        'state file: a copy of the state the warehouse keeps (marks, checkpoints, ledger), read when the warehouse has none; relative to the working directory',
      commands: STATE,
    },
    {
      name: 'lock-wait',
      kind: 'duration',
      group: 'State and run',
      defaultText: '0 (fail at once)',
      describe: 'wait this long for another run holding the state lease or the DuckDB file',
      commands: WAREHOUSE,
    },
    {
      name: 'max-run-time',
      kind: 'duration',
      group: 'State and run',
      defaultText: 'none',
      describe: 'stop gracefully after this long (state consistent; exit 6; the next run continues)',
      commands: WRITES,
    },
    {
      name: 'full-refresh',
      kind: 'boolean',
      group: 'State and run',
      defaultText: 'false',
      describe: 're-read the --resources from their start and replace their tables at the end, atomically',
      commands: ['sync'],
    },
    {
      name: 'concurrency',
      kind: 'integer',
      group: 'Pacing',
      defaultText: `${d.concurrency} (backfill, verify --repair), ${d.splitConcurrency} (sync)`,
      describe:
        'backfill and verify --repair: windows read at once; sync: most sub-windows of one large window walked at once (1: one walk per window)',
      commands: ['sync', 'backfill', 'verify'],
    },
    {
      name: 'repair',
      kind: 'boolean',
      group: 'State and run',
      defaultText: 'false',
      describe: 're-read the mismatched windows, then check again',
      commands: ['verify'],
    },
    {
      name: 'yes',
      kind: 'boolean',
      group: 'State and run',
      defaultText: 'false',
      describe: 'do not ask for confirmation (required when not on a terminal)',
      commands: ['reset'],
    },
    // Pacing
    {
      name: 'max-rpm',
      kind: 'number',
      group: 'Pacing',
      defaultText: String(d.maxRpm),
      describe: 'requests per minute per endpoint (status: the rate its backlog ETA assumes)',
      commands: [...RUN, 'status'],
    },
    {
      name: 'search-rpm',
      kind: 'number',
      group: 'Pacing',
      defaultText: String(d.searchRpm),
      describe: 'requests per minute to /v1/events/search',
      commands: RUN,
    },
    {
      name: 'max-rps',
      kind: 'number',
      group: 'Pacing',
      defaultText: String(d.maxRps),
      describe: 'requests per second, all endpoints',
      commands: RUN,
    },
    {
      name: 'search-gate-rps',
      kind: 'number',
      group: 'Pacing',
      defaultText: String(d.searchGateRps),
      describe: 'search only while combined usage of the last second is under this',
      commands: RUN,
    },
    // Logging and output
    {
      name: 'log-level',
      kind: 'choice',
      group: 'Logging and output',
      choices: ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'],
      defaultText: 'info (--verbose: debug)',
      describe: 'log level',
      commands: RUN,
    },
    {
      name: 'log-format',
      kind: 'choice',
      group: 'Logging and output',
      choices: ['json', 'pretty'],
      defaultText: 'pretty on a TTY, JSON otherwise',
      describe: 'log format',
      commands: RUN,
    },
    {
      name: 'verbose',
      kind: 'boolean',
      group: 'Logging and output',
      defaultText: 'false',
      describe: 'debug logs',
      commands: RUN,
    },
    {
      name: 'quiet',
      kind: 'boolean',
      group: 'Logging and output',
      defaultText: 'false',
      describe: 'only the summary',
      commands: RUN,
    },
    {
      name: 'progress-interval',
      kind: 'duration',
      group: 'Logging and output',
      defaultText: d.progressInterval,
      describe: 'not on a TTY: a progress log line this often',
      commands: RUN,
    },
    {
      name: 'dbt-sources',
      kind: 'path',
      group: 'Logging and output',
      describe: 'after the sync, write a dbt sources.yml describing every table and column here',
      commands: ['sync'],
    },
    {
      name: 'out',
      kind: 'path',
      group: 'Logging and output',
      defaultText: 'sources.yml',
      describe: 'the dbt sources.yml to write',
      commands: ['dbt-sources'],
    },
    {
      name: 'json',
      kind: 'boolean',
      group: 'Logging and output',
      defaultText: 'false',
      describe: 'output as JSON (sync, backfill: the run summary as one object, for schedulers)',
      commands: ['sync', 'backfill', 'check', 'plan', 'status', 'sql'],
    },
    {
      name: 'check',
      kind: 'boolean',
      group: 'Logging and output',
      defaultText: 'false',
      describe:
        'status: judge freshness instead of listing: exit 7 with one line per published copy, stream or backlog past --max-lag or --max-backlog-eta, else 0 and one line (reads state and the copy only)',
      commands: ['status'],
    },
    {
      name: 'max-lag',
      kind: 'duration',
      group: 'Logging and output',
      defaultText: `${d.maxLag} (status --check); none (sync)`,
      describe:
        'status --check: longest lag (now − as-of) of the published copy and of each stream; sync: a stream whose mark lags more after the run is stale (--notify-on stale)',
      commands: ['status', 'sync'],
    },
    {
      name: 'max-backlog-eta',
      kind: 'duration',
      group: 'Logging and output',
      defaultText: d.maxBacklogEta,
      describe:
        'status --check: longest forecast for a per-event backlog (traces) to be whole at --max-rpm; one that never drains always breaches',
      commands: ['status'],
    },
    {
      name: 'freshness-target',
      kind: 'duration',
      group: 'Logging and output',
      defaultText: 'none',
      describe:
        'warn at the end of a run when a per-event backlog (traces) will not be whole within this long at --max-rpm (docs/running.md)',
      commands: ['sync'],
    },
    {
      name: 'html',
      kind: 'path',
      group: 'Logging and output',
      describe: 'report: write the run history as one self-contained HTML page with charts here (docs/report.md)',
      commands: ['report'],
    },
    {
      name: 'csv',
      kind: 'boolean',
      group: 'Logging and output',
      defaultText: 'false',
      describe: 'sql: the answer as CSV (a header line, then one line a row)',
      commands: ['sql'],
    },
    // Monitoring (docs/monitoring.md): what a run tells the operator's tools at its start and end.
    {
      name: 'metrics-file',
      kind: 'path',
      group: 'Monitoring',
      describe:
        "write the run's Prometheus metrics to this file (node_exporter's textfile collector: name it *.prom), atomically, at every --publish-every and at the run's end, failed or stopped too",
      commands: MONITORED,
    },
    {
      name: 'pushgateway',
      kind: 'string',
      group: 'Monitoring',
      describe:
        'push the same metrics to this Prometheus Pushgateway (http://host:9091) at the same moments; one that is down or slow is a warning after --monitor-timeout, never a failed run',
      commands: MONITORED,
    },
    {
      name: 'pushgateway-job',
      kind: 'string',
      group: 'Monitoring',
      defaultText: DEFAULT_PUSHGATEWAY_JOB,
      describe: "the Pushgateway's job label (its grouping key with --pushgateway-instance)",
      commands: MONITORED,
    },
    {
      name: 'pushgateway-instance',
      kind: 'string',
      group: 'Monitoring',
      defaultText: "the warehouse's name (DuckDB: the file's name without .duckdb; BigQuery: project.dataset)",
      describe:
        'the instance label the Pushgateway groups this sync by: stable from run to run (a pod name is not), one per warehouse',
      commands: MONITORED,
    },
    {
      name: 'ping-url',
      kind: 'string',
      group: 'Monitoring',
      describe:
        'healthchecks.io-style pings: URL/start as the run starts, URL when it succeeds, URL/fail on any other end (the summary as the body); only its origin is ever logged',
      commands: MONITORED,
    },
    {
      name: 'ping-exit-code',
      kind: 'boolean',
      group: 'Monitoring',
      defaultText: 'false',
      describe: 'end pings as URL/<exit code> (URL/0 on success) instead of URL and URL/fail',
      commands: MONITORED,
    },
    {
      name: 'notify-url',
      kind: 'string',
      group: 'Monitoring',
      describe:
        'POST one JSON message {"text": …} per event to this webhook (Slack, Mattermost, Discord\'s /slack, Teams workflows); only its origin is ever logged',
      commands: MONITORED,
    },
    {
      name: 'notify-on',
      kind: 'string',
      group: 'Monitoring',
      defaultText: DEFAULT_NOTIFY_ON,
      describe: `the events --notify-url hears of, comma-separated: ${NOTIFY_KINDS.join(', ')} (stale needs --max-lag)`,
      commands: MONITORED,
    },
    {
      name: 'monitor-timeout',
      kind: 'duration',
      group: 'Monitoring',
      defaultText: DEFAULT_MONITOR_TIMEOUT,
      describe:
        'the longest a push, a ping or a notification may take (one retry inside it); what does not answer in time is a warning, and the run goes on',
      commands: MONITORED,
    },
  ];
}

// ---- the defaults: each held once, here beside its flag ----

/**
 * A batch is also written once its rows hold this much text (`--batch-bytes`), so memory follows
 * the settings, not the size of the records: 5,000 rows of 200 KB would otherwise be 1 GB.
 */
export const DEFAULT_BATCH_BYTES = 8_000_000;

/**
 * Rows per write + checkpoint. BigQuery batches are larger: each write is one load job and one MERGE,
 * and a table allows 1,500 load jobs a day; DuckDB checkpoints more often for cheap.
 */
export const DEFAULT_BATCH_ROWS = Object.freeze({ duckdb: 5_000, bigquery: 50_000 });

/** Default files: relative to the working directory (cron and containers should pass absolute paths). */
export const DEFAULT_DUCKDB_PATH = 'warehouse.duckdb';
export const DEFAULT_STATE_PATH = 'state/state.json';
/** How often a long run publishes the read copy (`publish/publisher.ts`): the lag readers see is this plus one publish. */
export const DEFAULT_PUBLISH_EVERY = '5m';
export const DEFAULT_LOOKBACK = '15m';
export const DEFAULT_PROGRESS_INTERVAL = '5s';
/** Both project headers are sent unless one is named: the vendor SDK's and the spec's (connectors/service.ts). */
const DEFAULT_PROJECT_HEADER = PROJECT_HEADERS.join(' and ');
/**
 * Re-read each events window once it is this old (late enrichment): the SDK says enriched fields
 * "may be absent for very recent events", with no figure. Two hours covers the enrichment delays
 * the emulator models and keeps the re-read cheap (one extra read of each window, two hours after it).
 */
export const DEFAULT_SETTLE = '2h';
/**
 * Which events get their traces read where traces are read per event: every event. `traced` reads
 * only events whose `tool_calls`, `error_spans` or `model` show a trace, and loses the spans of any
 * other event that has some (docs/traces.md): an opt-in saving, never the default.
 */
export const DEFAULT_TRACES: TraceSelection = 'all';
export const DEFAULT_BQ_LOCATION = 'US';
/** Default rows per stream a dry run reads: enough to show every statement, not all history. */
export const DEFAULT_DRY_RUN_LIMIT = 100;
/** Default window of a backfill or verify: one day. */
export const DEFAULT_WINDOW = '1d';
/** The Pushgateway's job label of a run (`--pushgateway-job`). */
export const DEFAULT_PUSHGATEWAY_JOB = 'query-sync';
/** What `--notify-on` can name. */
export const NOTIFY_KINDS = ['failure', 'difference', 'schema-change', 'stale'] as const;
/**
 * What a webhook hears of by default: what asks the operator to act (a failure, a difference left,
 * data older than --max-lag). A schema change is opt-in: the default contract (`evolve`) takes new
 * columns by itself, so it asks nothing of anyone.
 */
export const DEFAULT_NOTIFY_ON = 'failure,difference,stale';
/**
 * The longest a push, a ping or a notification takes (`--monitor-timeout`): healthchecks.io and the
 * Pushgateway answer in milliseconds; a few seconds bound what a dead endpoint adds to a run.
 */
export const DEFAULT_MONITOR_TIMEOUT = '5s';
/** Default windows read at once by a backfill. */
export const DEFAULT_CONCURRENCY = 4;
/**
 * `status --check`'s bounds when none is given. A check with no bound would pass whatever the data,
 * so `--check` alone checks something sane: two hours is an hourly schedule that missed one run (or
 * ran long), the issue's own example; six hours for a traces backlog is a working day's events read
 * before the next one starts. Set them to the schedule you run (docs/running.md).
 */
export const DEFAULT_MAX_LAG = '2h';
export const DEFAULT_MAX_BACKLOG_ETA = '6h';
/** Sub-walks of one large window of a sync at once, at most (`sync/split/plan.ts`). */
export const DEFAULT_SPLIT_CONCURRENCY = 16;

/** Every flag with its environment name, default, unit and help group. */
export const OPTIONS = optionTable({
  connectTimeoutMs: DEFAULT_TIMEOUTS.connectMs,
  headersTimeoutMs: DEFAULT_TIMEOUTS.headersMs,
  bodyTimeoutMs: DEFAULT_TIMEOUTS.bodyMs,
  requestTimeoutMs: DEFAULT_TIMEOUTS.requestMs,
  maxRetryAfterMs: DEFAULT_MAX_RETRY_AFTER_MS,
  batchBytes: DEFAULT_BATCH_BYTES,
  ...DEFAULT_RATE_LIMITS,
  duckdbMemoryLimitBytes: DEFAULT_MEMORY_LIMIT_BYTES,
  duckdbPath: DEFAULT_DUCKDB_PATH,
  statePath: DEFAULT_STATE_PATH,
  lookback: DEFAULT_LOOKBACK,
  settle: DEFAULT_SETTLE,
  traces: DEFAULT_TRACES,
  window: DEFAULT_WINDOW,
  concurrency: DEFAULT_CONCURRENCY,
  batchRows: DEFAULT_BATCH_ROWS,
  projectHeader: DEFAULT_PROJECT_HEADER,
  bqLocation: DEFAULT_BQ_LOCATION,
  progressInterval: DEFAULT_PROGRESS_INTERVAL,
  splitConcurrency: DEFAULT_SPLIT_CONCURRENCY,
  dryRunLimit: DEFAULT_DRY_RUN_LIMIT,
  publishEvery: DEFAULT_PUBLISH_EVERY,
  maxLag: DEFAULT_MAX_LAG,
  maxBacklogEta: DEFAULT_MAX_BACKLOG_ETA,
});

/** `QUERY_SYNC_<FLAG>`: the environment variable of a flag. */
export function envName(flag: string): string {
  return `QUERY_SYNC_${flag.toUpperCase().replace(/-/g, '_')}`;
}

export function camel(flag: string): string {
  return flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

/** A flag's value as read, and where it came from (for messages). */
export type RawValue = string | number | boolean;
export interface Collected {
  /** camelCase flag name → value (flags as yargs names them). */
  readonly values: Readonly<Record<string, RawValue | undefined>>;
  /** camelCase flag name → `--flag`, `QUERY_SYNC_FLAG` or `key in file`. */
  readonly sources: Readonly<Record<string, string>>;
}

/**
 * Merge a command's flags with the environment and the config file: a flag given wins, then
 * `QUERY_SYNC_<FLAG>` (then older names), then the file. Values keep their raw form (strings from
 * the environment and files); `config/reader.ts` parses and validates them.
 */
export function collect(
  table: readonly OptionSpec[],
  command: CommandName,
  flags: Readonly<Record<string, unknown>>,
  env: NodeJS.ProcessEnv,
): Collected {
  refuseUnknownEnv(table, env);
  const specs = table.filter((o) => o.commands.includes(command));
  const values: Record<string, RawValue | undefined> = {};
  const sources: Record<string, string> = {};
  const configPath = stringOf(flags.config) ?? env[envName('config')];
  const file =
    configPath === undefined || configPath === ''
      ? { path: '', values: {} as Record<string, RawValue> }
      : readConfigFile(configPath, table);
  for (const spec of specs) {
    const key = camel(spec.name);
    const given = flags[key];
    // A repeated flag arrives as a list: one item a line, as in the environment.
    const flagValue = Array.isArray(given)
      ? spec.repeatable === true
        ? given.map(String).join('\n')
        : given[given.length - 1]
      : given;
    if (!spec.secret && flagValue !== undefined && flagValue !== null) {
      values[key] = flagValue as RawValue;
      sources[key] = `--${spec.name}`;
      continue;
    }
    const envKey = [envName(spec.name), ...(spec.envAliases ?? [])].find((k) => env[k] !== undefined && env[k] !== '');
    if (envKey !== undefined) {
      values[key] = env[envKey];
      sources[key] = envKey;
      continue;
    }
    if (spec.secret && flagValue !== undefined) {
      // `--api-key` (warned about by the CLI), or programmatic callers (the demo, tests).
      values[key] = flagValue as RawValue;
      sources[key] = `--${spec.name}`;
      continue;
    }
    const fromFile = file.values[spec.name];
    if (fromFile !== undefined) {
      values[key] =
        spec.kind === 'path' && typeof fromFile === 'string' && !isAbsolute(fromFile)
          ? resolve(dirname(file.path), fromFile)
          : fromFile;
      sources[key] = `${spec.name} in ${file.path}`;
    }
  }
  return { values, sources };
}

/** `QUERY_SYNC_*` variables read elsewhere than the option table. */
const OTHER_ENV = new Set(['QUERY_SYNC_OPTIMIZE_FOR']);

/** A misspelt `QUERY_SYNC_*` variable would be ignored silently: refuse it, naming the closest one. */
function refuseUnknownEnv(table: readonly OptionSpec[], env: NodeJS.ProcessEnv): void {
  const known = new Set([...table.map((o) => envName(o.name)), ...OTHER_ENV]);
  for (const name of Object.keys(env)) {
    if (!name.startsWith('QUERY_SYNC_') || known.has(name)) continue;
    const closest = [...known].sort((a, b) => distance(name, a) - distance(name, b))[0];
    throw new ConfigError(
      `${name} is not a query-sync setting${closest === undefined ? '' : `: did you mean ${closest}?`} (every setting: query-sync <command> --help)`,
    );
  }
}

/** Edit distance, for the suggestion above. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(
        (prev[j] ?? 0) + 1,
        (row[j - 1] ?? 0) + 1,
        (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    prev = row;
  }
  return prev[b.length] ?? 0;
}

function stringOf(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/**
 * The YAML parser, loaded when a YAML config file is read (most runs have none: it was 60 ms of
 * every start-up). Synchronous, as the config is: yaml ships a CommonJS build.
 */
function parseYaml(text: string): unknown {
  return (createRequire(import.meta.url)('yaml') as typeof import('yaml')).parse(text);
}

function readConfigFile(
  path: string,
  table: readonly OptionSpec[],
): { path: string; values: Record<string, RawValue> } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`--config: cannot read ${path}: ${(error as Error).message}`, { cause: error });
  }
  let parsed: unknown;
  try {
    parsed = path.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new ConfigError(
      `--config: ${path} is not valid ${path.endsWith('.json') ? 'JSON' : 'YAML'}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  if (parsed === null || parsed === undefined) return { path, values: {} };
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ConfigError(
      `--config: expected ${path} to hold a mapping of flag names to values (e.g. "duckdb-path: /data/warehouse.duckdb"), got ${Array.isArray(parsed) ? 'a list' : typeof parsed}`,
    );
  }
  const byName = new Map(table.flatMap((o) => [[o.name, o] as const, [camel(o.name), o] as const]));
  const values: Record<string, RawValue> = {};
  for (const [key, value] of Object.entries(parsed as Record<string, unknown>)) {
    const spec = byName.get(key);
    if (spec === undefined || spec.name === 'config') {
      throw new ConfigError(
        `--config: ${path} has an unknown setting "${key}"; settings are flag names such as duckdb-path, lookback, max-rpm (see query-sync <command> --help)`,
      );
    }
    if (spec.secret) {
      throw new ConfigError(
        `--config: ${path} holds "${key}", a secret: secrets are read only from the environment (${envName(spec.name)}) or a file (api-key-file)`,
      );
    }
    if (spec.repeatable === true && Array.isArray(value) && value.every((v) => typeof v === 'string')) {
      values[spec.name] = value.join('\n');
      continue;
    }
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
      throw new ConfigError(
        `--config: "${key}" in ${path} must be a single value, got ${Array.isArray(value) ? 'a list' : typeof value}${spec.name === 'resources' ? ' (write a comma-separated string: events,users)' : ''}`,
      );
    }
    values[spec.name] = value;
  }
  return { path, values };
}
