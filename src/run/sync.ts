import { resolve } from 'node:path';
import type { SyncConfig } from '../config/index.js';
import { RESOURCES } from '../../connectors/index.js';
import { planStateOf, planSync } from '../reports/plan.js';
import { traceLoad, deficitLine } from '../sync/traces/load.js';
import { backlogForecasts } from '../reports/status.js';
import { forecastLine, spoken, type BacklogForecast } from '../reports/freshness.js';
import { runSync } from '../sync/engine.js';
import { Capabilities } from '../sync/capabilities.js';
import { openSyncRun, type SyncSettings } from '../sync/context.js';
import { EVENT_COUNTS_TABLE, EVENT_FACETS_TABLE, refreshAggregates } from '../analysts/aggregates.js';
import { runSearches, SEARCH_RESULTS_TABLE, type SearchDeps } from '../analysts/searches.js';
import type { StreamResult } from '../sync/frame.js';
import { isEmpty, type StateDocument } from '../state/store.js';
import { summaryLines } from '../reports/repeats.js';
import { owedVerdict } from '../reports/text.js';
import { billingJson, billingLine } from './billing.js';
import { runJson, runSettings } from '../reports/run-json.js';
import { syncProgressHooks } from './runtime.js';
import { logStreams, streamsEnd, type RunOutcome } from './writing.js';
import { stoppedLines } from './envelope.js';
import type { RunContext } from './context.js';
import { formatReconcile } from '../reports/reconcile-lines.js';
import {
  reconcileBrief,
  reconcileRun,
  RECONCILE_SCHEMA,
  reconcileRows,
  type ReconcileReport,
} from '../reconcile/step.js';

/**
 * A sync run's step (`query-sync sync`, `run.sync()`): the walks, the analyst streams, the
 * reconcile and its repair, the full refresh's swap; its exit code (0 only when every stream
 * synced) and its summary, for the command to print last.
 */
