import type { BackfillConfig } from '../config/index.js';
import { runBackfill, type BackfillStreamResult } from '../sync/backfill.js';
import { engineRun } from '../sync/context.js';
import { formatBackfillStreams, formatBackfillSummary } from '../reports/text.js';
import { summaryLines } from '../reports/repeats.js';
import { RESOURCES } from '../../connectors/index.js';
import { billingJson, billingLine } from './billing.js';
import { runJson, runSettings } from '../reports/run-json.js';
import { planBackfill, planStateOf } from '../reports/plan.js';
import { backfillProgressHooks } from './runtime.js';
import type { RunContext } from './context.js';
import { logStreams, streamsEnd, type RunOutcome } from './writing.js';
import { stoppedLines } from './envelope.js';

/**
 * A backfill run's step (`query-sync backfill --from --to`, `run.backfill()`): load [from, to) in windows, resumable,
 * alongside the sync. Takes the `backfill` run lock of the state file (a sync holds `sync`, so both
 * may run); its exit code (0 only when every stream finished every window) and its summary.
 */
export async function backfillStep(run: RunContext<BackfillConfig>): Promise<RunOutcome> {
  const { config, runtime, stop, state, monitor } = run;
  const { clock, logger, client } = runtime;
  const options = {
    resources: config.resources,
    project: config.project,
    projectIds: config.projectIds,
    fromMs: config.range.fromMs,
    toMs: config.range.toMs,
    windowMs: config.range.windowMs,
  };
  // One count request per window of the resources that have one.
  const plan = await run.plan('the backfill', () =>
    planBackfill(options, { client, state: planStateOf(state.document), clock, logger, limits: config.limits }),
  );
  if (plan !== undefined)
    logger.info({ requests: plan.requestsByEndpoint, minimumSeconds: Math.round(plan.minimumSeconds) }, 'plan');
  const started = await run.begin();
  const summary = await runBackfill(
    { ...options, resources: started.resources, declared: RESOURCES },
    {
      ...engineRun(run.services, { runId: run.runId, signal: stop.signal }),
      settings: { concurrency: config.concurrency, batchRows: config.batchRows, batchBytes: config.batchBytes },
    },
    monitor.observe(backfillProgressHooks(runtime.tracker)),
  );
  const { reason, streams } = run.end(summary.streams);
  const end = streamsEnd(reason, streams);
  const { code } = end;
  const billing = run.billing();
  await run.record(started, {
    startedAt: summary.startedAt,
    streams,
    settings: { ...runSettings(config), from: summary.from, to: summary.to, windowMs: config.range.windowMs },
    end,
    ...(billing === undefined ? {} : { billing }),
  });
  logStreams(
    config,
    logger,
    'backfill stream done',
    summary.streams.map((s) => ({
      resource: s.resource,
      project: s.scope,
      windows: s.windows,
      skipped: s.skipped,
      rows: s.rows,
      pages: s.pages,
      requests: s.stats.requests,
      seconds: s.seconds,
      outcome: s.outcome,
    })),
  );
  if (config.json) {
    const run = runJson('backfill', { ...summary, streams }, code);
    const skipped = new Map(summary.streams.map((s) => [`${s.resource} ${s.scope}`, s.skipped]));
    const json = {
      ...run,
      ...billingJson(billing),
      from: summary.from,
      to: summary.to,
      streams: run.streams.map((s) => ({ ...s, skippedWindows: skipped.get(`${s.resource} ${s.scope}`) ?? 0 })),
      ...(summary.owed === undefined ? {} : { owed: summary.owed }),
      ...(reason === undefined ? {} : { stopped: reason.stopCause }),
    };
    return { code, output: [JSON.stringify(json)], summary: { ...summary, streams } };
  }
  const [verdict = ''] = formatBackfillSummary({ ...summary, streams: [] }).slice(-1);
  const output = [
    ...billingLine(billing),
    ...summaryLines(
      streams,
      verdict,
      (s, columns) => formatBackfillStreams([s as BackfillStreamResult], columns)[0] ?? '',
    ),
  ];
  output.push(...stoppedLines('backfill', reason, streams));
  return { code, output, summary: { ...summary, streams } };
}
