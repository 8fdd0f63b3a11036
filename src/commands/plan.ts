import type { PlanConfig } from '../config.js';
import { EXIT_CODES, exitCodeFor } from '../core/exit-codes.js';
import { planBackfill, planSync } from '../pipeline/plan.js';
import { formatPlan } from '../app/reports.js';
import { readStateDocument } from '../app/state-home.js';
import { createRuntime } from '../app/runtime.js';
import type { CommandIo } from '../app/io.js';

/**
 * `query-sync plan`: with `--from/--to` the plan of that backfill, else of the next sync from state.
 * Reads state without a lock (from the warehouse, opened read-only, or the state file) and makes
 * only count requests.
 */
export async function planCommand(config: PlanConfig, io: CommandIo): Promise<number> {
  // The plan is the output: no progress display.
  const runtime = createRuntime({ ...config, progress: 'off' }, io);
  const { clock, logger, client } = runtime;
  try {
    const state = await readStateDocument(config, logger);
    const deps = { client, state, clock, logger, limits: config.limits };
    const scope = { resources: config.resources, project: config.project, projectIds: config.projectIds };
    const plan =
      config.range === undefined
        ? await planSync({ ...scope, lookbackMs: config.lookbackMs, startMs: config.startMs, settleMs: config.settleMs, searches: config.searches, aggregates: config.aggregates, aggregatesInterval: config.aggregatesInterval, reconcile: config.reconcile ?? 'repair' }, deps)
        : await planBackfill({ ...scope, ...config.range }, deps);
    if (config.json) io.print(JSON.stringify(plan, null, 2));
    else for (const line of formatPlan(plan)) io.print(line);
    return EXIT_CODES.ok;
  } catch (error) {
    io.print(`plan FAILED: ${(error as Error).message}`);
    return exitCodeFor(error);
  } finally {
    await runtime.close().catch(() => undefined);
  }
}
