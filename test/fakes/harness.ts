import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { expect } from 'vitest';
import { RESOURCES } from '../../connectors/index.js';
import { PROJECT_HEADERS } from '../../connectors/service.js';
import { systemClock } from '../../src/core/clock.js';
import { parseJson } from '../../src/core/json.js';
import { silentLogger } from '../../src/core/log.js';
import type { ApiRecord, Clock, JsonValue, ResourceDefinition } from '../../src/core/types.js';
import { DEFAULT_RATE_LIMITS, type RateLimits } from '../../src/http/scheduler/budget.js';
import { PIPELINE_DEFAULTS } from '../../src/config/index.js';
import type { ApiClientOptions, RetryOptions } from '../../src/http/client.js';
import type { Destination } from '../../src/load/destination.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { runSync, type RunHooks, type RunSummary, type SyncTargets } from '../../src/sync/engine.js';
import { openSyncRun, type RunServices, type SyncSettings } from '../../src/sync/context.js';
import type { Capabilities } from '../../src/sync/capabilities.js';
import { connectApi } from '../../src/run/runtime.js';
import { openRun } from '../../src/run/run.js';
import { createRunStop } from '../../src/run/stop.js';
import { openStateAndDestination, type OpensDestination, type RunOutcome } from '../../src/run/writing.js';
import {
  resolveSyncConfig,
  type BackfillConfig,
  type SyncConfig,
  type SyncFlags,
  type VerifyConfig,
} from '../../src/config/index.js';
import type { StateStore } from '../../src/state/store.js';
import type { StateDocument } from '../../src/state/document.js';

/** A sync's options in one object, as a test names them: what it reads, its settings, its run id and stop. */
export type SyncRunOptions = SyncTargets & SyncSettings & { readonly runId?: string; readonly signal?: AbortSignal };

/** `runSync` with a test's options in one object: its targets, and the run's context opened now over `services`. */
export function runSyncWith(
  options: SyncRunOptions,
  services: RunServices & { readonly capabilities?: Capabilities },
  hooks?: RunHooks,
): Promise<RunSummary> {
  const { resources, declared, project, projectIds, runId, signal, ...settings } = options;
  return runSync(
    {
      resources,
      project,
      ...(declared === undefined ? {} : { declared }),
      ...(projectIds === undefined ? {} : { projectIds }),
    },
    openSyncRun(services, settings, {
      ...(runId === undefined ? {} : { runId }),
      ...(signal === undefined ? {} : { signal }),
    }),
    hooks,
  );
}

/** Fast retries for tests: the same loop, shorter sleeps. */
const FAST_RETRY: Partial<RetryOptions> = { maxAttempts: 8, backoff: { baseMs: 5, maxDelayMs: 50 } };

export const dbPathOf = (dir: string): string => join(dir, 'warehouse.duckdb');
export const statePathOf = (dir: string): string => join(dir, 'state.json');

/** A CLI run's flags for the warehouse and state files of `dir` (as the harness lays them out), logging errors only. */
export const storageFlags = (dir: string): string[] => [
  '--duckdb-path',
  dbPathOf(dir),
  '--state',
  statePathOf(dir),
  '--log-level',
  'error',
];
/** Where a harness run reads and writes; unset fields take the test defaults. */
export interface PipelineTarget {
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly dir: string;
  readonly limits?: RateLimits;
  readonly retry?: Partial<RetryOptions>;
  readonly projectHeader?: string | readonly string[];
  readonly destination?: () => Promise<Destination>;
  /** The run's clock (a test shifts it to stand later in time, with the emulator's `now`). @default systemClock */
  readonly clock?: Clock;
  /** More client options (timeouts, Retry-After cap, a logger to read). */
  readonly client?: Partial<Pick<ApiClientOptions, 'timeouts' | 'maxRetryAfterMs' | 'longWaitMs' | 'logger'>>;
}

/** A sync's settings at the CLI's defaults (DuckDB's batch size), where a harness call names none. */
export const SYNC_DEFAULTS = PIPELINE_DEFAULTS.sync;

/** A backfill's settings at the CLI's defaults, where a harness call names none. */
export const BACKFILL_DEFAULTS = PIPELINE_DEFAULTS.backfill;

/**
 * The run's own options of a harness call: its target left out, every resource unless it names
 * some, no project header unless it names one. Its splits are sized by the target's limits, or
 * the documented ones when it has none (the scheduler then runs unthrottled, see `withPipeline`).
 */
