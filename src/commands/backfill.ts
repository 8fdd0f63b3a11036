import { RESOURCE_NAMES } from '../../connectors/index.js';
import type { BackfillConfig } from '../config.js';
import { exitCodeFor } from '../core/errors.js';
import { redact } from '../core/log.js';
import type { Destination } from '../load/destination.js';
import { formatBackfillSummary, runBackfill } from '../pipeline/backfill.js';
import { planBackfill, toProgressPlan } from '../pipeline/plan.js';
import { StateStore } from '../state/store.js';
import { openDestination } from './open-destination.js';
import { backfillProgressHooks, createRuntime } from './runtime.js';
import type { CommandIo } from './sync.js';

/**
 * `query-sync backfill --from --to`: load [from, to) in windows, resumable, alongside the sync.
 * Takes the `backfill` run lock of the state file (a sync holds `sync`, so both may run); returns
 * the exit code (0 only when every stream finished every window).
 */
export async function backfillCommand(config: BackfillConfig, io: CommandIo): Promise<number> {
  const runtime = createRuntime(config, io);
  const { clock, logger, client } = runtime;
  const secrets = [config.apiKey];
  let state: StateStore | undefined;
  let destination: Destination | undefined;
  try {
    state = await StateStore.open(config.statePath, { clock, purpose: 'backfill', lockWaitMs: config.lockWaitMs, inMemory: config.dryRun, resources: RESOURCE_NAMES });
    destination = await openDestination(config, logger, io.print);
    const options = {
      resources: config.resources,
      project: config.project,
      projectIds: config.projectIds,
      fromMs: config.range.fromMs,
      toMs: config.range.toMs,
      windowMs: config.range.windowMs,
    };
    if (runtime.showsProgress) {
      // The ETA comes from a plan: one count request per window of the resources that have one.
      const plan = await planBackfill(options, { client, state: state.document, clock, logger, limits: config.limits }).catch((error: unknown) => {
        logger.warn({ err: (error as Error).message }, 'could not plan the backfill: progress shows no ETA');
        return undefined;
      });
      if (plan !== undefined) {
        runtime.tracker.setPlan(toProgressPlan(plan));
        logger.info({ requests: plan.requestsByEndpoint, minimumSeconds: Math.round(plan.minimumSeconds) }, 'plan');
      }
    }
    runtime.tracker.markStart();
    runtime.display.start();
    const summary = await runBackfill(
      { ...options, concurrency: config.concurrency, batchRows: config.batchRows, batchBytes: config.batchBytes, signal: io.signal },
      { client, destination, state, clock, logger },
      backfillProgressHooks(runtime.tracker),
    );
    runtime.display.stop();
    for (const line of formatBackfillSummary(summary)) io.print(redact(line, secrets));
    for (const s of summary.streams) {
      logger.info(
        { resource: s.resource, project: s.scope, windows: s.windows, skipped: s.skipped, rows: s.rows, pages: s.pages, requests: s.stats.requests, seconds: s.seconds, outcome: s.outcome },
        'backfill stream done',
      );
    }
    const failed = summary.streams.find((s) => s.outcome !== 'ok');
    return failed === undefined ? 0 : exitCodeFor(failed.error);
  } catch (error) {
    io.print(redact(`backfill FAILED: ${(error as Error).message}`, secrets));
    return exitCodeFor(error);
  } finally {
    await destination?.close().catch(() => undefined);
    await runtime.close().catch(() => undefined);
    await state?.close().catch(() => undefined);
  }
}
