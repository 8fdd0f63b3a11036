import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { RESOURCE_NAMES } from '../../connectors/index.js';
import type { SyncConfig } from '../config.js';
import { exitCodeFor, RunStoppedError, type QuerySyncError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Clock } from '../core/types.js';
import { planSync, toProgressPlan, type Plan } from '../pipeline/plan.js';
import { runSync, type RunSummary } from '../pipeline/run.js';
import { columnsOf, recordRun, schemaChanges } from '../pipeline/run-history.js';
import { withContract } from '../normalize/contract.js';
import { EVENT_COUNTS_TABLE, EVENT_FACETS_TABLE, refreshAggregates } from '../pipeline/aggregates.js';
import { runSearches, SEARCH_RESULTS_TABLE, type SearchDeps } from '../pipeline/searches.js';
import { defineViews } from '../pipeline/views.js';
import { writeDbtSources } from './dbt-sources.js';
import type { StreamResult } from '../pipeline/stream.js';
import type { Destination } from '../load/destination.js';
import { isEmpty, StateStore, type StateDocument, type StateStoreOptions } from '../state/store.js';
import { keepStateIn } from './state-home.js';
import { openDestination, type DestinationConfig } from './open-destination.js';
import { beginRefresh, finishRefresh } from './refresh.js';
import { summaryLines, withoutContext } from './repeats.js';
import type { CommandIo } from './io.js';
import { createRuntime, syncProgressHooks, type Runtime } from './runtime.js';
import { createRunStop, isStopConsequence, stoppedLine, type RunStop } from './stop.js';

/**
 * `query-sync sync`: returns the exit code (0 only when every stream synced). The summary is the
 * last thing printed: the live display's last frame, the per-stream log lines and the repeated
 * errors' counts come before it, and nothing is printed after it (files are closed first).
 */
