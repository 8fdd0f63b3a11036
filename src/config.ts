import { readFileSync } from 'node:fs';
import { RESOURCES, RESOURCE_NAMES } from '../connectors/index.js';
import { PROJECT_HEADERS } from '../connectors/service.js';
import { parseDuration } from './core/duration.js';
import { emptyToUndefined, parseInstant, parseNumber, parseSearches, parseSize, parseStrictDuration, splitList } from './config-values.js';
import { ConfigError } from './core/errors.js';
import type { LogFormat } from './core/log.js';
import type { ChildSelection, ResourceDefinition, SavedSearch } from './core/types.js';
import { DEFAULT_RATE_LIMITS, type RateLimits } from './http/budget.js';
import { DEFAULT_MEMORY_LIMIT, megabytes } from './load/duckdb-memory.js';
import { DEFAULT_MAX_RETRY_AFTER_MS, DEFAULT_TIMEOUTS, type TimeoutOptions } from './http/timeouts.js';
import { bareApiKey, DEFAULT_BASE_URL, normalizeBaseUrl } from './http/conventions.js';
import { SCHEMA_CONTRACTS, type SchemaContract } from './normalize/contract.js';
import { resolvePrivacy, withPrivacy, type PrivacyRules } from './normalize/privacy.js';
import { RECONCILE_MODES, type ReconcileMode } from './pipeline/reconcile.js';
import { camel, collect, envName, optionTable, type CommandName, type RawValue } from './options.js';

/**
 * The one reader of process.env and config files: every setting of a run, validated and frozen.
 * Each flag is also read from `QUERY_SYNC_<FLAG>` and from `--config` (see `options.ts`).
 */

export const ENV = Object.freeze({
  baseUrl: 'QUERY_API_BASE_URL',
  apiKey: 'QUERY_API_KEY',
  project: 'QUERY_API_PROJECT',
  hashSalt: 'QUERY_SYNC_HASH_SALT',
});

/**
 * A batch is also written once its rows hold this much text (`--batch-bytes`), so memory follows
 * the settings, not the size of the records: 5,000 rows of 200 KB would otherwise be 1 GB.
 */
export const DEFAULT_BATCH_BYTES = '8MB';

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
export const DEFAULT_PROJECT_HEADER = PROJECT_HEADERS.join(' and ');
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
export const DEFAULT_TRACES: ChildSelection = 'all';
export const DEFAULT_BQ_LOCATION = 'US';
/** Default rows per stream a dry run reads: enough to show every statement, not all history. */
export const DEFAULT_DRY_RUN_LIMIT = 100;
/** Default window of a backfill or verify: one day. */
export const DEFAULT_WINDOW = '1d';
/** Default windows read at once by a backfill. */
export const DEFAULT_CONCURRENCY = 4;
/** Sub-walks of one large window of a sync at once, at most (`pipeline/split.ts`). */
export const DEFAULT_SPLIT_CONCURRENCY = 16;

/**
 * A sync's and a backfill's settings at these defaults, in the units the pipeline takes (DuckDB's
 * batch size), for callers that wire the pipeline themselves (tests, benchmarks): the pipeline
 * restates no default.
 */
export const PIPELINE_DEFAULTS = Object.freeze({
  sync: Object.freeze({ batchRows: DEFAULT_BATCH_ROWS.duckdb, batchBytes: Math.round((megabytes(DEFAULT_BATCH_BYTES) ?? 0) * 1e6), settleMs: parseDuration(DEFAULT_SETTLE), concurrency: DEFAULT_SPLIT_CONCURRENCY }),
  backfill: Object.freeze({ batchRows: DEFAULT_BATCH_ROWS.duckdb, batchBytes: Math.round((megabytes(DEFAULT_BATCH_BYTES) ?? 0) * 1e6), concurrency: DEFAULT_CONCURRENCY }),
});

