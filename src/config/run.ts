import { RESOURCES } from '../../connectors/index.js';
import { PROJECT_HEADERS } from '../../connectors/service.js';
import { parseDuration } from '../core/duration.js';
import { emptyToUndefined, parseSearches, splitList } from './values.js';
import { ConfigError } from '../core/errors.js';
import type { LogFormat } from '../core/log.js';
import type { TraceSelection, ResourceDefinition, SavedSearch } from '../core/types.js';
import { DEFAULT_RATE_LIMITS, type RateLimits } from '../http/scheduler/budget.js';
import { DEFAULT_MEMORY_LIMIT_BYTES } from '../load/duckdb/memory.js';
import { DEFAULT_MAX_RETRY_AFTER_MS } from '../http/retry-after.js';
import { DEFAULT_TIMEOUTS, type TimeoutOptions } from '../http/timeouts.js';
import { DEFAULT_BASE_URL, normalizeBaseUrl } from '../http/conventions.js';
import type { SchemaContract } from '../normalize/contract.js';
import { resolvePrivacy, withPrivacy, type PrivacyRules } from '../normalize/privacy.js';
import type { ReconcileMode } from '../core/reconcile-mode.js';
import type { DeletionMode } from '../core/deletions.js';
import type { CommandName } from './options.js';
import {
  ENV,
  DEFAULT_BATCH_BYTES,
  DEFAULT_BATCH_ROWS,
  DEFAULT_DUCKDB_PATH,
  DEFAULT_STATE_PATH,
  DEFAULT_PUBLISH_EVERY,
  DEFAULT_LOOKBACK,
  DEFAULT_PROGRESS_INTERVAL,
  DEFAULT_SETTLE,
  DEFAULT_DRY_RUN_LIMIT,
  DEFAULT_SPLIT_CONCURRENCY,
} from './defaults.js';
import { reader, type Reader } from './reader.js';
import { resolveApiKey, resolveResources, resolveWarehouse, SLUG, type BigQueryConfig } from './parts.js';
import type { DestinationName } from '../load/registry.js';
import { resolveMonitor, type MonitorConfig } from './monitor.js';

/** The settings of a run that reads the API (sync, check, and the base of backfill, plan, verify). */

export interface SyncConfig {
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly project: string | undefined;
  readonly projectIds: readonly string[] | undefined;
  readonly projectHeader: string | readonly string[];
  readonly resources: readonly ResourceDefinition[];
  readonly destination: DestinationName;
  readonly duckdbPath: string;
  /** DuckDB's memory limit, in bytes (`--duckdb-memory-limit`). */
  readonly duckdbMemoryLimitBytes: number;
  readonly bigquery?: BigQueryConfig;
  readonly dryRun: boolean;
  /** Dry run: rows each stream reads (and prints the requests for) before it stops. */
  readonly dryRunLimit: number;
  readonly statePath: string;
  readonly lockWaitMs: number;
  readonly lookbackMs: number;
  /** Re-read each events window once this old, for late enrichment (0: never). */
  readonly settleMs: number;
  /** Which events get their traces read where the server reads traces per event. */
  readonly traces: TraceSelection;
  /** After the writes, check the API's counts against the warehouse (`reconcile.ts`). @default 'repair' */
  readonly reconcile?: ReconcileMode;
  /** Rows reconcile finds deleted at the source (`core/deletions.ts`). @default 'mark' */
  readonly deletions?: DeletionMode;
  readonly startMs: number | undefined;
  readonly batchRows: number;
  readonly limits: RateLimits;
  readonly timeouts: TimeoutOptions;
  readonly logLevel: string;
  readonly logFormat: LogFormat;
  readonly quiet: boolean;
  /**
   * How a run shows progress: a live display on a TTY (stderr), else a progress log line every
   * `progressIntervalMs`; `off` with `--quiet` (the summary only).
   */
  readonly progress: 'tty' | 'log' | 'off';
  readonly progressIntervalMs: number;
  /** Bytes of row text per write (see `DEFAULT_BATCH_BYTES`). */
  readonly batchBytes: number;
  /** The longest `Retry-After` honoured; a longer one fails the stream. */
  readonly maxRetryAfterMs: number;
  /** `sync --json`: the run summary as one JSON object on stdout (for schedulers), no text summary. */
  readonly json: boolean;
  /** Fields excluded or hashed before normalization (already part of `resources`' transforms; the salt is not kept here). */
  readonly privacy: PrivacyRules;
  /** What a run may change in the tables: `evolve` (default), `freeze-columns`, `freeze`. */
  readonly schemaContract: SchemaContract;
  /** `--search`: saved searches kept in `search_results` (sync). */
  readonly searches?: readonly SavedSearch[];
  /** `--aggregates`: refresh `event_counts` and `event_facets` each sync. */
  readonly aggregates?: boolean;
  /** `--aggregates-interval`: the buckets of `event_counts`. @default 'day' */
  readonly aggregatesInterval?: 'day' | 'hour';
  /** `--dbt-sources`: write a dbt sources.yml here after the sync. */
  readonly dbtSourcesPath?: string;
  /**
   * `sync`: most sub-windows of one large window walked at once (split walks); how many help is
   * found at run time. 1 reads each window in one walk. @default 16
   */
  readonly splitConcurrency: number;
  /** Stop gracefully after this long (`--max-run-time`). */
  readonly maxRunTimeMs?: number;
  /** Re-read the resources from their start and replace their tables at the end (`--full-refresh`). */
  readonly fullRefresh?: boolean;
  /** DuckDB: publish the read copy this often during a run (`--publish-every`; 0: only at the end). @default 5m */
  readonly publishEveryMs?: number;
  /** Metrics, pings and notifications (`--metrics-file`, `--pushgateway`, `--ping-url`, `--notify-url`); absent when none is asked for. */
  readonly monitor?: MonitorConfig;
  /** `--freshness-target`: warn at the run's end when a per-event backlog's forecast passes it. @default none */
  readonly freshnessTargetMs?: number;
}