export async function syncCommand(config: SyncConfig, io: CommandIo): Promise<number> {
  // Before the run creates them: a new warehouse or state file beside an old one is worth a warning.
  const before = { warehouse: config.destination !== 'duckdb' || existsSync(config.duckdbPath), state: existsSync(config.statePath) };
  return withWritingRun('sync', config, io, async ({ runtime, stop, state, destination }) => {
    const { clock, logger, client } = runtime;
    const secrets = [config.apiKey];
    const warnings = mismatchWarnings(config, { ...before, state: before.state || !isEmpty(state.document) }, state.document);
    for (const warning of warnings) logger.warn(warning);
    const { state: runState, destination: runDestination } =
      config.fullRefresh === true ? await beginRefresh(config.resources, { state, destination, clock }) : { state, destination };
    // One count request per stream that has a count endpoint.
    await planForProgress(runtime, 'the run', () => planSync(config, { client, state: runState.document, clock, logger, limits: config.limits }));
    const tables = config.resources.map((r) => r.name);
    const columnsBefore = await columnsOf(destination, [...tables, ...analystTables(config)]);
    // One id for the run's rows (`_run_id`) and its row in `_query_sync_runs`.
    const runId = randomUUID();
    runtime.tracker.markStart();
    runtime.display.start();
    const hooks = syncProgressHooks(runtime.tracker);
    const summary = await runSync(
      {
        // The contract is checked against the tables as they were when the run started.
        resources: config.resources.map((r) => withContract(r, columnsBefore.get(r.name), config.schemaContract)),
        project: config.project,
        projectIds: config.projectIds,
        lookbackMs: config.lookbackMs,
        startMs: config.startMs,
        batchRows: config.batchRows,
        settleMs: config.settleMs,
        children: config.traces,
        batchBytes: config.batchBytes,
        concurrency: config.splitConcurrency,
        // A dry run shows the requests for a small sample, not all history.
        ...(config.dryRun ? { sampleRows: config.dryRunLimit } : {}),
        signal: stop.signal,
        runId,
      },
      { client, destination: runDestination, state: runState, clock, logger },
      hooks,
    );
    // Saved searches and aggregates: after the walks (the projects of a `*` sync are known by then),
    // shown in the same display.
    const extra =
      config.dryRun || stop.reason !== undefined ? [] : await analystStreams(config, runId, Date.parse(summary.startedAt), { client, destination, state, clock, logger, hooks }, stop.signal);
    runtime.tracker.finish();
    runtime.display.stop();
    const reason = stop.reason;
    const allStreams = [...summary.streams, ...extra];
    const streams = reason === undefined ? allStreams : allStreams.map((s) => (isStopConsequence(s.error, stop) ? { ...s, error: reason } : s));
    const runOk = summary.ok && extra.every((s) => s.outcome === 'ok');
    const refreshLines: string[] = [];
    if (config.fullRefresh === true) {
      const finished = (resource: string): boolean =>
        reason === undefined && streams.some((s) => s.resource === resource) && streams.every((s) => s.resource !== resource || s.outcome === 'ok');
      const outcome = await finishRefresh(config.resources, finished, { destination, memory: runState, state, logger });
      if (outcome.replaced.length > 0) refreshLines.push(`full refresh: replaced ${outcome.replaced.join(', ')} (each in one transaction) and their marks`);
      if (outcome.keptAsWas.length > 0) refreshLines.push(`full refresh: ${outcome.keptAsWas.join(', ')} left as they were (a stream did not finish); run it again`);
    }
    const recordedRunId = config.dryRun
      ? undefined
      : await recordRun(
          destination,
          {
            command: 'sync',
            startedAt: summary.startedAt,
            endedAt: new Date(clock.now()).toISOString(),
            streams,
            settings: runSettings(config),
            secrets,
          },
          schemaChanges(columnsBefore, await columnsOf(destination, [...tables, ...analystTables(config)])),
          logger,
          runId,
        );
    if (!config.dryRun) {
      await defineViews(destination, logger);
      if (config.dbtSourcesPath !== undefined) {
        const written = await writeDbtSources(destination, config.dbtSourcesPath, { destination: config.destination, bigquery: config.bigquery }).catch((error: unknown) => {
          logger.warn({ err: (error as Error).message }, `could not write the dbt sources to ${config.dbtSourcesPath ?? ''}`);
          return undefined;
        });
        if (written !== undefined) logger.info({ path: written.path }, `dbt sources written to ${written.path}`);
      }
    }
    logStreams(config, logger, 'stream done', streams.map((s) => ({ resource: s.resource, project: s.scope, rows: s.rows, pages: s.pages, requests: s.stats.requests, retries: s.stats.retries, seconds: s.seconds, outcome: s.outcome })));
    const code = runExitCode(reason, streams);
    const stopped = reason === undefined ? [] : [stoppedLine('sync', reason, streams.reduce((n, s) => n + s.rows, 0))];
    const output = config.json
      ? [JSON.stringify({ ...runJson('sync', { ...summary, ok: runOk, streams }, code), ...(recordedRunId === undefined ? {} : { runId: recordedRunId }), ...(reason === undefined ? {} : { stopped: reason.stopCause }), ...(warnings.length === 0 ? {} : { warnings }) })]
      : [
          ...warnings.map((w) => `WARNING: ${w}`),
          ...refreshLines,
          ...summaryLines(streams, `sync ${runOk ? 'ok' : reason === undefined ? 'FAILED' : 'STOPPED'} in ${summary.seconds.toFixed(1)} s`),
          ...stopped,
        ];
    return { code, output };
  });
}

/** A writing run, opened: what `withWritingRun` hands its body. */
export interface OpenRun {
  readonly runtime: Runtime;
  readonly stop: RunStop;
  readonly state: StateStore;
  readonly destination: Destination;
}

/** The exit code and the lines printed last (the summary). */
export interface RunOutcome {
  readonly code: number;
  readonly output: readonly string[];
}

/**
 * A run that writes (sync, backfill): the runtime, the run's stop (signals, `--max-run-time`, a
 * lost lease), the state under the run's lease and the destination are opened, `body` runs, and a
 * failure before or in it becomes the command's FAILED line (or JSON). The summary is the last thing
 * printed: the live display's last frame, the per-stream log lines and the repeated errors' counts
 * come before it, and nothing is printed after it (files are closed first).
 */