/** Every flag with its environment name, default, unit and help group. */
export const OPTIONS = optionTable({
  connectTimeoutMs: DEFAULT_TIMEOUTS.connectMs,
  headersTimeoutMs: DEFAULT_TIMEOUTS.headersMs,
  bodyTimeoutMs: DEFAULT_TIMEOUTS.bodyMs,
  requestTimeoutMs: DEFAULT_TIMEOUTS.requestMs,
  maxRetryAfterMs: DEFAULT_MAX_RETRY_AFTER_MS,
  batchBytes: DEFAULT_BATCH_BYTES,
  ...DEFAULT_RATE_LIMITS,
  duckdbMemoryLimit: DEFAULT_MEMORY_LIMIT,
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
});

/** Project slugs per the spec: a malformed slug is refused with 400 by the service. */
const SLUG = /^[a-z0-9][a-z0-9_-]{0,62}$/;

export interface BigQueryConfig {
  readonly projectId: string;
  readonly dataset: string;
  readonly location: string;
  readonly apiEndpoint?: string;
  readonly keyFile?: string;
  /** `--bq-upsert`: layout of users and conversations (see load/bigquery-log-layout.ts). */
  readonly upsert?: 'auto' | 'log' | 'merge';
  /** `--bq-compact-every`, in ms. */
  readonly compactEveryMs?: number;
}

export interface SyncConfig {
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly project: string | undefined;
  readonly projectIds: readonly string[] | undefined;
  readonly projectHeader: string | readonly string[];
  readonly resources: readonly ResourceDefinition[];
  readonly destination: 'duckdb' | 'bigquery';
  readonly duckdbPath: string;
  readonly duckdbMemoryLimit: string;
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
  readonly traces: ChildSelection;
  /** After the writes, check the API's counts against the warehouse (`reconcile.ts`). @default 'repair' */
  readonly reconcile?: ReconcileMode;
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
}

export function resolveSyncConfig(flags: SyncFlags, env: NodeJS.ProcessEnv = process.env, isTty = false): Readonly<SyncConfig> {
  return resolveRun('sync', flags, env, isTty).config;
}