export async function syncStep(run: RunContext<SyncConfig>): Promise<RunOutcome> {
  const { config, runtime, stop, state, destination, monitor } = run;
  const { clock, logger, client } = runtime;
  const warnings = mismatchWarnings(
    config,
    { ...run.before, state: run.before.state || !isEmpty(state.document) },
    state.document,
  );
  for (const warning of warnings) logger.warn(warning);
  const { state: runState, destination: runDestination } = await run.walkTarget();
  // One count request per stream that has a count endpoint.
  await run.plan('the run', () =>
    planSync(config, { client, state: planStateOf(runState.document), clock, logger, limits: config.limits }),
  );
  // Where each stream's windows start this run: the range the reconcile step checks.
  const stateBefore = runState.document;
  const started = await run.begin(analystTables(config));
  const { runId } = run;
  const hooks = monitor.observe(syncProgressHooks(runtime.tracker));
  // One book of what this server offers for the whole run: walks, searches and aggregates learn and log once.
  const capabilities = new Capabilities({ state: runState, clock, logger });
  // What the run reads (its resources under the contract) and its context: the walks' and the reconcile's.
  const targets = {
    resources: started.resources,
    declared: RESOURCES,
    project: config.project,
    projectIds: config.projectIds,
    // The columns read as the run began, but not under --full-refresh: its walk writes shadow tables.
    ...(config.fullRefresh === true ? {} : { described: started.columnsBefore }),
  };
  const syncRun = openSyncRun(
    { client, destination: runDestination, state: runState, clock, logger, capabilities },
    syncSettings(config),
    { runId, signal: stop.signal },
  );
  const summary = await runSync(targets, syncRun, hooks);
  // Saved searches and aggregates: after the walks (the projects of a `*` sync are known by then),
  // shown in the same display.
  // A rejected key (401) ends the run's reading: nothing more is sent, so nothing more is tried.
  const keyRejected = client.keyRejected !== undefined;
  const extra =
    config.dryRun || stop.reason !== undefined || keyRejected
      ? []
      : await analystStreams(
          config,
          runId,
          Date.parse(summary.startedAt),
          { client, destination, state, clock, logger, hooks, capabilities },
          stop.signal,
        );
  // Reconcile after every write of the run, in the same budget; not for a dry run (nothing
  // written), a stopped run (its windows are unfinished) or a full refresh (its rows are in
  // shadow tables until the end).
  const reconcileMode = config.reconcile ?? 'repair';
  const reconciled: ReconcileReport | undefined =
    reconcileMode === 'off' ||
    config.dryRun ||
    config.fullRefresh === true ||
    stop.reason !== undefined ||
    client.keyRejected !== undefined
      ? undefined
      : await reconcileRun(
          {
            mode: reconcileMode,
            targets,
            before: stateBefore,
            streams: summary.streams,
            deletions: config.deletions ?? 'mark',
          },
          // The run's context: its services (not a full refresh's shadow: no reconcile then), settings, start, id, stop.
          syncRun,
        ).catch((error: unknown) => {
          // The data and marks are stored: a check that cannot run is said loudly, not fatal.
          logger.error({ err: (error as Error).message }, `reconcile could not run: ${(error as Error).message}`);
          return undefined;
        });
  if (reconciled !== undefined) monitor.reconciled(reconciled);
  const { reason, streams } = run.end([...summary.streams, ...extra]);
  const runOk = summary.ok && extra.every((s) => s.outcome === 'ok');
  const refreshLines: string[] = [];
  const refreshed = await run.finishRefresh(
    (resource) =>
      reason === undefined &&
      streams.some((s) => s.resource === resource) &&
      streams.every((s) => s.resource !== resource || s.outcome === 'ok'),
  );
  if (refreshed !== undefined) {
    if (refreshed.replaced.length > 0)
      refreshLines.push(
        `full refresh: replaced ${refreshed.replaced.join(', ')} (each in one transaction) and their marks`,
      );
    if (refreshed.keptAsWas.length > 0)
      refreshLines.push(
        `full refresh: ${refreshed.keptAsWas.join(', ')} left as they were (a stream did not finish); run it again`,
      );
  }
  const differing = reconciled?.remaining ?? 0;
  const end = streamsEnd(reason, streams, differing > 0);
  const { code } = end;
  // When each per-event backlog will be whole at the budget: said in the summary, kept in the run's row.
  const forecasts = config.dryRun
    ? []
    : backlogForecasts(runState.document, config.resources, config.limits, clock.now(), owedOfStreams(streams));
  const billing = run.billing();
  const recorded = await run.record(started, {
    startedAt: summary.startedAt,
    streams,
    settings: runSettings(config),
    end,
    ...(billing === undefined ? {} : { billing }),
    ...(reconciled === undefined ? {} : { reconcile: reconcileBrief(reconciled) }),
    ...(forecasts.length === 0 ? {} : { backlog: forecasts }),
  });
  const recordedRunId = recorded?.runId;
  if (recordedRunId !== undefined && reconciled !== undefined && reconciled.windows.length > 0) {
    await destination
      .write({
        table: RECONCILE_SCHEMA,
        rows: reconcileRows(recordedRunId, new Date(clock.now()).toISOString(), reconciled),
      })
      .catch((error: unknown) => {
        logger.warn(
          { err: (error as Error).message },
          `could not write ${RECONCILE_SCHEMA.name}; the run's data and state are stored`,
        );
      });
  }
  await run.defineExtras();
  logStreams(
    config,
    logger,
    'stream done',
    streams.map((s) => ({
      resource: s.resource,
      project: s.scope,
      rows: s.rows,
      pages: s.pages,
      requests: s.stats.requests,
      retries: s.stats.retries,
      seconds: s.seconds,
      outcome: s.outcome,
    })),
  );
  // Where per-event reads cannot keep up with the events a day, the backlog only grows: say so.
  const deficits = config.resources.flatMap(
    (r) => deficitLine(r, traceLoad(runState.document, r, config.limits, clock.now()), config.limits) ?? [],
  );
  for (const line of deficits) logger.warn(line);
  const late = lateForecasts(forecasts, config.freshnessTargetMs);
  for (const line of late) logger.warn(line);
  const stopped = stoppedLines('sync', reason, streams);
  const output = config.json
    ? [
        JSON.stringify({
          ...runJson('sync', { ...summary, ok: runOk && differing === 0, streams }, code),
          ...billingJson(billing),
          ...(recordedRunId === undefined ? {} : { runId: recordedRunId }),
          ...(reconciled === undefined ? {} : { reconcile: reconciled }),
          ...(reason === undefined ? {} : { stopped: reason.stopCause }),
          ...(forecasts.length === 0 ? {} : { forecast: forecasts }),
          ...(warnings.length + deficits.length + late.length === 0
            ? {}
            : { warnings: [...warnings, ...deficits, ...late] }),
        }),
      ]
    : [
        ...[...warnings, ...deficits, ...late].map((w) => `WARNING: ${w}`),
        ...forecasts.map((f) => `forecast ${forecastLine(f)}`),
        ...refreshLines,
        ...billingLine(billing),
        ...(reconciled === undefined ? [] : formatReconcile(reconciled)),
        ...summaryLines(
          streams,
          `sync ${runOk ? 'ok' : reason === undefined ? 'FAILED' : 'STOPPED'} in ${summary.seconds.toFixed(1)} s` +
            owedVerdict(streams) +
            (differing === 0
              ? ''
              : `, but ${differing} window${differing === 1 ? '' : 's'} still differ${differing === 1 ? 's' : ''} from the API (reconcile above)`),
        ),
        ...stopped,
      ];
  return { code, output, summary: { ...summary, ok: runOk && differing === 0, streams } };
}

