import { randomUUID } from 'node:crypto';
import type { BackfillConfig } from '../config.js';
import { runBackfill, type BackfillStreamResult } from '../pipeline/backfill.js';
import { formatBackfillStreams, formatBackfillSummary } from '../app/reports.js';
import { summaryLines } from '../app/repeats.js';
import { billingJson, billingLine } from '../app/billing.js';
import { columnsOf, recordRun, schemaChanges } from '../pipeline/run-history.js';
import { withContract } from '../normalize/contract.js';
import { runJson, runSettings } from '../app/run-json.js';
import { planBackfill } from '../pipeline/plan.js';
import { backfillProgressHooks } from '../app/runtime.js';
import { isStopConsequence, stoppedLine } from '../app/stop.js';
import type { CommandIo } from '../app/io.js';
import { logStreams, planForProgress, runExitCode, withWritingRun } from '../app/writing-run.js';

/**
 * `query-sync backfill --from --to`: load [from, to) in windows, resumable, alongside the sync.
 * Takes the `backfill` run lock of the state file (a sync holds `sync`, so both may run); returns
 * the exit code (0 only when every stream finished every window).
 */
export async function backfillCommand(config: BackfillConfig, io: CommandIo): Promise<number> {
  return withWritingRun('backfill', config, io, async ({ runtime, stop, state, destination }) => {
    const { clock, logger, client } = runtime;
    const secrets = [config.apiKey];
    const options = {
      resources: config.resources,
      project: config.project,
      projectIds: config.projectIds,
      fromMs: config.range.fromMs,
      toMs: config.range.toMs,
      windowMs: config.range.windowMs,
    };
    // One count request per window of the resources that have one.
    const plan = await planForProgress(runtime, 'the backfill', () => planBackfill(options, { client, state: state.document, clock, logger, limits: config.limits }));
    if (plan !== undefined) logger.info({ requests: plan.requestsByEndpoint, minimumSeconds: Math.round(plan.minimumSeconds) }, 'plan');
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
    // Read once, before the run's own history row is written, so the row and the summary agree.
    const billing = config.dryRun ? undefined : destination.billing?.();
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
          ...(billing === undefined ? {} : { billing }),
        },
        schemaChanges(columnsBefore, await columnsOf(destination, tables)),
        logger,
        runId,
      );
    }
    logStreams(config, logger, 'backfill stream done', summary.streams.map((s) => ({ resource: s.resource, project: s.scope, windows: s.windows, skipped: s.skipped, rows: s.rows, pages: s.pages, requests: s.stats.requests, seconds: s.seconds, outcome: s.outcome })));
    const code = runExitCode(reason, streams);
    if (config.json) {
      const run = runJson('backfill', { ...summary, streams }, code);
      const skipped = new Map(summary.streams.map((s) => [`${s.resource} ${s.scope}`, s.skipped]));
      const json = {
        ...run,
        ...billingJson(billing),
        from: summary.from,
        to: summary.to,
        streams: run.streams.map((s) => ({ ...s, skippedWindows: skipped.get(`${s.resource} ${s.scope}`) ?? 0 })),
        ...(reason === undefined ? {} : { stopped: reason.stopCause }),
      };
      return { code, output: [JSON.stringify(json)] };
    }
    const [verdict = ''] = formatBackfillSummary({ ...summary, streams: [] });
    const output = [...billingLine(billing), ...summaryLines(streams, verdict, (s, columns) => formatBackfillStreams([s as BackfillStreamResult], columns)[0] ?? '')];
    if (reason !== undefined) output.push(stoppedLine('backfill', reason, streams.reduce((n, s) => n + s.rows, 0)));
    return { code, output };
  });
}
