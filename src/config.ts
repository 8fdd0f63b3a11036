import { RESOURCES, RESOURCE_NAMES } from '../connectors/index.js';
import { PROJECT_HEADERS } from '../connectors/service.js';
import { parseDuration } from './core/duration.js';
import { ConfigError } from './core/errors.js';
import type { LogFormat } from './core/log.js';
import type { ChildSelection, ResourceDefinition } from './core/types.js';
import { DEFAULT_RATE_LIMITS, type RateLimits } from './http/budget.js';
import { DEFAULT_MEMORY_LIMIT, isDuckDbSize, megabytes } from './load/duckdb-memory.js';
import { DEFAULT_MAX_RETRY_AFTER_MS, DEFAULT_TIMEOUTS, type TimeoutOptions } from './http/client.js';
import { resolvePrivacy, withPrivacy, type PrivacyRules } from './normalize/privacy.js';
import { SCHEMA_CONTRACTS, type SchemaContract } from './normalize/contract.js';
import { DEFAULT_SPLIT_CONCURRENCY } from './pipeline/split.js';

/** The one reader of process.env: every setting of a run, validated and frozen. */

export const ENV = Object.freeze({
  baseUrl: 'QUERY_API_BASE_URL',
  apiKey: 'QUERY_API_KEY',
  project: 'QUERY_API_PROJECT',
  hashSalt: 'QUERY_SYNC_HASH_SALT',
});

/**
 * Rows per write + checkpoint. BigQuery batches are larger: each write is one load job and one MERGE,
 * and a table allows 1,500 load jobs a day; DuckDB checkpoints more often for cheap.
 */
export const DEFAULT_BATCH_ROWS = Object.freeze({ duckdb: 5_000, bigquery: 50_000 });

/**
 * A batch is also written once its rows hold this much text (`--batch-bytes`), so memory follows
 * the settings, not the size of the records: 5,000 rows of 200 KB would otherwise be 1 GB.
 */
export const DEFAULT_BATCH_BYTES = '8MB';

/** Project slugs per the spec: a malformed slug is refused with 400 by the service. */
const SLUG = /^[a-z0-9][a-z0-9_-]{0,62}$/;

export interface BigQueryConfig {
  readonly projectId: string;
  readonly dataset: string;
  readonly location: string;
  readonly apiEndpoint?: string;
  readonly keyFile?: string;
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
  readonly startMs: number | undefined;
  readonly batchRows: number;
  /** Bytes of row text per write (see `DEFAULT_BATCH_BYTES`). */
  readonly batchBytes: number;
  /**
   * `sync`: most sub-windows of one large window walked at once (split walks); how many help is
   * found at run time. 1 reads each window in one walk. @default 16
   */
  readonly splitConcurrency: number;
  readonly limits: RateLimits;
  readonly timeouts: TimeoutOptions;
  /** The longest `Retry-After` honoured; a longer one fails the stream. */
  readonly maxRetryAfterMs: number;
  readonly logLevel: string;
  readonly logFormat: LogFormat;
  readonly quiet: boolean;
  /**
   * How a run shows progress: a live display on a TTY (stderr), else a progress log line every
   * `progressIntervalMs`; `off` with `--quiet` (the summary only).
   */
  readonly progress: 'tty' | 'log' | 'off';
  readonly progressIntervalMs: number;
  /** `sync --json`: the run summary as one JSON object on stdout (for schedulers), no text summary. */
  readonly json: boolean;
  /** Fields excluded or hashed before normalization (already part of `resources`' transforms; the salt is not kept here). */
  readonly privacy: PrivacyRules;
  /** What a run may change in the tables: `evolve` (default), `freeze-columns`, `freeze`. */
  readonly schemaContract: SchemaContract;
}

/** Flags as yargs hands them over (strings and numbers, unvalidated). */
export interface SyncFlags {
  readonly concurrency?: number;
  readonly baseUrl?: string;
  readonly apiKey?: string;
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
  readonly dryRun?: boolean;
  readonly dryRunLimit?: number;
  readonly state?: string;
  readonly lockWait?: string;
  readonly lookback?: string;
  readonly settle?: string;
  readonly traces?: string;
  readonly start?: string;
  readonly batchRows?: number;
  readonly batchBytes?: string;
  readonly maxRpm?: number;
  readonly searchRpm?: number;
  readonly maxRps?: number;
  readonly searchGateRps?: number;
  readonly connectTimeout?: string;
  readonly headersTimeout?: string;
  readonly bodyTimeout?: string;
  readonly requestTimeout?: string;
  readonly maxRetryAfter?: string;
  readonly logLevel?: string;
  readonly logFormat?: string;
  readonly quiet?: boolean;
  readonly verbose?: boolean;
  readonly progressInterval?: string;
  readonly json?: boolean;
  readonly excludeColumns?: string;
  readonly hashColumns?: string;
  readonly schemaContract?: string;
}