/** How the sync reads, from its flags: the same for every stream of the run. */
function syncSettings(config: SyncConfig): SyncSettings {
  return {
    lookbackMs: config.lookbackMs,
    startMs: config.startMs,
    batchRows: config.batchRows,
    batchBytes: config.batchBytes,
    concurrency: config.splitConcurrency,
    settleMs: config.settleMs,
    traces: config.traces,
    limits: config.limits,
    // A dry run shows the requests for a small sample, not all history.
    ...(config.dryRun ? { sampleRows: config.dryRunLimit } : {}),
  };
}

/** `--freshness-target`: the backlogs whose forecast passes it (or that never drain), as warnings. */
function lateForecasts(forecasts: readonly BacklogForecast[], targetMs: number | undefined): string[] {
  if (targetMs === undefined) return [];
  return forecasts
    .filter((f) => f.wholeInSeconds === null || f.wholeInSeconds * 1000 > targetMs)
    .map((f) => `${forecastLine(f)}: past --freshness-target ${spoken(targetMs)}`);
}

/** What the run's drains left owed, per per-event resource and project (from the warehouse's trace book). */
function owedOfStreams(
  streams: readonly StreamResult[],
): Readonly<Record<string, Readonly<Record<string, number>>>> | undefined {
  const out: Record<string, Record<string, number>> = {};
  for (const s of streams) {
    if (s.owed === undefined) continue;
    const byProject = out[s.resource] ?? {};
    byProject[s.scope] = (byProject[s.scope] ?? 0) + s.owed;
    out[s.resource] = byProject;
  }
  return Object.keys(out).length === 0 ? undefined : out;
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
async function analystStreams(
  config: SyncConfig,
  runId: string,
  runStartMs: number,
  deps: SearchDeps,
  signal: AbortSignal,
): Promise<StreamResult[]> {
  const jobs: Promise<StreamResult[]>[] = [];
  const searches = config.searches ?? [];
  if (searches.length > 0) {
    jobs.push(
      runSearches(
        {
          searches,
          project: config.project,
          projectIds: config.projectIds,
          runStartMs,
          lookbackMs: config.lookbackMs,
          runId,
          signal,
        },
        deps,
      ),
    );
  }
  if (config.aggregates === true) {
    jobs.push(
      refreshAggregates(
        {
          project: config.project,
          projectIds: config.projectIds,
          runStartMs,
          startMs: config.startMs,
          runId,
          interval: config.aggregatesInterval,
          signal,
        },
        deps,
      ),
    );
  }
  return (await Promise.all(jobs)).flat();
}

/**
 * A warehouse that is new while the state has marks (rows before the marks will never be read),
 * or a new state beside a warehouse that has data (all history is read again): usually a relative
 * path read from another working directory (cron), so say it loudly, with absolute paths.
 */
function mismatchWarnings(
  config: SyncConfig,
  before: { warehouse: boolean; state: boolean },
  doc: StateDocument,
): string[] {
  const marked = Object.entries(doc.streams)
    .filter(([, s]) => s.mark !== undefined || s.pending !== undefined)
    .map(([k]) => k);
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
