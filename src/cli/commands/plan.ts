import type { PlanConfig } from '../../config/index.js';
import { planBackfill, planStateOf, planSync, type Plan } from '../../reports/plan.js';
import { readStateDocument } from '../../run/state-home.js';
import { createRuntime } from '../../run/runtime.js';
import type { CommandIo } from '../../run/io.js';
import { EXIT_CODES, exitCodeFor } from '../../core/exit-codes.js';
import { formatPlan } from '../../reports/text.js';
import { existsSync } from 'node:fs';
import type { StateDocument } from '../../state/store.js';
import { workingPathForReading } from '../../publish/layout.js';
import { openReadOnly } from '../../run/open-destination.js';
import { owedTraces, type OwedByResource } from '../../reports/owed.js';

/** What the warehouse's trace book says is owed (undefined where it cannot be read: the state queue is shown then). */
async function owedOf(config: PlanConfig, doc: StateDocument, nowMs: number): Promise<OwedByResource | undefined> {
  if (config.destination === 'duckdb' && !existsSync(workingPathForReading(config.duckdbPath))) return undefined;
  if (!config.resources.some((r) => r.perParent !== undefined)) return undefined;
  let destination: Awaited<ReturnType<typeof openReadOnly>> | undefined;
  try {
    destination = await openReadOnly(config, () => undefined);
    return await owedTraces(destination, doc, config.resources, {
      nowMs,
      settleMs: config.settleMs,
      selection: config.traces,
      ...(config.startMs === undefined ? {} : { startMs: config.startMs }),
    });
  } catch {
    return undefined;
  } finally {
    await destination?.close().catch(() => undefined);
  }
}

/**
 * What `query-sync plan` estimates: with `--from/--to` that backfill, else the next sync from state.
 * Reads state without a lock (from the warehouse, opened read-only, or the state file) and makes
 * only count requests.
 */
async function planOf(config: PlanConfig, io: CommandIo): Promise<Plan> {
  // The plan is the output: no progress display.
  const runtime = createRuntime({ ...config, progress: 'off' }, io);
  const { clock, logger, client } = runtime;
  try {
    const state = await readStateDocument(config, logger);
    const owed = await owedOf(config, state, clock.now());
    const deps = {
      client,
      state: planStateOf(state),
      clock,
      logger,
      limits: config.limits,
      ...(owed === undefined ? {} : { owed }),
    };
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