export function runOptionsOf<
  O extends PipelineTarget & { readonly resources?: readonly ResourceDefinition[]; readonly project?: string },
>(
  opts: O,
): Omit<O, keyof PipelineTarget> & {
  readonly resources: readonly ResourceDefinition[];
  readonly project: string | undefined;
  readonly limits: RateLimits;
} {
  const {
    baseUrl: _baseUrl,
    apiKey: _apiKey,
    dir: _dir,
    limits: _limits,
    retry: _retry,
    projectHeader: _projectHeader,
    destination: _destination,
    client: _client,
    clock: _clock,
    ...run
  } = opts;
  return {
    ...run,
    resources: opts.resources ?? RESOURCES,
    project: opts.project,
    limits: opts.limits ?? DEFAULT_RATE_LIMITS,
  };
}

/** Effectively no limits: a harness run is paced only when its target names limits. */
const UNTHROTTLED: RateLimits = { ...DEFAULT_RATE_LIMITS, maxRpm: 100_000, maxRps: 100_000 };

/**
 * The harness's destination, handed to the run object's opening (`openStateAndDestination`): a
 * test's own destination is made first (the harness learns its kind only from it; one that keeps
 * its leases, BigQuery in the dataset, then holds the run's lease), else DuckDB at `dbPathOf(dir)`
 * after the lease beside the state file, as the CLI opens its DuckDB file.
 */
function harnessDestination(target: PipelineTarget): OpensDestination {
  return target.destination === undefined
    ? { destination: () => DuckDbDestination.open(dbPathOf(target.dir)), first: false }
    : { destination: target.destination, first: true };
}

/**
 * Wire the parts the CLI wires (scheduler, client, destination, state under `purpose`'s lock), run
 * `body` (the engine alone: no contract, reconcile, run history or publishing; `syncRunOnce` runs
 * the whole run), and close everything. Limits default to effectively none, retries to fast ones.
 *
 * State and destination are opened by the run object's own opening (`openStateAndDestination` in
 * src/run/writing.ts): the state by `openRunState` (lease, resource names, secrets kept out, a lost
 * lease stopping the run), the lease before a DuckDB file and after a destination that keeps its
 * leases itself, then the state kept in the warehouse. The one difference: DuckDB is opened at
 * `dbPathOf(dir)` itself, not through `openDestination`, whose published-copy layout would move the
 * rows to `warehouse.work.duckdb` that the tests read here.
 */
export async function withPipeline<T>(
  target: PipelineTarget,
  purpose: 'sync' | 'backfill',
  body: (deps: RunServices) => Promise<T>,
): Promise<T> {
  const logger = target.client?.logger ?? silentLogger();
  const clock = target.clock ?? systemClock;
  const { client } = connectApi({
    baseUrl: target.baseUrl,
    apiKey: target.apiKey,
    projectHeader: target.projectHeader ?? PROJECT_HEADERS,
    limits: target.limits ?? UNTHROTTLED,
    clock,
    logger,
    retry: target.retry ?? FAST_RETRY,
    timeouts: target.client?.timeouts,
    maxRetryAfterMs: target.client?.maxRetryAfterMs,
    longWaitMs: target.client?.longWaitMs,
  });
  const stop = createRunStop({ logger });
  const config = {
    statePath: statePathOf(target.dir),
    lockWaitMs: 0,
    dryRun: false,
    apiKey: target.apiKey,
    destination: 'duckdb' as const,
    duckdbPath: dbPathOf(target.dir),
    // Unread: the harness makes its destination itself.
    duckdbMemoryLimitBytes: 0,
  };
  let opened: { readonly state: StateStore; readonly destination: Destination } | undefined;
  try {
    opened = await openStateAndDestination(config, purpose, { clock, logger, stop }, () => undefined, {
      open: harnessDestination(target),
    });
    return await body({ client, destination: opened.destination, state: opened.state, clock, logger });
  } finally {
    await opened?.destination.close();
    await client.close();
    await opened?.state.close();
    stop.dispose();
  }
}

/** A sync's configuration through the harness: the CLI's, resolved from these flags, at the target. */
export type HarnessSync = PipelineTarget & { readonly flags?: SyncFlags };

/** What `syncOnce` returns: the run's summary (`sync --json`'s, as objects), its exit code and what it printed. */
export type HarnessSummary = RunSummary & { readonly code: number; readonly output: readonly string[] };

/**
 * The CLI's configuration of a sync for `flags` (no environment), at the target: its state and
 * DuckDB paths, no lock wait, no progress or logs, the target's header, timeouts and Retry-After cap.
 */