/** What every command that reads the API resolves the same way, plus the collected raw values. */
function resolveRun(command: CommandName, flags: SyncFlags, env: NodeJS.ProcessEnv, isTty: boolean): { config: Readonly<SyncConfig>; read: Reader } {
  const read = reader(command, flags, env);
  // The SDK's default server when none is given (conventions.ts).
  const baseUrl = emptyToUndefined(read.text('base-url')) ?? DEFAULT_BASE_URL;
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new ConfigError(`${read.label('base-url')}: expected an http(s) URL such as https://query.example.com, got "${baseUrl}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`${read.label('base-url')}: expected http or https, got "${url.protocol}"`);
  }
  const apiKey = resolveApiKey(read);

  const project = emptyToUndefined(read.text('project'));
  if (project !== undefined && project !== '*' && !SLUG.test(project)) {
    throw new ConfigError(`${read.label('project')}: expected a project slug (lowercase letters, digits, - and _) or "*", got "${project}"`);
  }
  const projectIdsText = read.text('project-ids');
  const projectIds = projectIdsText === undefined ? undefined : splitList(projectIdsText);
  if (projectIds !== undefined) {
    if (project !== '*') throw new ConfigError(`--project-ids narrows an all-projects read: add --project '*'`);
    const bad = projectIds.filter((s) => !SLUG.test(s));
    if (bad.length > 0 || projectIds.length === 0) {
      throw new ConfigError(`${read.label('project-ids')}: expected comma-separated project slugs, got "${projectIdsText}"`);
    }
  }

  const salt = read.text('hash-salt');
  const privacy = resolvePrivacy({ excludeColumns: read.text('exclude-columns'), hashColumns: read.text('hash-columns') }, RESOURCES, salt, ENV.hashSalt);
  const resources = resolveResources(read).map((r) => withPrivacy(r, privacy, salt));
  const { destination, bigquery } = resolveWarehouse(read);
  const dryRun = read.bool('dry-run') ?? false;
  if (dryRun && destination !== 'bigquery') {
    throw new ConfigError('--dry-run prints what would be sent to BigQuery: use it with --destination bigquery');
  }
  const settleMs = read.duration('settle') ?? parseDuration(DEFAULT_SETTLE);
  const tracesText = read.text('traces') ?? DEFAULT_TRACES;
  if (tracesText !== 'all' && tracesText !== 'traced' && tracesText !== 'none') {
    throw new ConfigError(`${read.label('traces')}: expected all, traced (events whose tool_calls, error_spans or model show a trace) or none, got "${tracesText}"`);
  }
  const traces: ChildSelection = tracesText;
  const reconcileText = read.text('reconcile') ?? 'repair';
  if (!(RECONCILE_MODES as readonly string[]).includes(reconcileText)) {
    throw new ConfigError(`${read.label('reconcile')}: expected off, check (report differences, exit 5) or repair (re-read them), got "${reconcileText}"`);
  }

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
  if (timeouts.requestMs <= 0) throw new ConfigError(`${read.label('request-timeout')}: expected a positive duration such as 2m`);
  const schemaText = read.text('schema-contract') ?? 'evolve';
  const schemaContract = SCHEMA_CONTRACTS.find((c) => c === schemaText);
  if (schemaContract === undefined) throw new ConfigError(`${read.label('schema-contract')}: expected one of ${SCHEMA_CONTRACTS.join(', ')}, got "${schemaText}"`);
  const batchBytesText = read.size('batch-bytes') ?? DEFAULT_BATCH_BYTES;
  const batchMb = megabytes(batchBytesText) ?? 0;
  if (batchMb <= 0) throw new ConfigError(`${read.label('batch-bytes')}: expected a size such as 8MB or 512KB, got "${batchBytesText}"`);

  const logFormat = read.text('log-format') ?? (isTty ? 'pretty' : 'json');
  if (logFormat !== 'json' && logFormat !== 'pretty') {
    throw new ConfigError(`${read.label('log-format')}: expected json or pretty, got "${logFormat}"`);
  }
  const quiet = read.bool('quiet') ?? false;
  const verbose = read.bool('verbose') ?? false;
  const maxRunTimeMs = read.duration('max-run-time');
  if (maxRunTimeMs !== undefined && maxRunTimeMs <= 0) throw new ConfigError(`${read.label('max-run-time')}: expected a positive duration such as 50m or 2h`);
  const progressIntervalMs = read.duration('progress-interval') ?? parseDuration(DEFAULT_PROGRESS_INTERVAL);
  if (progressIntervalMs <= 0) throw new ConfigError(`${read.label('progress-interval')}: expected a positive duration such as 5s`);

  const config: SyncConfig = {
    baseUrl: normalizeBaseUrl(url.toString()),
    apiKey,
    project,
    projectIds,
    projectHeader: read.text('project-header') ?? PROJECT_HEADERS,
    resources,
    destination,
    duckdbPath: read.text('duckdb-path') ?? DEFAULT_DUCKDB_PATH,
    duckdbMemoryLimit: read.size('duckdb-memory-limit') ?? DEFAULT_MEMORY_LIMIT,
    bigquery,
    dryRun,
    dryRunLimit: dryRunLimit(read, dryRun),
    statePath: read.text('state') ?? DEFAULT_STATE_PATH,
    lockWaitMs: read.duration('lock-wait') ?? 0,
    lookbackMs: read.duration('lookback') ?? parseDuration(DEFAULT_LOOKBACK),
    settleMs,
    traces,
    reconcile: reconcileText as ReconcileMode,
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
    batchBytes: Math.round(batchMb * 1e6),
    maxRetryAfterMs: read.duration('max-retry-after') ?? DEFAULT_MAX_RETRY_AFTER_MS,
    splitConcurrency: read.integer('concurrency') ?? DEFAULT_SPLIT_CONCURRENCY,
    json: read.bool('json') ?? false,
    privacy,
    schemaContract,
    searches: parseSearches(read.label('search'), read.text('search')),
    aggregates: read.bool('aggregates') ?? false,
    aggregatesInterval: aggregatesInterval(read),
    dbtSourcesPath: read.text('dbt-sources'),
  };
  return { config: Object.freeze(config), read };
}

function aggregatesInterval(read: Reader): 'day' | 'hour' {
  const text = read.text('aggregates-interval') ?? 'day';
  if (text !== 'day' && text !== 'hour') throw new ConfigError(`${read.label('aggregates-interval')}: expected day or hour, got "${text}"`);
  return text;
}

function dryRunLimit(read: Reader, dryRun: boolean): number {
  const text = read.text('dry-run-limit');
  if (text === undefined) return DEFAULT_DRY_RUN_LIMIT;
  if (!dryRun) throw new ConfigError('--dry-run-limit sets how many rows a dry run reads per stream: use it with --dry-run');
  const value = /^\s*\d+\s*$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < 1) throw new ConfigError(`${read.label('dry-run-limit')}: expected a whole number of rows ≥ 1, got "${text}"`);
  return value;
}

/** The API key: from the environment, or the file `--api-key-file` names; never a flag or config key. */
function resolveApiKey(read: Reader): string {
  const direct = read.text('api-key');
  const file = read.text('api-key-file');
  if (direct !== undefined && file !== undefined) {
    throw new ConfigError(`both ${read.label('api-key')} and ${read.label('api-key-file')} give the API key: keep one`);
  }
  if (file !== undefined) {
    let key: string;
    try {
      key = readFileSync(file, 'utf8').trim();
    } catch (error) {
      throw new ConfigError(`${read.label('api-key-file')}: cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
    if (key === '') throw new ConfigError(`${read.label('api-key-file')}: ${file} is empty; expected the Organization API Key`);
    return bareApiKey(key);
  }
  if (!direct) {
    throw new ConfigError(
      `missing the API key: set ${envName('api-key')} (or ${ENV.apiKey}) in the environment, or pass --api-key-file with a file holding it ` +
        `(the key is never a flag: flags show in the process list)`,
    );
  }
  // A key pasted with its `Bearer ` prefix (from a curl line) is the key (the SDK accepts both).
  return bareApiKey(direct);
}

