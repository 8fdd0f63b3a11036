import { RESOURCES } from '../../connectors/index.js';
import { systemClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/log.js';
import type { ResourceDefinition } from '../../src/core/types.js';
import { DEFAULT_RATE_LIMITS } from '../../src/http/budget.js';
import { ApiClient } from '../../src/http/client.js';
import { createScheduler } from '../../src/http/scheduler.js';
import { DuckDbDestination } from '../../src/load/duckdb.js';
import { runBackfill, type BackfillSummary } from '../../src/pipeline/backfill.js';
import { StateStore } from '../../src/state/store.js';
import { dbPathOf, FAST_RETRY, statePathOf } from './harness.js';

export interface BackfillRun {
  readonly baseUrl: string;
  readonly apiKey: string;
  readonly dir: string;
  readonly fromMs: number;
  readonly toMs: number;
  readonly windowMs: number;
  readonly project?: string;
  readonly projectIds?: readonly string[];
  readonly resources?: readonly ResourceDefinition[];
  readonly concurrency?: number;
  readonly batchRows?: number;
}

/** One backfill, in-process, through the same parts the CLI wires (the `backfill` state lock). */
export async function backfillOnce(opts: BackfillRun): Promise<BackfillSummary> {
  const logger = silentLogger();
  const budget = createScheduler({ limits: { ...DEFAULT_RATE_LIMITS, maxRpm: 100_000, maxRps: 100_000 } });
  const client = new ApiClient({ baseUrl: opts.baseUrl, apiKey: opts.apiKey, projectHeader: 'X-Service-Project-Id', budget, clock: systemClock, logger, retry: FAST_RETRY });
  const destination = await DuckDbDestination.open(dbPathOf(opts.dir));
  const state = await StateStore.open(statePathOf(opts.dir), { clock: systemClock, purpose: 'backfill' });
  try {
    return await runBackfill(
      {
        resources: opts.resources ?? RESOURCES,
        project: opts.project,
        projectIds: opts.projectIds,
        fromMs: opts.fromMs,
        toMs: opts.toMs,
        windowMs: opts.windowMs,
        concurrency: opts.concurrency,
        batchRows: opts.batchRows,
      },
      { client, destination, state, clock: systemClock, logger },
    );
  } finally {
    await destination.close();
    await client.close();
    await state.close();
  }
}
