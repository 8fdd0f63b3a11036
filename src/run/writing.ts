import { existsSync } from 'node:fs';
import { RESOURCE_NAMES } from '../../connectors/index.js';
import type { SyncConfig } from '../config/index.js';
import { RunStoppedError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Clock } from '../core/types.js';
import { toProgressPlan, type Plan } from '../reports/plan.js';
import type { StreamResult } from '../sync/frame.js';
import type { RunSummary } from '../sync/engine.js';
import type { BackfillSummary } from '../sync/backfill.js';
import type { Destination } from '../load/destination.js';
import { StateStore, type StateStoreOptions } from '../state/store.js';
import { workingPathForReading } from '../publish/layout.js';
import { keepStateIn } from './state-home.js';
import { openDestination, type DestinationConfig } from './open-destination.js';
import type { CommandIo } from './io.js';
import { runEndCode, type RunEndCode } from '../core/exit-codes.js';
import type { Runtime } from './runtime.js';
import type { RunStop } from './stop.js';

/**
 * The parts of a writing run's shell the run object (`run.ts` `Run`) is made of: the outcome a
 * command prints last, the plan for the progress display, the per-stream log lines, the exit code
 * of a walk, and the state and destination opened under the run's lease.
 */

/** The exit code and the lines printed last (the summary). */
export interface RunOutcome {
  readonly code: number;
  readonly output: readonly string[];
  /**
   * A sync's or a backfill's streams as the run reports them (after the stop was mapped onto them;
   * `ok` as `--json` says it: for a sync, every stream ok and no window left differing), what
   * `output` is made from. None when the run failed before its walk, and for the other commands.
   */
  readonly summary?: RunSummary | BackfillSummary;
}

/** The shell's last step: print the summary (after every file is closed) and give the exit code. */
export function printOutcome(io: Pick<CommandIo, 'print'>, outcome: RunOutcome): number {
  for (const line of outcome.output) io.print(line);
  return outcome.code;
}

/**
 * When progress is shown, its ETA comes from a plan (count requests): a spinner shows meanwhile (a
 * long history takes a while to count); a plan that fails leaves the progress without an ETA.
 */
export async function planForProgress(
  runtime: Runtime,
  what: string,
  plan: () => Promise<Plan>,
): Promise<Plan | undefined> {
  if (!runtime.showsProgress) return undefined;
  runtime.tracker.markPlanning();
  runtime.display.start();
  const made = await plan().catch((error: unknown) => {
    runtime.logger.warn({ err: (error as Error).message }, `could not plan ${what}: progress shows no ETA`);
    return undefined;
  });
  if (made !== undefined) runtime.tracker.setPlan(toProgressPlan(made));
  return made;
}

/** One line per stream for log readers (JSON); on a terminal the summary says the same, so these stay at debug. */
export function logStreams(
  config: Pick<SyncConfig, 'logFormat'>,
  logger: Logger,
  message: string,
  streams: readonly Record<string, unknown>[],
): void {
  const perStream = config.logFormat === 'json' ? logger.info.bind(logger) : logger.debug.bind(logger);
  for (const s of streams) perStream(s, message);
}

/**
 * The exit code of a walk's streams and the outcome its history row records (`runEndCode` in
 * `core/exit-codes.ts`: stopped, else the first failed stream, else a difference left, else ok).
 */
export function streamsEnd(
  reason: RunStoppedError | undefined,
  streams: readonly StreamResult[],
  mismatch = false,
): RunEndCode {
  return runEndCode({ stop: reason, failed: streams.find((s) => s.outcome !== 'ok'), mismatch });
}

/**
 * The state of a run that writes (sync, backfill, verify --repair, reset), under its lease: a
 * take-over is logged; a lost lease stops the run (another run writes now). A dry run keeps
 * changes in memory. The key (when the command has one) is taken out of whatever state holds.
 */