/**
 * Flags as yargs hands them over (strings, unvalidated), camelCase. `apiKey` is for programmatic
 * callers (the demo): the CLI reads the key only from the environment or `--api-key-file`.
 */
export interface SyncFlags {
  readonly config?: string;
  readonly baseUrl?: string;
  readonly apiKey?: string;
  readonly apiKeyFile?: string;
  readonly project?: string;
  readonly projectIds?: string;
  readonly projectHeader?: string;
  readonly resources?: string;
  readonly destination?: string;
  readonly duckdbPath?: string;
  readonly duckdbMemoryLimit?: string;
  readonly bqProject?: string;
  readonly bqDataset?: string;
  readonly bqLocation?: string;
  readonly bqApiEndpoint?: string;
  readonly bqKeyFile?: string;
  readonly bqUpsert?: string;
  readonly bqCompactEvery?: string;
  readonly dryRun?: boolean;
  readonly dryRunLimit?: number | string;
  readonly state?: string;
  readonly lockWait?: string;
  readonly lookback?: string;
  readonly settle?: string;
  readonly traces?: string;
  readonly start?: string;
  readonly batchRows?: number | string;
  readonly maxRpm?: number | string;
  readonly searchRpm?: number | string;
  readonly maxRps?: number | string;
  readonly searchGateRps?: number | string;
  readonly connectTimeout?: string;
  readonly headersTimeout?: string;
  readonly bodyTimeout?: string;
  readonly logLevel?: string;
  readonly logFormat?: string;
  readonly quiet?: boolean;
  readonly verbose?: boolean;
  readonly progressInterval?: string;
  readonly maxRunTime?: string;
  readonly fullRefresh?: boolean;
  readonly batchBytes?: string;
  readonly requestTimeout?: string;
  readonly maxRetryAfter?: string;
  readonly json?: boolean;
  readonly excludeColumns?: string;
  readonly hashColumns?: string;
  readonly schemaContract?: string;
  readonly search?: string | readonly string[];
  readonly aggregates?: boolean;
  readonly dbtSources?: string;
  readonly metricsFile?: string;
  readonly pushgateway?: string;
  readonly pushgatewayJob?: string;
  readonly pushgatewayInstance?: string;
  readonly pingUrl?: string;
  readonly pingExitCode?: boolean;
  readonly notifyUrl?: string;
  readonly notifyOn?: string;
  readonly maxLag?: string;
  readonly monitorTimeout?: string;
  readonly freshnessTarget?: string;
}

