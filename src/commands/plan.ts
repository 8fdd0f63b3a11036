import type { PlanConfig } from '../config.js';
import { EXIT_CODES, exitCodeFor } from '../core/exit-codes.js';
import { planOf } from '../app/plan.js';
import { formatPlan } from '../app/reports.js';
import type { CommandIo } from '../app/io.js';

/**
 * `query-sync plan`: with `--from/--to` the plan of that backfill, else of the next sync from state
 * (count requests only); printed as text or `--json`.
 */
export async function planCommand(config: PlanConfig, io: CommandIo): Promise<number> {
  try {
    const plan = await planOf(config, io);
    if (config.json) io.print(JSON.stringify(plan, null, 2));
    else for (const line of formatPlan(plan)) io.print(line);
    return EXIT_CODES.ok;
  } catch (error) {
    io.print(`plan FAILED: ${(error as Error).message}`);
    return exitCodeFor(error);
  }
}