/** `--bq-upsert` and `--bq-compact-every` (only what was set: the destination holds the defaults). */
function bigQueryLayout(read: Reader): Pick<BigQueryConfig, 'upsert' | 'compactEveryMs'> {
  const upsert = read.text('bq-upsert');
  if (upsert !== undefined && upsert !== 'auto' && upsert !== 'log' && upsert !== 'merge') {
    throw new ConfigError(`${read.label('bq-upsert')}: expected auto, log or merge, got "${upsert}"`);
  }
  const compactEveryMs = read.duration('bq-compact-every');
  return { ...(upsert === undefined ? {} : { upsert }), ...(compactEveryMs === undefined ? {} : { compactEveryMs }) };
}

/** `--resources` → the declared resources, in their declaration order. */
function resolveResources(read: Reader): readonly ResourceDefinition[] {
  const text = read.text('resources');
  const names = text === undefined ? [...RESOURCE_NAMES] : splitList(text);
  const unknown = names.filter((n) => !RESOURCE_NAMES.includes(n));
  if (unknown.length > 0 || names.length === 0) {
    throw new ConfigError(`${read.label('resources')}: expected a comma-separated subset of ${RESOURCE_NAMES.join(',')}, got "${text}"`);
  }
  return RESOURCES.filter((r) => names.includes(r.name));
}

