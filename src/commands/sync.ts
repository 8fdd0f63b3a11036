import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { SyncConfig } from '../config.js';
import { exitCodeFor, RunStoppedError } from '../core/errors.js';
import { redact, type Logger } from '../core/log.js';
import type { Clock } from '../core/types.js';
import { planSync, toProgressPlan } from '../pipeline/plan.js';
import { formatSummary, runSync } from '../pipeline/run.js';
import type { Destination } from '../load/destination.js';
import { StateStore, type StateDocument, type StateStoreOptions } from '../state/store.js';
import { assertCanRefresh, finishRefresh, refreshState, shadowTable, ShadowDestination } from './refresh.js';
import { openDestination } from './open-destination.js';
import { createRuntime, syncProgressHooks } from './runtime.js';
import { createRunStop, isStopConsequence, stoppedLine, type RunStop } from './stop.js';

export interface CommandIo {
  /** Command output (summaries): stdout by default. Logs go to stderr. */
  readonly print: (line: string) => void;
  readonly clock?: Clock;
  readonly signal?: AbortSignal;
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
      `the state ${resolve(config.statePath)} is new, but the warehouse ${resolve(config.duckdbPath)} exists: this sync reads all history again ` +
        `(safe: rows merge on their key, but slow). Wrong --state (relative paths follow the working directory)?`,
    );
  }
  return out;
}

/** Lease events of a run: a take-over is logged; a lost lease stops the run (another run writes now). */
export function leaseHooks(logger: Logger, stop: RunStop): Pick<StateStoreOptions, 'onLockTakeOver' | 'onLockLost'> {
  return {
    onLockTakeOver: (message) => logger.warn(message),
    onLockLost: (error) => stop.stop(new RunStoppedError(error.message, 'lease-lost', { cause: error })),
  };
}

/** `query-sync sync`: returns the exit code (0 only when every stream synced). */
export async function syncCommand(config: SyncConfig, io: CommandIo): Promise<number> {
  const runtime = createRuntime(config, io);
  const { clock, logger, client } = runtime;
  const stop = createRunStop({ outer: io.signal, maxRunTimeMs: config.maxRunTimeMs, logger });
  let state: StateStore | undefined;
  let destination: Awaited<ReturnType<typeof openDestination>> | undefined;
  try {
    const before = { warehouse: config.destination !== 'duckdb' || existsSync(config.duckdbPath), state: existsSync(config.statePath) };
    state = await StateStore.open(config.statePath, {
      clock,
      purpose: 'sync',
      lockWaitMs: config.lockWaitMs,
      inMemory: config.dryRun,
      ...leaseHooks(logger, stop),
    });
    destination = await openDestination(config, logger, io.print);
    for (const warning of mismatchWarnings(config, before, state.document)) {
      logger.warn(warning);
      io.print(`WARNING: ${warning}`);
    }
    let runState = state;
    let runDestination: Destination = destination;
    if (config.fullRefresh === true) {
      assertCanRefresh(destination);
      for (const r of config.resources) await destination.dropTable?.(shadowTable(r.name));
      runState = refreshState(state.document, clock);
      runDestination = new ShadowDestination(destination);
    }
    if (runtime.showsProgress) {
      // The ETA comes from a plan: one count request per stream that has a count endpoint.
      const plan = await planSync(config, { client, state: runState.document, clock, logger, limits: config.limits }).catch((error: unknown) => {
        logger.warn({ err: (error as Error).message }, 'could not plan the run: progress shows no ETA');
        return undefined;
      });
      if (plan !== undefined) runtime.tracker.setPlan(toProgressPlan(plan));
    }
    runtime.tracker.markStart();
    runtime.display.start();
    const summary = await runSync(
      {
        resources: config.resources,
        project: config.project,
        projectIds: config.projectIds,
        lookbackMs: config.lookbackMs,
        startMs: config.startMs,
        batchRows: config.batchRows,
        // A dry run shows the requests for a small sample, not all history.
        ...(config.dryRun ? { sampleRows: config.dryRunLimit } : {}),
        signal: stop.signal,
      },
      { client, destination: runDestination, state: runState, clock, logger },
      syncProgressHooks(runtime.tracker),
    );
    runtime.display.stop();
    const reason = stop.reason;
    const streams = reason === undefined ? summary.streams : summary.streams.map((s) => (isStopConsequence(s.error, stop) ? { ...s, error: reason } : s));
    for (const line of formatSummary({ ...summary, streams })) io.print(redact(line, [config.apiKey]));
    if (config.fullRefresh === true) {
      const finished = (resource: string): boolean =>
        reason === undefined && streams.some((s) => s.resource === resource) && streams.every((s) => s.resource !== resource || s.outcome === 'ok');
      const outcome = await finishRefresh(config.resources, finished, { destination, memory: runState, state, logger });
      if (outcome.replaced.length > 0) io.print(`full refresh: replaced ${outcome.replaced.join(', ')} (each in one transaction) and their marks`);
      if (outcome.keptAsWas.length > 0) io.print(`full refresh: ${outcome.keptAsWas.join(', ')} left as they were (a stream did not finish); run it again`);
    }
    if (reason !== undefined) {
      io.print(stoppedLine('sync', reason, streams.reduce((n, s) => n + s.rows, 0)));
      return exitCodeFor(reason);
    }
    for (const s of summary.streams) {
      logger.info(
        { resource: s.resource, project: s.scope, rows: s.rows, pages: s.pages, requests: s.stats.requests, retries: s.stats.retries, seconds: s.seconds, outcome: s.outcome },
        'stream done',
      );
    }
    const failed = summary.streams.find((s) => s.outcome !== 'ok');
    return failed === undefined ? 0 : exitCodeFor(failed.error);
  } catch (error) {
    io.print(redact(`sync FAILED: ${(error as Error).message}`, [config.apiKey]));
    return exitCodeFor(error);
  } finally {
    stop.dispose();
    await destination?.close().catch(() => undefined);
    await runtime.close().catch(() => undefined);
    await state?.close().catch(() => undefined);
  }
}