export async function withWritingRun(
  command: 'sync' | 'backfill',
  config: SyncConfig,
  io: CommandIo,
  body: (run: OpenRun) => Promise<RunOutcome>,
): Promise<number> {
  const runtime = createRuntime(config, io);
  const { clock, logger } = runtime;
  const stop = createRunStop({ outer: io.signal, maxRunTimeMs: config.maxRunTimeMs, logger });
  let state: StateStore | undefined;
  let destination: Destination | undefined;
  let outcome: RunOutcome;
  try {
    ({ state, destination } = await openStateAndDestination(config, command, { clock, logger, stop }, config.json ? (line) => logger.info(line) : io.print));
    outcome = await body({ runtime, stop, state, destination });
  } catch (error) {
    const code = exitCodeFor(error);
    outcome = { code, output: config.json ? [JSON.stringify(failedRunJson(command, error, code))] : [`${command} FAILED: ${(error as Error).message}`] };
  } finally {
    stop.dispose();
    runtime.tracker.finish();
    runtime.display.stop();
    runtime.repeats.flush(logger);
    await destination?.close().catch(() => undefined);
    await runtime.close().catch(() => undefined);
    await state?.close().catch(() => undefined);
  }
  for (const line of outcome.output) io.print(line);
  return outcome.code;
}

/**
 * When progress is shown, its ETA comes from a plan (count requests): a spinner shows meanwhile (a
 * long history takes a while to count); a plan that fails leaves the progress without an ETA.
 */
export async function planForProgress(runtime: Runtime, what: string, plan: () => Promise<Plan>): Promise<Plan | undefined> {
  if (!runtime.showsProgress) return undefined;
  runtime.tracker.markPlanning();
  runtime.display.start();
  const made = await plan().catch((error: unknown) => {
    runtime.logger.warn({ err: (error as Error).message }, `could not plan ${what}: progress shows no ETA`);
    return undefined;
  });
  if (made !== undefined) runtime.tracker.setPlan(toProgressPlan(made));
  return made;
}

/** One line per stream for log readers (JSON); on a terminal the summary says the same, so these stay at debug. */
export function logStreams(config: Pick<SyncConfig, 'logFormat'>, logger: Logger, message: string, streams: readonly Record<string, unknown>[]): void {
  const perStream = config.logFormat === 'json' ? logger.info.bind(logger) : logger.debug.bind(logger);
  for (const s of streams) perStream(s, message);
}

/** A stopped run exits with its stop's code; otherwise 0, or the code of the first stream that failed. */
export function runExitCode(reason: RunStoppedError | undefined, streams: readonly StreamResult[]): number {
  const failed = streams.find((s) => s.outcome !== 'ok');
  return reason !== undefined ? exitCodeFor(reason) : failed === undefined ? 0 : exitCodeFor(failed.error);
}

/**
 * A warehouse that is new while the state has marks (rows before the marks will never be read),
 * or a new state beside a warehouse that has data (all history is read again): usually a relative
 * path read from another working directory (cron), so say it loudly, with absolute paths.
 */
function mismatchWarnings(config: SyncConfig, before: { warehouse: boolean; state: boolean }, doc: StateDocument): string[] {
  const marked = Object.entries(doc.streams).filter(([, s]) => s.mark !== undefined || s.pending !== undefined).map(([k]) => k);
  const out: string[] = [];
  if (!before.warehouse && marked.length > 0 && config.fullRefresh !== true) {
    out.push(
      `the warehouse ${resolve(config.duckdbPath)} is new, but the state ${resolve(config.statePath)} has marks for ${marked.length} stream(s) ` +
        `(${marked.slice(0, 5).join(', ')}${marked.length > 5 ? ', …' : ''}): this sync reads only after those marks, so the new warehouse will miss older rows. ` +
        `Wrong --duckdb-path (relative paths follow the working directory)? Or start it over: query-sync reset --resources … --yes, or sync --full-refresh.`,
    );
  }
  if (before.warehouse && !before.state && config.destination === 'duckdb') {
    out.push(
      `the warehouse ${resolve(config.duckdbPath)} exists but holds no query-sync state, and there is no state file at ${resolve(config.statePath)}: this sync reads all history again ` +
        `(safe: rows merge on their key, but slow). Wrong --state (relative paths follow the working directory)?`,
    );
  }
  return out;
}

