import { RESOURCES } from '../../connectors/index.js';
import { parseDuration } from '../core/duration.js';
import { emptyToUndefined } from './values.js';
import { ConfigError } from '../core/errors.js';
import { DEFAULT_RATE_LIMITS, type RateLimits } from '../http/scheduler/budget.js';
import { DEFAULT_MEMORY_LIMIT_BYTES } from '../load/duckdb/memory.js';
import {
  DEFAULT_CONCURRENCY,
  DEFAULT_DUCKDB_PATH,
  DEFAULT_MAX_BACKLOG_ETA,
  DEFAULT_MAX_LAG,
  DEFAULT_PUBLISH_EVERY,
  DEFAULT_STATE_PATH,
  DEFAULT_WINDOW,
} from './defaults.js';
import { reader, type Reader } from './reader.js';
import { resolveResources, resolveWarehouse, SLUG } from './parts.js';
import { resolveRun, type SyncConfig, type SyncFlags } from './run.js';

/** The settings of backfill, plan, verify, status, dbt-sources, reset, sql and publish, on top of a run's. */
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
  readonly check?: boolean;
  readonly maxLag?: string;
  readonly maxBacklogEta?: string;
  readonly html?: string;
}

/** A closed-open interval [from, to) sliced into windows. */
interface RangeConfig {
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
  extends Pick<
    SyncConfig,
    | 'statePath'
    | 'resources'
    | 'destination'
    | 'duckdbPath'
    | 'duckdbMemoryLimitBytes'
    | 'bigquery'
    | 'dryRun'
    | 'lockWaitMs'
  > {
  readonly json: boolean;
}

/** `status` itself: also the per-endpoint minute limit the syncs run with (`--max-rpm`), which a backlog's ETA assumes. */
export interface StatusCommandConfig extends StatusConfig {
  readonly limits: Pick<RateLimits, 'maxRpm'>;
  /** `--check`: judge freshness against these bounds (exit 7 on a breach) instead of listing. */
  readonly check?: { readonly maxLagMs: number; readonly maxBacklogEtaMs: number };
}

/** What `reset` needs: the state file and which streams to forget. */
export interface ResetConfig
  extends Pick<
    SyncConfig,
    | 'statePath'
    | 'resources'
    | 'lockWaitMs'
    | 'destination'
    | 'duckdbPath'
    | 'duckdbMemoryLimitBytes'
    | 'bigquery'
    | 'dryRun'
  > {
  /** Only the streams of this project scope (`*` also covers `*[a,b]` scopes); all scopes when absent. */
  readonly project: string | undefined;
  /** Whether `--resources` was given (reset refuses to forget every stream by default). */
  readonly resourcesGiven: boolean;
  readonly yes: boolean;
}

export function resolveBackfillConfig(
  flags: RunFlags,
  env: NodeJS.ProcessEnv = process.env,
  isTty = false,
): Readonly<BackfillConfig> {
  const { config, read } = resolveRun('backfill', flags, env, isTty);
  const range = resolveRange(read, 'backfill');
  if (range === undefined)
    throw new ConfigError(
      'backfill needs --from and --to (ISO instants, e.g. --from 2026-01-01T00:00:00Z --to 2026-02-01T00:00:00Z)',
    );
  return Object.freeze({ ...config, range, concurrency: read.integer('concurrency') ?? DEFAULT_CONCURRENCY });
}

export function resolvePlanConfig(
  flags: RunFlags,
  env: NodeJS.ProcessEnv = process.env,
  isTty = false,
): Readonly<PlanConfig> {
  const { config, read } = resolveRun('plan', flags, env, isTty);
  return Object.freeze({ ...config, range: resolveRange(read, 'plan'), json: read.bool('json') ?? false });
}

export function resolveVerifyConfig(
  flags: RunFlags,
  env: NodeJS.ProcessEnv = process.env,
  isTty = false,
): Readonly<VerifyConfig> {
  const { config, read } = resolveRun('verify', flags, env, isTty);
  const range = resolveRange(read, 'verify');
  if (range === undefined)
    throw new ConfigError(
      'verify needs --from and --to (ISO instants, e.g. --from 2026-01-01T00:00:00Z --to 2026-02-01T00:00:00Z)',
    );
  return Object.freeze({
    ...config,
    range,
    repair: read.bool('repair') ?? false,
    concurrency: read.integer('concurrency') ?? DEFAULT_CONCURRENCY,
  });
}

/** `status` reads state and the warehouse only: no API URL or key needed. */
export function resolveStatusConfig(
  flags: RunFlags,
  env: NodeJS.ProcessEnv = process.env,
): Readonly<StatusCommandConfig> {
  const read = reader('status', flags, env);
  const check = read.bool('check') ?? false;
  for (const flag of ['max-lag', 'max-backlog-eta'])
    if (!check && read.text(flag) !== undefined)
      throw new ConfigError(`${read.label(flag)} bounds status --check: add --check`);
  if (check && (read.bool('json') ?? false))
    throw new ConfigError('status: --check prints one line per breach and exits 7; leave out --json');
  return Object.freeze({
    ...readWarehouse(read),
    statePath: read.text('state') ?? DEFAULT_STATE_PATH,
    resources: resolveResources(read),
    json: read.bool('json') ?? false,
    limits: { maxRpm: read.number('max-rpm') ?? DEFAULT_RATE_LIMITS.maxRpm },
    ...(check ? { check: freshnessBounds(read) } : {}),
  });
}

/** `status --check`'s bounds: each flag, else its default (options.ts). */
function freshnessBounds(read: Reader): NonNullable<StatusCommandConfig['check']> {
  return {
    maxLagMs: read.duration('max-lag') ?? parseDuration(DEFAULT_MAX_LAG),
    maxBacklogEtaMs: read.duration('max-backlog-eta') ?? parseDuration(DEFAULT_MAX_BACKLOG_ETA),
  };
}

/** The warehouse settings of a command that reads it or changes only state (status, dbt-sources, reset). */
function readWarehouse(
  read: Reader,
): Pick<StatusConfig, 'destination' | 'duckdbPath' | 'duckdbMemoryLimitBytes' | 'bigquery' | 'dryRun' | 'lockWaitMs'> {
  const { destination, bigquery } = resolveWarehouse(read);
  return {
    destination,
    duckdbPath: read.text('duckdb-path') ?? DEFAULT_DUCKDB_PATH,
    duckdbMemoryLimitBytes: read.size('duckdb-memory-limit') ?? DEFAULT_MEMORY_LIMIT_BYTES,
    bigquery,
    dryRun: false,
    lockWaitMs: read.duration('lock-wait') ?? 0,
  };
}

/** `dbt-sources` reads the warehouse only, like `status`, and writes `--out`. */
export function resolveDbtSourcesConfig(
  flags: RunFlags,
  env: NodeJS.ProcessEnv = process.env,
): Readonly<StatusConfig & { readonly out: string; readonly publishEveryMs: number }> {
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
    if (read.text('window') !== undefined && command === 'plan')
      throw new ConfigError('plan --window applies to a backfill plan: add --from and --to');
    return undefined;
  }
  if (from === undefined || to === undefined) throw new ConfigError(`${command}: pass both --from and --to`);
  if (from >= to)
    throw new ConfigError(`${command}: expected --from before --to, got [${read.text('from')}, ${read.text('to')})`);
  const windowMs = read.duration('window') ?? parseDuration(DEFAULT_WINDOW);
  if (windowMs <= 0) throw new ConfigError(`${read.label('window')}: expected a positive duration such as 1d or 6h`);
  return { fromMs: from, toMs: to, windowMs };
}

