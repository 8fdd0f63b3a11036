import { randomUUID } from 'node:crypto';
import type { BackfillConfig } from '../config.js';
import { exitCodeFor } from '../core/errors.js';
import { redact } from '../core/log.js';
import type { Destination } from '../load/destination.js';
import { runBackfill, type BackfillStreamResult } from '../pipeline/backfill.js';
import { formatBackfillStreams, formatBackfillSummary } from './reports.js';
import { summaryLines } from './repeats.js';
import { columnsOf, recordRun, schemaChanges } from '../pipeline/run-history.js';
import { withContract } from '../normalize/contract.js';
import { runSettings } from './sync.js';
import { planBackfill, toProgressPlan } from '../pipeline/plan.js';
import type { StateStore } from '../state/store.js';
import { backfillProgressHooks, createRuntime } from './runtime.js';
import { createRunStop, isStopConsequence, stoppedLine } from './stop.js';
import { failedRunJson, openStateAndDestination, runJson, type CommandIo } from './sync.js';

/**
 * `query-sync backfill --from --to`: load [from, to) in windows, resumable, alongside the sync.
 * Takes the `backfill` run lock of the state file (a sync holds `sync`, so both may run); returns
 * the exit code (0 only when every stream finished every window).
 */
export async function backfillCommand(config: BackfillConfig, io: CommandIo): Promise<number> {
  const runtime = createRuntime(config, io);
  const { clock, logger, client } = runtime;
  const secrets = [config.apiKey];
  const stop = createRunStop({ outer: io.signal, maxRunTimeMs: config.maxRunTimeMs, logger });
  let state: StateStore | undefined;
  let destination: Destination | undefined;
  let output: string[];
  let code: number;
  try {
    ({ state, destination } = await openStateAndDestination(config, 'backfill', { clock, logger, stop }, config.json ? (line) => logger.info(line) : io.print));
    const options = {
      resources: config.resources,
      project: config.project,
      projectIds: config.projectIds,
      fromMs: config.range.fromMs,
      toMs: config.range.toMs,
      windowMs: config.range.windowMs,
    };
    if (runtime.showsProgress) {
      // The ETA comes from a plan: one count request per window of the resources that have one
      // (a spinner shows meanwhile: a long history takes a while to count).
      runtime.tracker.markPlanning();
      runtime.display.start();
      const plan = await planBackfill(options, { client, state: state.document, clock, logger, limits: config.limits }).catch((error: unknown) => {
        logger.warn({ err: (error as Error).message }, 'could not plan the backfill: progress shows no ETA');
        return undefined;
      });
      if (plan !== undefined) {
        runtime.tracker.setPlan(toProgressPlan(plan));
        logger.info({ requests: plan.requestsByEndpoint, minimumSeconds: Math.round(plan.minimumSeconds) }, 'plan');
      }
    }
    const tables = config.resources.map((r) => r.name);
    const columnsBefore = await columnsOf(destination, tables);
    // One id for the run's rows (`_run_id`) and its row in `_query_sync_runs`.
    const runId = randomUUID();
    runtime.tracker.markStart();
    runtime.display.start();
    const summary = await runBackfill(
      {
        ...options,
        // The contract is checked against the tables as they were when the run started.
        resources: config.resources.map((r) => withContract(r, columnsBefore.get(r.name), config.schemaContract)),
        concurrency: config.concurrency,
        batchRows: config.batchRows,
        batchBytes: config.batchBytes,
        signal: stop.signal,
        runId,
      },
      { client, destination, state, clock, logger },
      backfillProgressHooks(runtime.tracker),
    );
    runtime.tracker.finish();
    runtime.display.stop();
    const reason = stop.reason;
    const streams = reason === undefined ? summary.streams : summary.streams.map((s) => (isStopConsequence(s.error, stop) ? { ...s, error: reason } : s));
    if (!config.dryRun) {
      await recordRun(
        destination,
        {
          command: 'backfill',
          startedAt: summary.startedAt,
          endedAt: new Date(clock.now()).toISOString(),
          streams,
          settings: { ...runSettings(config), from: summary.from, to: summary.to, windowMs: config.range.windowMs },
          secrets,
        },
        schemaChanges(columnsBefore, await columnsOf(destination, tables)),
        logger,
        runId,
      );
    }
    // For log readers (JSON); on a terminal the summary says the same, so these stay at debug.
    const perStream = config.logFormat === 'json' ? logger.info.bind(logger) : logger.debug.bind(logger);
    for (const s of summary.streams) {
      perStream(
        { resource: s.resource, project: s.scope, windows: s.windows, skipped: s.skipped, rows: s.rows, pages: s.pages, requests: s.stats.requests, seconds: s.seconds, outcome: s.outcome },
        'backfill stream done',
      );
    }
    const failed = streams.find((s) => s.outcome !== 'ok');
    code = reason !== undefined ? exitCodeFor(reason) : failed === undefined ? 0 : exitCodeFor(failed.error);
    if (config.json) {
      const run = runJson('backfill', { ...summary, streams }, code);
      const skipped = new Map(summary.streams.map((s) => [`${s.resource} ${s.scope}`, s.skipped]));
      output = [
        JSON.stringify({
          ...run,
          from: summary.from,
          to: summary.to,
          streams: run.streams.map((s) => ({ ...s, skippedWindows: skipped.get(`${s.resource} ${s.scope}`) ?? 0 })),
          ...(reason === undefined ? {} : { stopped: reason.stopCause }),
        }),
      ];
    } else {
      const [verdict = ''] = formatBackfillSummary({ ...summary, streams: [] });
      output = summaryLines(streams, verdict, (s) => formatBackfillStreams([s as BackfillStreamResult])[0] ?? '');
      if (reason !== undefined) output.push(stoppedLine('backfill', reason, streams.reduce((n, s) => n + s.rows, 0)));
    }
  } catch (error) {
    code = exitCodeFor(error);
    output = config.json ? [JSON.stringify(failedRunJson('backfill', error, code))] : [`backfill FAILED: ${(error as Error).message}`];
  } finally {
    stop.dispose();
    // The summary is printed last: after the display's last frame, the logs, and closing files.
    runtime.tracker.finish();
    runtime.display.stop();
    runtime.repeats.flush(logger);
    await destination?.close().catch(() => undefined);
    await runtime.close().catch(() => undefined);
    await state?.close().catch(() => undefined);
  }
  for (const line of output) io.print(redact(line, secrets));
  return code;
}