function harnessConfig(target: PipelineTarget, flags: SyncFlags = {}): SyncConfig {
  const resolved = resolveSyncConfig(
    {
      baseUrl: target.baseUrl,
      apiKey: target.apiKey,
      state: statePathOf(target.dir),
      duckdbPath: dbPathOf(target.dir),
      lockWait: '0s',
      ...flags,
    },
    {},
  );
  return {
    ...resolved,
    projectHeader: target.projectHeader ?? PROJECT_HEADERS,
    progress: 'off',
    logLevel: 'silent',
    ...(target.client?.timeouts === undefined ? {} : { timeouts: { ...resolved.timeouts, ...target.client.timeouts } }),
    ...(target.client?.maxRetryAfterMs === undefined ? {} : { maxRetryAfterMs: target.client.maxRetryAfterMs }),
  };
}

/**
 * The configuration of a harness run that is handed its warehouse (`syncOnce`, `backfillOnce`):
 * the CLI's defaults, the call's resources and project scope, the documented limits (or the
 * target's) for the splits and forecasts; and that warehouse, opened when the run opens: the
 * test's destination (made first, as one that keeps its own lease is), else DuckDB at `dbPathOf(dir)`.
 */
export async function handedWarehouse(
  opts: PipelineTarget & {
    readonly resources?: readonly ResourceDefinition[];
    readonly project?: string | undefined;
    readonly projectIds?: readonly string[] | undefined;
  },
): Promise<{ readonly config: SyncConfig; readonly destination: OpensDestination }> {
  const made = opts.destination === undefined ? undefined : await opts.destination();
  return {
    config: {
      ...harnessConfig(opts),
      // The harness's DuckDB file, or the test's destination (BigQuery unless it is a DuckDB file).
      destination: made === undefined || made instanceof DuckDbDestination ? 'duckdb' : 'bigquery',
      resources: opts.resources ?? RESOURCES,
      project: opts.project,
      projectIds: opts.projectIds,
      limits: opts.limits ?? DEFAULT_RATE_LIMITS,
    },
    destination:
      made === undefined ? harnessDestination(opts) : { destination: () => Promise.resolve(made), first: true },
  };
}

/**
 * Open the run object as the command does, run its step and close it (`openRun`, `run.sync()` or
 * `run.backfill()`, `run.close`), with the harness's parts: the destination handed in if any, fast
 * retries, the scheduler unthrottled unless the target names limits, the test's logger, clock and stop.
 */
export async function runInProcess<C extends 'sync' | 'backfill' | 'verify'>(
  command: C,
  target: PipelineTarget,
  config: C extends 'sync' ? SyncConfig : C extends 'backfill' ? BackfillConfig : VerifyConfig,
  parts: { readonly destination?: OpensDestination; readonly signal?: AbortSignal | undefined },
): Promise<RunOutcome> {
  const printed: string[] = [];
  const io = {
    print: (line: string) => printed.push(line),
    ...(target.clock === undefined ? {} : { clock: target.clock }),
    ...(parts.signal === undefined ? {} : { signal: parts.signal }),
  };
  const runParts = {
    ...(parts.destination === undefined ? {} : { destination: parts.destination }),
    client: {
      retry: target.retry ?? FAST_RETRY,
      limits: target.limits ?? UNTHROTTLED,
      ...(target.client?.longWaitMs === undefined ? {} : { longWaitMs: target.client.longWaitMs }),
    },
    ...(target.client?.logger === undefined ? {} : { logger: target.client.logger }),
  };
  const outcome =
    command === 'sync'
      ? await openRun('sync', config, io, runParts).then(async (run) => run.close(await run.sync()))
      : command === 'backfill'
        ? await openRun('backfill', config as BackfillConfig, io, runParts).then(async (run) =>
            run.close(await run.backfill()),
          )
        : await openRun('verify', config as VerifyConfig, io, runParts).then(async (run) =>
            run.close(await run.verifyRepair()),
          );
  return { ...outcome, output: [...printed, ...outcome.output] };
}

/**
 * One whole sync run in-process, through the run object as `query-sync sync` runs it, in the
 * CLI's layout (the contract, reconcile and its repair, run history, views, the read copy
 * published): the CLI's configuration for `flags`, at the target (its limits, else none; fast
 * retries). Without a test destination the warehouse is the CLI's layout at `dbPathOf(dir)`: the
 * rows in the working file, the published read copy at `dbPathOf(dir)` (what `readTable` reads).
 * Returns the exit code and what the command would print.
 */