/** `report --html FILE`: the run history of the warehouse as one HTML page (DuckDB's published copy). */
export interface ReportConfig {
  readonly destination: string;
  readonly duckdbPath: string;
  readonly html: string;
}

export function resolveReportConfig(flags: RunFlags, env: NodeJS.ProcessEnv = process.env): Readonly<ReportConfig> {
  const read = reader('report', flags, env);
  const html = read.text('html');
  if (html === undefined || html === '') throw new ConfigError('report needs --html FILE: the page to write');
  return Object.freeze({
    destination: read.choice('destination') ?? 'duckdb',
    duckdbPath: read.text('duckdb-path') ?? DEFAULT_DUCKDB_PATH,
    html,
  });
}

/** `sql` and `publish`: the warehouse file only (DuckDB). */
export interface PublishedConfig {
  readonly duckdbPath: string;
  readonly duckdbMemoryLimitBytes: number;
}

/** `sql [query]`: reads the published copy; output as a table, `--json` or `--csv`. */
export function resolveSqlConfig(
  flags: RunFlags & { readonly query?: string },
  env: NodeJS.ProcessEnv = process.env,
): Readonly<PublishedConfig & { readonly query?: string; readonly format: 'table' | 'json' | 'csv' }> {
  const read = reader('sql', flags, env);
  const json = read.bool('json') ?? false;
  const csv = read.bool('csv') ?? false;
  if (json && csv) throw new ConfigError('sql: --json and --csv exclude each other: give one');
  return Object.freeze({
    duckdbPath: read.text('duckdb-path') ?? DEFAULT_DUCKDB_PATH,
    duckdbMemoryLimitBytes: DEFAULT_MEMORY_LIMIT_BYTES,
    ...(typeof flags.query === 'string' ? { query: flags.query } : {}),
    format: json ? 'json' : csv ? 'csv' : 'table',
  });
}

/** `publish`: publish the read copy now from the working file (no sync running). */
export function resolvePublishConfig(flags: RunFlags, env: NodeJS.ProcessEnv = process.env): Readonly<PublishedConfig> {
  const read = reader('publish', flags, env);
  return Object.freeze({
    duckdbPath: read.text('duckdb-path') ?? DEFAULT_DUCKDB_PATH,
    duckdbMemoryLimitBytes: DEFAULT_MEMORY_LIMIT_BYTES,
  });
}