function openRunState(
  config: Pick<SyncConfig, 'statePath' | 'lockWaitMs' | 'dryRun'> & { readonly apiKey?: string },
  purpose: StateStoreOptions['purpose'],
  { clock, logger, stop }: { readonly clock: Clock; readonly logger: Logger; readonly stop: RunStop },
  destination?: Destination,
): Promise<StateStore> {
  return StateStore.open(config.statePath, {
    clock,
    purpose,
    // BigQuery keeps the lease in the dataset; a dry run sends nothing, so it keeps it in a file.
    ...(destination?.can.leases === undefined || config.dryRun ? {} : { leases: destination.can.leases }),
    lockWaitMs: config.lockWaitMs,
    inMemory: config.dryRun,
    resources: RESOURCE_NAMES,
    secrets: config.apiKey === undefined ? [] : [config.apiKey],
    onLockTakeOver: (message) => logger.warn(message),
    onNote: (message) => logger.info(message),
    onLockLost: (error) => stop.stop(new RunStoppedError(error.message, 'lease-lost', { cause: error })),
  });
}

/** The state and destination of a writing run; `destination` is absent only for `existingOnly`, when there is no warehouse yet. */
export interface OpenedStateAndDestination<D extends Destination | undefined = Destination> {
  readonly state: StateStore;
  readonly destination: D;
}

/**
 * The run's state under its lease, and the destination, the state then kept in the warehouse. The
 * lease comes first where it lives beside the state file (DuckDB: a second run is told about the
 * lease, not about a busy DuckDB file); BigQuery's lease is in the dataset, so the destination
 * (which sends nothing when made) comes first there. `existingOnly` (reset, which never creates a
 * warehouse): no DuckDB working file yet means no destination, and the state file is all there is.
 */
export async function openStateAndDestination(
  config: OpenConfig,
  purpose: StateStoreOptions['purpose'],
  deps: OpenDeps,
  print: (line: string) => void,
): Promise<OpenedStateAndDestination>;
export async function openStateAndDestination(
  config: OpenConfig,
  purpose: StateStoreOptions['purpose'],
  deps: OpenDeps,
  print: (line: string) => void,
  options: { readonly existingOnly: true },
): Promise<OpenedStateAndDestination<Destination | undefined>>;
export async function openStateAndDestination(
  config: OpenConfig,
  purpose: StateStoreOptions['purpose'],
  deps: OpenDeps,
  print: (line: string) => void,
  options: { readonly open: OpensDestination },
): Promise<OpenedStateAndDestination>;
export async function openStateAndDestination(
  config: OpenConfig,
  purpose: StateStoreOptions['purpose'],
  deps: OpenDeps,
  print: (line: string) => void,
  options: { readonly existingOnly?: boolean; readonly open?: OpensDestination } = {},
): Promise<OpenedStateAndDestination<Destination | undefined>> {
  let state: StateStore | undefined;
  let destination: Destination | undefined;
  try {
    if (options.open?.first ?? config.destination === 'bigquery') {
      destination = await (options.open?.destination ?? (() => openDestination(config, deps.logger, print)))();
      state = await openRunState(config, purpose, deps, destination);
    } else {
      state = await openRunState(config, purpose, deps);
      if (options.existingOnly !== true || existsSync(workingPathForReading(config.duckdbPath))) {
        destination = await (
          options.open?.destination ?? (() => openDestination(config, deps.logger, print, { takeOver: true }))
        )();
      }
    }
    if (destination !== undefined) await keepStateIn(state, destination);
    return { state, destination };
  } catch (error) {
    await destination?.close().catch(() => undefined);
    await state?.close().catch(() => undefined);
    throw error;
  }
}

type OpenConfig = Pick<SyncConfig, 'statePath' | 'lockWaitMs' | 'dryRun'> & {
  readonly apiKey?: string;
} & DestinationConfig;
/**
 * A destination made otherwise than from the config (the in-process test harness's), and whether
 * it comes before the state's lease (it keeps the lease itself, as BigQuery does) or after it.
 */
export interface OpensDestination {
  readonly destination: () => Promise<Destination>;
  readonly first: boolean;
}

type OpenDeps = { readonly clock: Clock; readonly logger: Logger; readonly stop: RunStop };