export function resolveSyncConfig(
  flags: SyncFlags,
  env: NodeJS.ProcessEnv = process.env,
  isTty = false,
): Readonly<SyncConfig> {
  return resolveRun('sync', flags, env, isTty).config;
}

/** What every command that reads the API resolves the same way, plus the collected raw values. */
export function resolveRun(
  command: CommandName,
  flags: SyncFlags,
  env: NodeJS.ProcessEnv,
  isTty: boolean,
): { config: Readonly<SyncConfig>; read: Reader } {
  const read = reader(command, flags, env);
  // The SDK's default server when none is given (conventions.ts).
  const baseUrl = emptyToUndefined(read.text('base-url')) ?? DEFAULT_BASE_URL;
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new ConfigError(
      `${read.label('base-url')}: expected an http(s) URL such as https://query.example.com, got "${baseUrl}"`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`${read.label('base-url')}: expected http or https, got "${url.protocol}"`);
  }
  const apiKey = resolveApiKey(read);

  const project = emptyToUndefined(read.text('project'));
  if (project !== undefined && project !== '*' && !SLUG.test(project)) {
    throw new ConfigError(
      `${read.label('project')}: expected a project slug (lowercase letters, digits, - and _) or "*", got "${project}"`,
    );
  }
  const projectIdsText = read.text('project-ids');
  const projectIds = projectIdsText === undefined ? undefined : splitList(projectIdsText);
  if (projectIds !== undefined) {
    if (project !== '*') throw new ConfigError(`--project-ids narrows an all-projects read: add --project '*'`);
    const bad = projectIds.filter((s) => !SLUG.test(s));
    if (bad.length > 0 || projectIds.length === 0) {
      throw new ConfigError(
        `${read.label('project-ids')}: expected comma-separated project slugs, got "${projectIdsText}"`,
      );
    }
  }

  const salt = read.text('hash-salt');
  const privacy = resolvePrivacy(
    { excludeColumns: read.text('exclude-columns'), hashColumns: read.text('hash-columns') },
    RESOURCES,
    salt,
    ENV.hashSalt,
  );
  const resources = resolveResources(read).map((r) => withPrivacy(r, privacy, salt));
  const { destination, bigquery } = resolveWarehouse(read);
  const dryRun = read.bool('dry-run') ?? false;
  if (dryRun && destination !== 'bigquery') {
    throw new ConfigError('--dry-run prints what would be sent to BigQuery: use it with --destination bigquery');
  }
  const settleMs = read.duration('settle') ?? parseDuration(DEFAULT_SETTLE);
  // A choice is checked against its option's choices and defaulted there (options.ts, config/reader.ts).
  const traces = read.choice('traces') as TraceSelection;
  const reconcile = read.choice('reconcile') as ReconcileMode;
  const deletions = read.choice('deletions') as DeletionMode;

  const limits: RateLimits = {
    maxRpm: read.number('max-rpm') ?? DEFAULT_RATE_LIMITS.maxRpm,
    searchRpm: read.number('search-rpm') ?? DEFAULT_RATE_LIMITS.searchRpm,
    maxRps: read.number('max-rps') ?? DEFAULT_RATE_LIMITS.maxRps,
    searchGateRps: read.number('search-gate-rps') ?? DEFAULT_RATE_LIMITS.searchGateRps,
  };
  const timeouts: TimeoutOptions = {
    connectMs: read.duration('connect-timeout') ?? DEFAULT_TIMEOUTS.connectMs,
    headersMs: read.duration('headers-timeout') ?? DEFAULT_TIMEOUTS.headersMs,
    bodyMs: read.duration('body-timeout') ?? DEFAULT_TIMEOUTS.bodyMs,
    requestMs: read.duration('request-timeout') ?? DEFAULT_TIMEOUTS.requestMs,
  };
  if (timeouts.requestMs <= 0)
    throw new ConfigError(`${read.label('request-timeout')}: expected a positive duration such as 2m`);
  const schemaContract = read.choice('schema-contract') as SchemaContract;
  const batchBytes = read.size('batch-bytes') ?? DEFAULT_BATCH_BYTES;
  if (batchBytes <= 0)
    throw new ConfigError(
      `${read.label('batch-bytes')}: expected a size such as 8MB or 512KB, got "${read.text('batch-bytes') ?? ''}"`,
    );

  const logFormat = (read.choice('log-format') ?? (isTty ? 'pretty' : 'json')) as LogFormat;
  const quiet = read.bool('quiet') ?? false;
  const verbose = read.bool('verbose') ?? false;
  const maxRunTimeMs = read.duration('max-run-time');
  if (maxRunTimeMs !== undefined && maxRunTimeMs <= 0)
    throw new ConfigError(`${read.label('max-run-time')}: expected a positive duration such as 50m or 2h`);
  const progressIntervalMs = read.duration('progress-interval') ?? parseDuration(DEFAULT_PROGRESS_INTERVAL);
  if (progressIntervalMs <= 0)
    throw new ConfigError(`${read.label('progress-interval')}: expected a positive duration such as 5s`);

  const monitor = resolveMonitor(read, {
    destination,
    duckdbPath: read.text('duckdb-path') ?? DEFAULT_DUCKDB_PATH,
    bigquery,
  });
  const config: SyncConfig = {
    baseUrl: normalizeBaseUrl(url.toString()),
    apiKey,
    project,
    projectIds,
    projectHeader: read.text('project-header') ?? PROJECT_HEADERS,
    resources,
    destination,
    duckdbPath: read.text('duckdb-path') ?? DEFAULT_DUCKDB_PATH,
    duckdbMemoryLimitBytes: read.size('duckdb-memory-limit') ?? DEFAULT_MEMORY_LIMIT_BYTES,
    bigquery,
    dryRun,
    dryRunLimit: dryRunLimit(read, dryRun),
    statePath: read.text('state') ?? DEFAULT_STATE_PATH,
    lockWaitMs: read.duration('lock-wait') ?? 0,
    lookbackMs: read.duration('lookback') ?? parseDuration(DEFAULT_LOOKBACK),
    settleMs,
    traces,
    reconcile,
    deletions,
    startMs: read.instant('start'),
    batchRows: read.integer('batch-rows') ?? DEFAULT_BATCH_ROWS[destination],
    limits,
    timeouts,
    logLevel: read.text('log-level') ?? (verbose ? 'debug' : quiet ? 'warn' : 'info'),
    logFormat,
    quiet,
    progress: quiet ? 'off' : isTty ? 'tty' : 'log',
    progressIntervalMs,
    maxRunTimeMs,
    fullRefresh: read.bool('full-refresh') ?? false,
    publishEveryMs: read.duration('publish-every') ?? parseDuration(DEFAULT_PUBLISH_EVERY),
    batchBytes,
    maxRetryAfterMs: read.duration('max-retry-after') ?? DEFAULT_MAX_RETRY_AFTER_MS,
    splitConcurrency: read.integer('concurrency') ?? DEFAULT_SPLIT_CONCURRENCY,
    json: read.bool('json') ?? false,
    privacy,
    schemaContract,
    searches: parseSearches(read.label('search'), read.text('search')),
    aggregates: read.bool('aggregates') ?? false,
    aggregatesInterval: aggregatesInterval(read),
    dbtSourcesPath: read.text('dbt-sources'),
    ...(monitor === undefined ? {} : { monitor }),
    freshnessTargetMs: read.duration('freshness-target'),
  };
  return { config: Object.freeze(config), read };
}

function aggregatesInterval(read: Reader): 'day' | 'hour' {
  return read.choice('aggregates-interval') as 'day' | 'hour';
}

function dryRunLimit(read: Reader, dryRun: boolean): number {
  const text = read.text('dry-run-limit');
  if (text === undefined) return DEFAULT_DRY_RUN_LIMIT;
  if (!dryRun)
    throw new ConfigError('--dry-run-limit sets how many rows a dry run reads per stream: use it with --dry-run');
  const value = /^\s*\d+\s*$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < 1)
    throw new ConfigError(`${read.label('dry-run-limit')}: expected a whole number of rows ≥ 1, got "${text}"`);
  return value;
}