export async function syncRunOnce(target: HarnessSync): Promise<{ readonly code: number; readonly output: string[] }> {
  const config = { ...harnessConfig(target, target.flags), limits: target.limits ?? UNTHROTTLED };
  const outcome = await runInProcess(
    'sync',
    target,
    config,
    target.destination === undefined ? {} : { destination: harnessDestination(target) },
  );
  return { code: outcome.code, output: [...outcome.output] };
}

/**
 * One `verify --repair` in-process, through the run object as the command runs it (`openRun('verify')`,
 * `run.verifyRepair()`, `close`): count the range's windows in the API and the warehouse, re-read
 * those that differ under the run's contract, record the run. The warehouse is the test's
 * destination, else DuckDB at `dbPathOf(dir)` itself, as `syncOnce`'s. Returns the exit code and output.
 */
export async function verifyRepairOnce(
  opts: PipelineTarget & {
    readonly resources?: readonly ResourceDefinition[];
    readonly project?: string | undefined;
    readonly range: { readonly fromMs: number; readonly toMs: number; readonly windowMs: number };
    readonly concurrency?: number;
    readonly batchRows?: number;
  },
): Promise<RunOutcome> {
  const { config, destination } = await handedWarehouse(opts);
  return runInProcess(
    'verify',
    opts,
    {
      ...config,
      range: opts.range,
      repair: true,
      concurrency: opts.concurrency ?? BACKFILL_DEFAULTS.concurrency,
      batchRows: opts.batchRows ?? config.batchRows,
    },
    { destination },
  );
}

/** A sync through the harness: where it runs, and its settings (every resource and a 15-minute lookback unless set). */
export type HarnessRun = PipelineTarget &
  Partial<Omit<SyncRunOptions, 'declared' | 'runId' | 'sampleRows' | 'traceDrainMs'>>;

/**
 * One sync, in-process, through the run object as `query-sync sync` runs it (`openRun`, the step,
 * `close`): the contract, the reconcile after the walk and its repair, the run's row in
 * `_query_sync_runs`, the views, the rate-limit spend kept in state. The CLI's configuration at its
 * defaults (the flags' values), with the call's settings in their place. The warehouse is the
 * test's destination, else DuckDB at `dbPathOf(dir)` itself (the rows where `readTable` reads them):
 * a destination handed to the run is not the CLI's working file, so no read copy is published
 * (`syncRunOnce` runs the CLI's layout, publishing included). The scheduler runs unthrottled unless
 * the target names limits; splits are sized by the documented limits, or the target's.
 *
 * Returns the run's summary as `sync --json` reports it (`ok`: every stream ok and no window left
 * differing after the reconcile), its exit code and its output. A run that fails before its walk
 * (the lease held, a table the contract refuses) throws its FAILED line.
 */
export async function syncOnce(opts: HarnessRun): Promise<HarnessSummary> {
  const { config, destination } = await handedWarehouse(opts);
  const outcome = await runInProcess(
    'sync',
    opts,
    {
      ...config,
      lookbackMs: opts.lookbackMs ?? 15 * 60_000,
      startMs: opts.startMs,
      batchRows: opts.batchRows ?? SYNC_DEFAULTS.batchRows,
      batchBytes: opts.batchBytes ?? SYNC_DEFAULTS.batchBytes,
      splitConcurrency: opts.concurrency ?? SYNC_DEFAULTS.concurrency,
      settleMs: opts.settleMs ?? SYNC_DEFAULTS.settleMs,
      traces: opts.traces ?? config.traces,
    },
    { destination, signal: opts.signal },
  );
  // A sync's step reports a sync's summary (`run/sync.ts`).
  const summary = outcome.summary as RunSummary | undefined;
  if (summary === undefined) throw new Error(outcome.output.join('\n'));
  return { ...summary, code: outcome.code, output: outcome.output };
}

/**
 * One sync of the engine alone (`runSync`, no run object: no contract, reconcile, run history or
 * views), over the parts the CLI wires: for a test of a setting no flag gives (the traces'
 * drain time, `traceDrainMs`), or of the engine's own summary.
 */
export function syncEngineOnce(opts: PipelineTarget & Partial<SyncRunOptions>): Promise<RunSummary> {
  return withPipeline(opts, 'sync', (deps) =>
    runSyncWith({ ...SYNC_DEFAULTS, ...runOptionsOf(opts), lookbackMs: opts.lookbackMs ?? 15 * 60_000 }, deps),
  );
}