/** `--destination` and the BigQuery flags. */
function resolveWarehouse(read: Reader): { destination: 'duckdb' | 'bigquery'; bigquery: BigQueryConfig | undefined } {
  const destination = read.text('destination') ?? 'duckdb';
  if (destination !== 'duckdb' && destination !== 'bigquery') {
    throw new ConfigError(`${read.label('destination')}: expected duckdb or bigquery, got "${destination}"`);
  }
  let bigquery: BigQueryConfig | undefined;
  if (destination === 'bigquery') {
    const projectId = read.text('bq-project');
    const dataset = read.text('bq-dataset');
    if (!projectId || !dataset) {
      throw new ConfigError('--destination bigquery needs --bq-project and --bq-dataset');
    }
    if (!/^[A-Za-z0-9_]{1,1024}$/.test(dataset)) {
      throw new ConfigError(`${read.label('bq-dataset')}: expected letters, digits and underscores, got "${dataset}"`);
    }
    bigquery = {
      projectId,
      dataset,
      location: read.text('bq-location') ?? DEFAULT_BQ_LOCATION,
      apiEndpoint: read.text('bq-api-endpoint'),
      keyFile: read.text('bq-key-file'),
      ...bigQueryLayout(read),
    };
  }
  return { destination, bigquery };
}

// ---- backfill, plan, verify, status, reset ----

/** Flags of `backfill`, `plan`, `verify`, `status` and `reset`, on top of `sync`'s. */
export interface RunFlags extends SyncFlags {
  readonly from?: string;
  readonly to?: string;
  readonly window?: string;
  readonly concurrency?: number | string;
  readonly json?: boolean;
  readonly repair?: boolean;
  readonly yes?: boolean;
}

/** A closed-open interval [from, to) sliced into windows. */
export interface RangeConfig {
  readonly fromMs: number;
  readonly toMs: number;
  readonly windowMs: number;
}

export interface BackfillConfig extends SyncConfig {
  readonly range: RangeConfig;
  /** Windows read at once (across resources and projects). */
  readonly concurrency: number;
}

export interface PlanConfig extends SyncConfig {
  /** Plans a backfill of this range; `undefined` plans the next sync from state. */
  readonly range: RangeConfig | undefined;
  readonly json: boolean;
}

export interface VerifyConfig extends SyncConfig {
  readonly range: RangeConfig;
  readonly repair: boolean;
  /** Windows re-read at once by `--repair`. */
  readonly concurrency: number;
}

/** What `status` needs: state and warehouse, no API URL or key. */
export interface StatusConfig
  extends Pick<SyncConfig, 'statePath' | 'resources' | 'destination' | 'duckdbPath' | 'duckdbMemoryLimit' | 'bigquery' | 'dryRun' | 'lockWaitMs'> {
  readonly json: boolean;
}

/** `status` itself: also the per-endpoint minute limit the syncs run with (`--max-rpm`), which a backlog's ETA assumes. */
export interface StatusCommandConfig extends StatusConfig {
  readonly limits: Pick<RateLimits, 'maxRpm'>;
}

/** What `reset` needs: the state file and which streams to forget. */
export interface ResetConfig
  extends Pick<SyncConfig, 'statePath' | 'resources' | 'lockWaitMs' | 'destination' | 'duckdbPath' | 'duckdbMemoryLimit' | 'bigquery' | 'dryRun'> {
  /** Only the streams of this project scope (`*` also covers `*[a,b]` scopes); all scopes when absent. */
  readonly project: string | undefined;
  /** Whether `--resources` was given (reset refuses to forget every stream by default). */
  readonly resourcesGiven: boolean;
  readonly yes: boolean;
}

export function resolveBackfillConfig(flags: RunFlags, env: NodeJS.ProcessEnv = process.env, isTty = false): Readonly<BackfillConfig> {
  const { config, read } = resolveRun('backfill', flags, env, isTty);
  const range = resolveRange(read, 'backfill');
  if (range === undefined) throw new ConfigError('backfill needs --from and --to (ISO instants, e.g. --from 2026-01-01T00:00:00Z --to 2026-02-01T00:00:00Z)');
  return Object.freeze({ ...config, range, concurrency: read.integer('concurrency') ?? DEFAULT_CONCURRENCY });
}

export function resolvePlanConfig(flags: RunFlags, env: NodeJS.ProcessEnv = process.env, isTty = false): Readonly<PlanConfig> {
  const { config, read } = resolveRun('plan', flags, env, isTty);
  return Object.freeze({ ...config, range: resolveRange(read, 'plan'), json: read.bool('json') ?? false });
}

