import type { SyncConfig } from '../config.js';
import { exitCodeFor } from '../core/errors.js';
import { redact } from '../core/log.js';
import type { Clock } from '../core/types.js';
import { planSync, toProgressPlan } from '../pipeline/plan.js';
import { formatSummary, runSync } from '../pipeline/run.js';
import { StateStore } from '../state/store.js';
import { openDestination } from './open-destination.js';
import { createRuntime, syncProgressHooks } from './runtime.js';

export interface CommandIo {
  /** Command output (summaries): stdout by default. Logs go to stderr. */
  readonly print: (line: string) => void;
  readonly clock?: Clock;
  readonly signal?: AbortSignal;
}

/** `query-sync sync`: returns the exit code (0 only when every stream synced). */
export async function syncCommand(config: SyncConfig, io: CommandIo): Promise<number> {
  const runtime = createRuntime(config, io);
  const { clock, logger, client } = runtime;
  let state: StateStore | undefined;
  let destination: Awaited<ReturnType<typeof openDestination>> | undefined;
  try {
    state = await StateStore.open(config.statePath, { clock, purpose: 'sync', lockWaitMs: config.lockWaitMs, inMemory: config.dryRun });
    destination = await openDestination(config, logger, io.print);
    if (runtime.showsProgress) {
      // The ETA comes from a plan: one count request per stream that has a count endpoint.
      const plan = await planSync(config, { client, state: state.document, clock, logger, limits: config.limits }).catch((error: unknown) => {
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
        settleMs: config.settleMs,
        children: config.traces,
        // A dry run shows the requests for a small sample, not all history.
        ...(config.dryRun ? { sampleRows: config.dryRunLimit } : {}),
        signal: io.signal,
      },
      { client, destination, state, clock, logger },
      syncProgressHooks(runtime.tracker),
    );
    runtime.display.stop();
    for (const line of formatSummary(summary)) io.print(redact(line, [config.apiKey]));
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
    await destination?.close().catch(() => undefined);
    await runtime.close().catch(() => undefined);
    await state?.close().catch(() => undefined);
  }
}