/**
 * The state of a run that writes (sync, backfill, verify --repair), under its lease: a take-over is
 * logged; a lost lease stops the run (another run writes now). A dry run keeps changes in memory.
 */
export function openRunState(
  config: Pick<SyncConfig, 'statePath' | 'lockWaitMs' | 'dryRun' | 'apiKey'>,
  purpose: StateStoreOptions['purpose'],
  { clock, logger, stop }: { readonly clock: Clock; readonly logger: Logger; readonly stop: RunStop },
  destination?: Destination,
): Promise<StateStore> {
  return StateStore.open(config.statePath, {
    clock,
    purpose,
    // BigQuery keeps the lease in the dataset; a dry run sends nothing, so it keeps it in a file.
    ...(destination?.leases === undefined || config.dryRun ? {} : { leases: destination.leases }),
    lockWaitMs: config.lockWaitMs,
    inMemory: config.dryRun,
    resources: RESOURCE_NAMES,
    secrets: [config.apiKey],
    onLockTakeOver: (message) => logger.warn(message),
    onNote: (message) => logger.info(message),
    onLockLost: (error) => stop.stop(new RunStoppedError(error.message, 'lease-lost', { cause: error })),
  });
}

/**
 * The run's state under its lease, and the destination, the state then kept in the warehouse. The
 * lease comes first where it lives beside the state file (DuckDB: a second run is told about the
 * lease, not about a busy DuckDB file); BigQuery's lease is in the dataset, so the destination
 * (which sends nothing when made) comes first there.
 */
export async function openStateAndDestination(
  config: Pick<SyncConfig, 'statePath' | 'lockWaitMs' | 'dryRun' | 'apiKey'> & DestinationConfig,
  purpose: StateStoreOptions['purpose'],
  deps: { readonly clock: Clock; readonly logger: Logger; readonly stop: RunStop },
  print: (line: string) => void,
): Promise<{ state: StateStore; destination: Destination }> {
  let state: StateStore | undefined;
  let destination: Destination | undefined;
  try {
    if (config.destination === 'bigquery') {
      destination = await openDestination(config, deps.logger, print);
      state = await openRunState(config, purpose, deps, destination);
    } else {
      state = await openRunState(config, purpose, deps);
      destination = await openDestination(config, deps.logger, print);
    }
    await keepStateIn(state, destination);
    return { state, destination };
  } catch (error) {
    await destination?.close().catch(() => undefined);
    await state?.close().catch(() => undefined);
    throw error;
  }
}

/** One stream of the JSON summary. */
export interface StreamJson {
  readonly resource: string;
  readonly scope: string;
  readonly outcome: StreamResult['outcome'];
  readonly rows: number;
  readonly pages: number;
  readonly windows: number;
  readonly requests: number;
  readonly retries: number;
  readonly rateLimited: number;
  readonly waitedSeconds: number;
  readonly backoffSeconds: number;
  readonly seconds: number;
  readonly error?: ErrorJson;
}

export interface ErrorJson {
  readonly code: string;
  readonly name: string;
  /** Without the "[resource, project]" prefix: the stream says which. */
  readonly message: string;
}

/** `sync --json`: one object a scheduler can read. */
export interface RunJson {
  readonly command: string;
  readonly ok: boolean;
  readonly exitCode: number;
  readonly startedAt?: string;
  readonly seconds?: number;
  readonly totals?: { readonly rows: number; readonly pages: number; readonly requests: number; readonly retries: number; readonly rateLimited: number };
  readonly streams: readonly StreamJson[];
  /** Distinct errors, each with the streams it failed (a bad key fails them all with one error). */
  readonly errors: readonly (ErrorJson & { readonly streams: readonly string[] })[];
}