export async function readTable(dir: string, table: string): Promise<Record<string, unknown>[]> {
  const db = await DuckDbDestination.open(dbPathOf(dir));
  try {
    if ((await db.describe(table)) === undefined) return [];
    return await db.query(`SELECT * FROM "${table}"`);
  } finally {
    await db.close();
  }
}

/**
 * Assert that a warehouse table holds exactly the API's records: same (project_id, key) set, no
 * duplicates, and every field equal (strings byte-exact, bigints exact, nested JSON deep-equal,
 * instants equal).
 */
export function expectTableMatches(
  rows: Record<string, unknown>[],
  records: readonly ApiRecord[],
  key: string,
  label = key,
): void {
  const id = (p: unknown, k: unknown): string => `${String(p)}\u0000${String(k)}`;
  const byKey = new Map<string, Record<string, unknown>>();
  for (const row of rows) {
    const k = id(row.project_id, row[key]);
    if (byKey.has(k)) expect(byKey.has(k), `duplicate row ${k}`).toBe(false);
    byKey.set(k, row);
  }
  const expectedKeys = new Set(records.map((r) => id(r.project_id, r[key])));
  const missing = [...expectedKeys].filter((k) => !byKey.has(k));
  const extra = [...byKey.keys()].filter((k) => !expectedKeys.has(k));
  expect({ table: label, missing: missing.slice(0, 5), missingCount: missing.length }).toEqual({
    table: label,
    missing: [],
    missingCount: 0,
  });
  expect({ table: label, extra: extra.slice(0, 5), extraCount: extra.length }).toEqual({
    table: label,
    extra: [],
    extraCount: 0,
  });
  for (const record of records) {
    const row = byKey.get(id(record.project_id, record[key])) as Record<string, unknown>;
    for (const [field, value] of Object.entries(record)) {
      expectCell(row[field], value, `${String(record.project_id)}/${String(record[key])}.${field}`);
    }
  }
}

const INSTANT_TEXT = /^\d{4}-\d{2}-\d{2}T.*(Z|[+-]\d{2}:?\d{2})$/;

/**
 * One cell. The comparison runs in plain code and `expect` is called only when it fails (with the
 * same matcher, so the message is unchanged): tables of thousands of cells made a chai assertion
 * object per cell, seconds per test.
 */
function expectCell(actual: unknown, expected: JsonValue, where: string): void {
  if (cellEquals(actual, expected)) return;
  if (expected === null) {
    expect(actual ?? null, where).toBeNull();
  } else if (typeof expected === 'object') {
    expect(typeof actual, where).toBe('string');
    expect(parseJson(actual as string), where).toEqual(expected);
  } else if (typeof expected === 'string' && INSTANT_TEXT.test(expected)) {
    expect(Date.parse(String(actual)), where).toBe(Date.parse(expected));
  } else if (typeof expected === 'number' && Number.isInteger(expected)) {
    expect(actual, where).toBe(BigInt(expected));
  } else {
    expect(actual, where).toBe(expected);
  }
}

/** What `expectCell`'s matchers accept (`toBe` is Object.is; `toEqual` is at most as strict as isDeepStrictEqual). */
function cellEquals(actual: unknown, expected: JsonValue): boolean {
  if (expected === null) return (actual ?? null) === null;
  if (typeof expected === 'object') return typeof actual === 'string' && isDeepStrictEqual(parseJson(actual), expected);
  if (typeof expected === 'string' && INSTANT_TEXT.test(expected))
    return Object.is(Date.parse(String(actual)), Date.parse(expected));
  if (typeof expected === 'number' && Number.isInteger(expected)) return Object.is(actual, BigInt(expected));
  return Object.is(actual, expected);
}

/**
 * A state file a killed run left mid-split: the stream's window [from, to) cut at `edge` into two
 * sub-windows, neither with a stored page yet.
 */
export function writeSplitLeft(dir: string, stream: string, fromMs: number, edgeMs: number, toMs: number): void {
  const iso = (ms: number): string => new Date(ms).toISOString();
  const doc: StateDocument = {
    version: 1,
    streams: {
      [stream]: {
        split: {
          from: iso(fromMs),
          to: iso(toMs),
          parts: [
            { from: iso(fromMs), to: iso(edgeMs) },
            { from: iso(edgeMs), to: iso(toMs) },
          ],
        },
      },
    },
    projects: [],
    sections: {},
  };
  writeFileSync(statePathOf(dir), JSON.stringify(doc));
}