export function resolveVerifyConfig(flags: RunFlags, env: NodeJS.ProcessEnv = process.env, isTty = false): Readonly<VerifyConfig> {
  const { config, read } = resolveRun('verify', flags, env, isTty);
  const range = resolveRange(read, 'verify');
  if (range === undefined) throw new ConfigError('verify needs --from and --to (ISO instants, e.g. --from 2026-01-01T00:00:00Z --to 2026-02-01T00:00:00Z)');
  return Object.freeze({ ...config, range, repair: read.bool('repair') ?? false, concurrency: read.integer('concurrency') ?? DEFAULT_CONCURRENCY });
}

/** `status` reads state and the warehouse only: no API URL or key needed. */
export function resolveStatusConfig(flags: RunFlags, env: NodeJS.ProcessEnv = process.env): Readonly<StatusCommandConfig> {
  const read = reader('status', flags, env);
  return Object.freeze({
    ...readWarehouse(read),
    statePath: read.text('state') ?? DEFAULT_STATE_PATH,
    resources: resolveResources(read),
    json: read.bool('json') ?? false,
    limits: { maxRpm: read.number('max-rpm') ?? DEFAULT_RATE_LIMITS.maxRpm },
  });
}

/** The warehouse settings of a command that reads it or changes only state (status, dbt-sources, reset). */
function readWarehouse(read: Reader): Pick<StatusConfig, 'destination' | 'duckdbPath' | 'duckdbMemoryLimit' | 'bigquery' | 'dryRun' | 'lockWaitMs'> {
  const { destination, bigquery } = resolveWarehouse(read);
  return {
    destination,
    duckdbPath: read.text('duckdb-path') ?? DEFAULT_DUCKDB_PATH,
    duckdbMemoryLimit: read.size('duckdb-memory-limit') ?? DEFAULT_MEMORY_LIMIT,
    bigquery,
    dryRun: false,
    lockWaitMs: read.duration('lock-wait') ?? 0,
  };
}

/** `dbt-sources` reads the warehouse only, like `status`, and writes `--out`. */
export function resolveDbtSourcesConfig(flags: RunFlags, env: NodeJS.ProcessEnv = process.env): Readonly<StatusConfig & { readonly out: string; readonly publishEveryMs: number }> {
  const read = reader('dbt-sources', flags, env);
  return Object.freeze({
    ...readWarehouse(read),
    statePath: DEFAULT_STATE_PATH,
    resources: RESOURCES,
    json: false,
    out: read.text('out') ?? 'sources.yml',
    publishEveryMs: read.duration('publish-every') ?? parseDuration(DEFAULT_PUBLISH_EVERY),
  });
}

/** `reset` changes the state file only. */
export function resolveResetConfig(flags: RunFlags, env: NodeJS.ProcessEnv = process.env): Readonly<ResetConfig> {
  const read = reader('reset', flags, env);
  const project = emptyToUndefined(read.text('project'));
  if (project !== undefined && project !== '*' && !SLUG.test(project)) {
    throw new ConfigError(`${read.label('project')}: expected a project slug or "*", got "${project}"`);
  }
  return Object.freeze({
    ...readWarehouse(read),
    statePath: read.text('state') ?? DEFAULT_STATE_PATH,
    resources: resolveResources(read),
    resourcesGiven: read.text('resources') !== undefined,
    project,
    yes: read.bool('yes') ?? false,
  });
}

function resolveRange(read: Reader, command: string): RangeConfig | undefined {
  const from = read.instant('from');
  const to = read.instant('to');
  if (from === undefined && to === undefined) {
    if (read.text('window') !== undefined && command === 'plan') throw new ConfigError('plan --window applies to a backfill plan: add --from and --to');
    return undefined;
  }
  if (from === undefined || to === undefined) throw new ConfigError(`${command}: pass both --from and --to`);
  if (from >= to) throw new ConfigError(`${command}: expected --from before --to, got [${read.text('from')}, ${read.text('to')})`);
  const windowMs = read.duration('window') ?? parseDuration(DEFAULT_WINDOW);
  if (windowMs <= 0) throw new ConfigError(`${read.label('window')}: expected a positive duration such as 1d or 6h`);
  return { fromMs: from, toMs: to, windowMs };
}