export function runJson(command: string, summary: RunSummary, exitCode: number): RunJson {
  const streams = summary.streams.map((s): StreamJson => ({
    resource: s.resource,
    scope: s.scope,
    outcome: s.outcome,
    rows: s.rows,
    pages: s.pages,
    windows: s.windows,
    requests: s.stats.requests,
    retries: s.stats.retries,
    rateLimited: s.stats.rateLimited,
    waitedSeconds: round1(s.stats.waitedMs / 1000),
    backoffSeconds: round1(s.stats.backoffMs / 1000),
    seconds: round1(s.seconds),
    ...(s.outcome !== 'ok' && s.error !== undefined ? { error: errorJson(s.error) } : {}),
  }));
  const errors = new Map<string, ErrorJson & { streams: string[] }>();
  for (const s of streams) {
    if (s.error === undefined) continue;
    const key = `${s.error.name}|${s.error.message}`;
    const e = errors.get(key) ?? { ...s.error, streams: [] };
    e.streams.push(`${s.resource} ${s.scope}`);
    errors.set(key, e);
  }
  const sum = (f: (s: StreamJson) => number): number => streams.reduce((n, s) => n + f(s), 0);
  return {
    command,
    ok: summary.ok,
    exitCode,
    startedAt: summary.startedAt,
    seconds: round1(summary.seconds),
    totals: { rows: sum((s) => s.rows), pages: sum((s) => s.pages), requests: sum((s) => s.requests), retries: sum((s) => s.retries), rateLimited: sum((s) => s.rateLimited) },
    streams,
    errors: [...errors.values()],
  };
}

/** A run that failed before any stream ran (a held lock, an unreadable state file). */
export function failedRunJson(command: string, error: unknown, exitCode: number): RunJson {
  const e = errorJson(error instanceof Error ? error : new Error(String(error)));
  return { command, ok: false, exitCode, streams: [], errors: [{ ...e, streams: [] }] };
}

function errorJson(error: Error): ErrorJson {
  return { code: (error as Partial<QuerySyncError>).code ?? 'E_UNKNOWN', name: error.name, message: withoutContext(error.message) };
}

const round1 = (n: number): number => Math.round(n * 10) / 10;

/** What a run records of its settings in `_query_sync_runs` (never a secret: no key, no salt). */
export function runSettings(config: SyncConfig): Record<string, unknown> {
  return {
    project: config.project ?? null,
    projectIds: config.projectIds ?? null,
    resources: config.resources.map((r) => r.name),
    lookbackMs: config.lookbackMs,
    excludedColumns: config.privacy.exclude,
    hashedColumns: config.privacy.hash,
  };
}

/** Tables the analyst features write this run (their schema changes are recorded like the others'). */
function analystTables(config: SyncConfig): string[] {
  const out: string[] = [];
  for (const r of config.resources) for (const b of r.bridges ?? []) out.push(b.table);
  if ((config.searches ?? []).length > 0) out.push(SEARCH_RESULTS_TABLE);
  if (config.aggregates === true) out.push(EVENT_COUNTS_TABLE, EVENT_FACETS_TABLE);
  return out;
}

/** Saved searches (`--search`) and aggregates (`--aggregates`), as streams of the run summary. */
async function analystStreams(config: SyncConfig, runId: string, runStartMs: number, deps: SearchDeps, signal: AbortSignal): Promise<StreamResult[]> {
  const jobs: Promise<StreamResult[]>[] = [];
  const searches = config.searches ?? [];
  if (searches.length > 0) {
    jobs.push(runSearches({ searches, project: config.project, projectIds: config.projectIds, runStartMs, lookbackMs: config.lookbackMs, runId, signal }, deps));
  }
  if (config.aggregates === true) {
    jobs.push(refreshAggregates({ project: config.project, projectIds: config.projectIds, runStartMs, startMs: config.startMs, runId, interval: config.aggregatesInterval, signal }, deps));
  }
  return (await Promise.all(jobs)).flat();
}
