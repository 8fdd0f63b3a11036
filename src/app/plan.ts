import type { PlanConfig } from '../config.js';
import { planBackfill, planSync, type Plan } from '../pipeline/plan.js';
import { readStateDocument } from './state-home.js';
import { createRuntime } from './runtime.js';
import type { CommandIo } from './io.js';

/**
 * What `query-sync plan` estimates: with `--from/--to` that backfill, else the next sync from state.
 * Reads state without a lock (from the warehouse, opened read-only, or the state file) and makes
 * only count requests.
 */
export async function planOf(config: PlanConfig, io: CommandIo): Promise<Plan> {
  // The plan is the output: no progress display.
  const runtime = createRuntime({ ...config, progress: 'off' }, io);
  const { clock, logger, client } = runtime;
  try {
    const state = await readStateDocument(config, logger);
    const deps = { client, state, clock, logger, limits: config.limits };
    const scope = { resources: config.resources, project: config.project, projectIds: config.projectIds };
    return config.range === undefined
      ? await planSync(
          {
            ...scope,
            lookbackMs: config.lookbackMs,
            startMs: config.startMs,
            settleMs: config.settleMs,
            searches: config.searches,
            aggregates: config.aggregates,
            aggregatesInterval: config.aggregatesInterval,
            reconcile: config.reconcile ?? 'repair',
          },
          deps,
        )
      : await planBackfill({ ...scope, ...config.range }, deps);
  } finally {
    await runtime.close().catch(() => undefined);
  }
}