// ---- reading values: flag > QUERY_SYNC_<FLAG> > config file > default ----

/** Typed, validated access to one command's settings; every message names where a value came from. */
interface Reader {
  label(flag: string): string;
  text(flag: string): string | undefined;
  bool(flag: string): boolean | undefined;
  number(flag: string): number | undefined;
  integer(flag: string): number | undefined;
  duration(flag: string): number | undefined;
  size(flag: string): string | undefined;
  instant(flag: string): number | undefined;
}

function reader(command: CommandName, flags: object, env: NodeJS.ProcessEnv): Reader {
  const { values, sources } = collect(OPTIONS, command, flags as Readonly<Record<string, unknown>>, env);
  const raw = (flag: string): RawValue | undefined => values[camel(flag)];
  const label = (flag: string): string => sources[camel(flag)] ?? `--${flag}`;
  const text = (flag: string): string | undefined => {
    const v = raw(flag);
    return v === undefined ? undefined : String(v);
  };
  return {
    label,
    text,
    bool: (flag) => {
      const v = raw(flag);
      if (v === undefined || typeof v === 'boolean') return v;
      const t = String(v).trim().toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(t)) return true;
      if (['false', '0', 'no', 'off', ''].includes(t)) return false;
      throw new ConfigError(`${label(flag)}: expected true or false, got "${String(v)}"`);
    },
    number: (flag) => {
      const t = text(flag);
      return t === undefined ? undefined : parseNumber(label(flag), t, false);
    },
    integer: (flag) => {
      const t = text(flag);
      return t === undefined ? undefined : parseNumber(label(flag), t, true);
    },
    duration: (flag) => {
      const t = text(flag);
      return t === undefined ? undefined : parseStrictDuration(label(flag), t);
    },
    size: (flag) => {
      const t = text(flag);
      return t === undefined ? undefined : parseSize(label(flag), t);
    },
    instant: (flag) => {
      const t = text(flag);
      return t === undefined ? undefined : parseInstant(label(flag), t);
    },
  };
}

/** `sql` and `publish`: the warehouse file only (DuckDB). */
export interface PublishedConfig {
  readonly duckdbPath: string;
  readonly duckdbMemoryLimit: string;
}

/** `sql [query]`: reads the published copy; output as a table, `--json` or `--csv`. */
export function resolveSqlConfig(flags: RunFlags & { readonly query?: string }, env: NodeJS.ProcessEnv = process.env): Readonly<PublishedConfig & { readonly query?: string; readonly format: 'table' | 'json' | 'csv' }> {
  const read = reader('sql', flags, env);
  const json = read.bool('json') ?? false;
  const csv = read.bool('csv') ?? false;
  if (json && csv) throw new ConfigError('sql: --json and --csv exclude each other: give one');
  return Object.freeze({
    duckdbPath: read.text('duckdb-path') ?? DEFAULT_DUCKDB_PATH,
    duckdbMemoryLimit: DEFAULT_MEMORY_LIMIT,
    ...(typeof flags.query === 'string' ? { query: flags.query } : {}),
    format: json ? 'json' : csv ? 'csv' : 'table',
  });
}

/** `publish`: publish the read copy now from the working file (no sync running). */
export function resolvePublishConfig(flags: RunFlags, env: NodeJS.ProcessEnv = process.env): Readonly<PublishedConfig> {
  const read = reader('publish', flags, env);
  return Object.freeze({ duckdbPath: read.text('duckdb-path') ?? DEFAULT_DUCKDB_PATH, duckdbMemoryLimit: DEFAULT_MEMORY_LIMIT });
}