export function resolveSyncConfig(flags: SyncFlags, env: NodeJS.ProcessEnv = process.env, isTty = false): Readonly<SyncConfig> {
  const baseUrl = flags.baseUrl ?? env[ENV.baseUrl];
  if (!baseUrl) throw new ConfigError(`missing the API base URL: pass --base-url or set ${ENV.baseUrl}`);
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new ConfigError(`--base-url: expected an http(s) URL such as https://query.example.com, got "${baseUrl}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`--base-url: expected http or https, got "${url.protocol}"`);
  }
  const apiKey = flags.apiKey ?? env[ENV.apiKey];
  if (!apiKey) throw new ConfigError(`missing the API key: pass --api-key or set ${ENV.apiKey} (the Organization API Key)`);

  const project = emptyToUndefined(flags.project ?? env[ENV.project]);
  if (project !== undefined && project !== '*' && !SLUG.test(project)) {
    throw new ConfigError(`--project: expected a project slug (lowercase letters, digits, - and _) or "*", got "${project}"`);
  }
  const projectIds = flags.projectIds === undefined ? undefined : splitList(flags.projectIds);
  if (projectIds !== undefined) {
    if (project !== '*') throw new ConfigError(`--project-ids narrows an all-projects read: add --project '*'`);
    const bad = projectIds.filter((s) => !SLUG.test(s));
    if (bad.length > 0 || projectIds.length === 0) {
      throw new ConfigError(`--project-ids: expected comma-separated project slugs, got "${flags.projectIds}"`);
    }
  }

  const privacy = resolvePrivacy(flags, RESOURCES, env[ENV.hashSalt], ENV.hashSalt);
  const resources = resolveResources(flags).map((r) => withPrivacy(r, privacy, env[ENV.hashSalt]));
  const { destination, bigquery } = resolveWarehouse(flags);

  const lookbackMs = duration('--lookback', flags.lookback ?? '15m');
  const settleMs = duration('--settle', flags.settle ?? '2h');
  const traces = flags.traces ?? 'traced';
  if (traces !== 'all' && traces !== 'traced' && traces !== 'none') {
    throw new ConfigError(`--traces: expected all, traced (events whose tool_calls, error_spans or model show a trace) or none, got "${traces}"`);
  }
  const lockWaitMs = duration('--lock-wait', flags.lockWait ?? '0');
  let startMs: number | undefined;
  if (flags.start !== undefined) {
    startMs = Date.parse(flags.start);
    if (Number.isNaN(startMs) || !/\d{4}-\d{2}-\d{2}/.test(flags.start)) {
      throw new ConfigError(`--start: expected an ISO-8601 instant such as 2026-01-01T00:00:00Z, got "${flags.start}"`);
    }
  }

  const limits: RateLimits = {
    maxRpm: positive('--max-rpm', flags.maxRpm ?? DEFAULT_RATE_LIMITS.maxRpm),
    searchRpm: positive('--search-rpm', flags.searchRpm ?? DEFAULT_RATE_LIMITS.searchRpm),
    maxRps: positive('--max-rps', flags.maxRps ?? DEFAULT_RATE_LIMITS.maxRps),
    searchGateRps: positive('--search-gate-rps', flags.searchGateRps ?? DEFAULT_RATE_LIMITS.searchGateRps),
  };

  const timeouts: TimeoutOptions = {
    connectMs: flags.connectTimeout === undefined ? DEFAULT_TIMEOUTS.connectMs : duration('--connect-timeout', flags.connectTimeout),
    headersMs: flags.headersTimeout === undefined ? DEFAULT_TIMEOUTS.headersMs : duration('--headers-timeout', flags.headersTimeout),
    bodyMs: flags.bodyTimeout === undefined ? DEFAULT_TIMEOUTS.bodyMs : duration('--body-timeout', flags.bodyTimeout),
    requestMs:
      flags.requestTimeout === undefined ? DEFAULT_TIMEOUTS.requestMs : positive('--request-timeout', duration('--request-timeout', flags.requestTimeout)),
  };
  const maxRetryAfterMs = flags.maxRetryAfter === undefined ? DEFAULT_MAX_RETRY_AFTER_MS : duration('--max-retry-after', flags.maxRetryAfter);

  const logFormat = flags.logFormat ?? (isTty ? 'pretty' : 'json');
  if (logFormat !== 'json' && logFormat !== 'pretty') {
    throw new ConfigError(`--log-format: expected json or pretty, got "${logFormat}"`);
  }

  return Object.freeze({
    baseUrl: url.toString().replace(/\/+$/, ''),
    apiKey,
    project,
    projectIds,
    projectHeader: flags.projectHeader ?? PROJECT_HEADERS,
    resources,
    destination,
    duckdbPath: flags.duckdbPath ?? 'warehouse.duckdb',
    duckdbMemoryLimit: duckdbMemoryLimit(flags),
    bigquery,
    dryRun: flags.dryRun ?? false,
    dryRunLimit: dryRunLimit(flags),
    statePath: flags.state ?? 'state/state.json',
    lockWaitMs,
    lookbackMs,
    settleMs,
    traces,
    startMs,
    batchRows: positive('--batch-rows', flags.batchRows ?? DEFAULT_BATCH_ROWS[destination]),
    batchBytes: batchBytes(flags.batchBytes ?? DEFAULT_BATCH_BYTES),
    splitConcurrency: wholeAtLeastOne('--concurrency', flags.concurrency ?? DEFAULT_SPLIT_CONCURRENCY),
    limits,
    timeouts,
    maxRetryAfterMs,
    logLevel: flags.logLevel ?? (flags.verbose ? 'debug' : flags.quiet ? 'warn' : 'info'),
    logFormat,
    quiet: flags.quiet ?? false,
    progress: flags.quiet ? 'off' : isTty ? 'tty' : 'log',
    progressIntervalMs: positive('--progress-interval', duration('--progress-interval', flags.progressInterval ?? '5s')),
    json: flags.json ?? false,
    privacy,
    schemaContract: schemaContract(flags.schemaContract),
  });
}

/** `--resources` → the declared resources, in their declaration order. */
function resolveResources(flags: Pick<SyncFlags, 'resources'>): readonly ResourceDefinition[] {
  const names = flags.resources === undefined ? [...RESOURCE_NAMES] : splitList(flags.resources);
  const unknown = names.filter((n) => !RESOURCE_NAMES.includes(n));
  if (unknown.length > 0 || names.length === 0) {
    throw new ConfigError(`--resources: expected a comma-separated subset of ${RESOURCE_NAMES.join(',')}, got "${flags.resources}"`);
  }
  return RESOURCES.filter((r) => names.includes(r.name));
}

/** `--destination` and the BigQuery flags. */
function resolveWarehouse(flags: SyncFlags): { destination: 'duckdb' | 'bigquery'; bigquery: BigQueryConfig | undefined } {
  const destination = flags.destination ?? 'duckdb';
  if (destination !== 'duckdb' && destination !== 'bigquery') {
    throw new ConfigError(`--destination: expected duckdb or bigquery, got "${destination}"`);
  }
  if (flags.dryRun === true && destination !== 'bigquery') {
    throw new ConfigError('--dry-run prints what would be sent to BigQuery: use it with --destination bigquery');
  }
  let bigquery: BigQueryConfig | undefined;
  if (destination === 'bigquery') {
    if (!flags.bqProject || !flags.bqDataset) {
      throw new ConfigError('--destination bigquery needs --bq-project and --bq-dataset');
    }
    if (!/^[A-Za-z0-9_]{1,1024}$/.test(flags.bqDataset)) {
      throw new ConfigError(`--bq-dataset: expected letters, digits and underscores, got "${flags.bqDataset}"`);
    }
    bigquery = {
      projectId: flags.bqProject,
      dataset: flags.bqDataset,
      location: flags.bqLocation ?? 'US',
      apiEndpoint: flags.bqApiEndpoint,
      keyFile: flags.bqKeyFile,
    };
  }
  return { destination, bigquery };
}

// ---- backfill, plan, verify, status ----

/** Flags of `backfill`, `plan`, `verify` and `status`, on top of `sync`'s. */
export interface RunFlags extends SyncFlags {
  readonly from?: string;
  readonly to?: string;
  readonly window?: string;
  readonly concurrency?: number;
  readonly json?: boolean;
  readonly repair?: boolean;
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
  /** The API key from the environment, if set: only to keep it out of what `status` prints. */
  readonly redactKey?: string;
}

/** Default window of a backfill or verify: one day. */
export const DEFAULT_WINDOW = '1d';
/** Default windows read at once by a backfill. */
export const DEFAULT_CONCURRENCY = 4;

export function resolveBackfillConfig(flags: RunFlags, env: NodeJS.ProcessEnv = process.env, isTty = false): Readonly<BackfillConfig> {
  const range = resolveRange(flags, 'backfill');
  if (range === undefined) throw new ConfigError('backfill needs --from and --to (ISO instants, e.g. --from 2026-01-01T00:00:00Z --to 2026-02-01T00:00:00Z)');
  return Object.freeze({ ...resolveSyncConfig(flags, env, isTty), range, concurrency: concurrency(flags) });
}

export function resolvePlanConfig(flags: RunFlags, env: NodeJS.ProcessEnv = process.env, isTty = false): Readonly<PlanConfig> {
  return Object.freeze({ ...resolveSyncConfig(flags, env, isTty), range: resolveRange(flags, 'plan'), json: flags.json ?? false });
}

export function resolveVerifyConfig(flags: RunFlags, env: NodeJS.ProcessEnv = process.env, isTty = false): Readonly<VerifyConfig> {
  const range = resolveRange(flags, 'verify');
  if (range === undefined) throw new ConfigError('verify needs --from and --to (ISO instants, e.g. --from 2026-01-01T00:00:00Z --to 2026-02-01T00:00:00Z)');
  return Object.freeze({ ...resolveSyncConfig(flags, env, isTty), range, repair: flags.repair ?? false, concurrency: concurrency(flags) });
}

/** `status` reads state and the warehouse only: no API URL or key needed. */
export function resolveStatusConfig(flags: RunFlags, env: NodeJS.ProcessEnv = process.env): Readonly<StatusConfig> {
  const { destination, bigquery } = resolveWarehouse(flags);
  return Object.freeze({
    statePath: flags.state ?? 'state/state.json',
    resources: resolveResources(flags),
    destination,
    duckdbPath: flags.duckdbPath ?? 'warehouse.duckdb',
    duckdbMemoryLimit: duckdbMemoryLimit(flags),
    bigquery,
    dryRun: false,
    lockWaitMs: duration('--lock-wait', flags.lockWait ?? '0'),
    json: flags.json ?? false,
    redactKey: emptyToUndefined(env[ENV.apiKey]),
  });
}

function resolveRange(flags: RunFlags, command: string): RangeConfig | undefined {
  if (flags.from === undefined && flags.to === undefined) {
    if (flags.window !== undefined && command === 'plan') throw new ConfigError('plan --window applies to a backfill plan: add --from and --to');
    return undefined;
  }
  if (flags.from === undefined || flags.to === undefined) throw new ConfigError(`${command}: pass both --from and --to`);
  const fromMs = instant('--from', flags.from);
  const toMs = instant('--to', flags.to);
  if (fromMs >= toMs) throw new ConfigError(`${command}: expected --from before --to, got [${flags.from}, ${flags.to})`);
  const windowMs = positive('--window', duration('--window', flags.window ?? DEFAULT_WINDOW));
  return { fromMs, toMs, windowMs };
}

function concurrency(flags: RunFlags): number {
  return wholeAtLeastOne('--concurrency', flags.concurrency ?? DEFAULT_CONCURRENCY);
}

function wholeAtLeastOne(flag: string, n: number): number {
  if (!Number.isInteger(n) || n < 1) throw new ConfigError(`${flag}: expected a whole number of at least 1, got ${n}`);
  return n;
}

function instant(flag: string, text: string): number {
  const ms = Date.parse(text);
  if (Number.isNaN(ms) || !/^\d{4}-\d{2}-\d{2}/.test(text)) {
    throw new ConfigError(`${flag}: expected an ISO-8601 instant such as 2026-01-01T00:00:00Z, got "${text}"`);
  }
  return ms;
}

function schemaContract(text: string | undefined): SchemaContract {
  const found = SCHEMA_CONTRACTS.find((c) => c === (text ?? 'evolve'));
  if (found === undefined) throw new ConfigError(`--schema-contract: expected one of ${SCHEMA_CONTRACTS.join(', ')}, got "${text}"`);
  return found;
}

function duckdbMemoryLimit(flags: SyncFlags): string {
  const limit = flags.duckdbMemoryLimit ?? DEFAULT_MEMORY_LIMIT;
  if (!isDuckDbSize(limit)) throw new ConfigError(`--duckdb-memory-limit: expected a size such as 32MB or 1GB, got "${limit}"`);
  return limit;
}

function batchBytes(text: string): number {
  const mb = megabytes(text);
  if (mb === undefined || mb <= 0) throw new ConfigError(`--batch-bytes: expected a size such as 8MB or 512KB, got "${text}"`);
  return Math.round(mb * 1e6);
}

function duration(flag: string, text: string): number {
  try {
    return parseDuration(text);
  } catch (error) {
    throw new ConfigError(`${flag}: ${(error as Error).message}`);
  }
}

function positive(flag: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0) throw new ConfigError(`${flag}: expected a positive number, got ${value}`);
  return value;
}

function splitList(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

function emptyToUndefined(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/** Default rows per stream a dry run reads: enough to show every statement, not all history. */
export const DEFAULT_DRY_RUN_LIMIT = 100;

function dryRunLimit(flags: SyncFlags): number {
  const value = flags.dryRunLimit;
  if (value === undefined) return DEFAULT_DRY_RUN_LIMIT;
  if (flags.dryRun !== true) throw new ConfigError('--dry-run-limit sets how many rows a dry run reads per stream: use it with --dry-run');
  if (!Number.isSafeInteger(value) || value < 1) throw new ConfigError(`--dry-run-limit: expected a whole number of rows ≥ 1, got "${String(value)}"`);
  return value;
}
