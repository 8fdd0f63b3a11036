import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { RESOURCES } from '../../connectors/index.js';
import type { BackfillConfig, PublishedConfig, ResetConfig, SyncConfig, VerifyConfig } from '../config/index.js';
import { systemClock } from '../core/clock.js';
import type { RunStoppedError } from '../core/errors.js';
import { exitCodeFor, type RunEndCode } from '../core/exit-codes.js';
import { silentLogger, type Logger } from '../core/log.js';
import type { BillingTotals, Destination } from '../load/destination.js';
import { DuckDbDestination } from '../load/duckdb/destination.js';
import { startRunMonitor, type RunMonitor } from '../monitor/monitor.js';
import { publishDuringRun, type RunPublishing } from '../publish/during-run.js';
import { workingPathForReading } from '../publish/layout.js';
import { partitionedTables } from '../publish/partitions.js';
import type { PublisherHooks } from '../publish/publisher.js';
import type { Plan } from '../reports/plan.js';
import { failedRunJson } from '../reports/run-json.js';
import type { RunRecord, SchemaChange } from '../analysts/run-history.js';
import type { StateStore } from '../state/store.js';
import type { StreamResult } from '../sync/frame.js';
import type { RunServices } from '../sync/context.js';
import { backfillStep } from './backfill.js';
import {
  budgetOwner,
  journalPath,
  readJournal,
  saveBudget,
  seedBudget,
  SpendJournal,
  spendChange,
} from './budget-carry.js';
import type { RunContext, WritingCommand } from './context.js';
import { billingOf, defineWarehouseExtras, endRun, recordWritingRun, startRun, type StartedRun } from './envelope.js';
import type { CommandIo } from './io.js';
import { publishStep } from './publish.js';
import { beginRefresh, finishRefresh, type RefreshOutcome } from './refresh.js';
import { resetStep } from './reset.js';
import { createRuntime, type ClientTuning, type Runtime } from './runtime.js';
import { createRunStop, type RunStop } from './stop.js';
import { syncStep } from './sync.js';
import { verifyRepairStep } from './verify.js';
import { openStateAndDestination, planForProgress, type OpensDestination, type RunOutcome } from './writing.js';

/**
 * The run object: every command that writes gets one from `openRun`, calls one step, and closes
 * it with the step's outcome (`run.close(outcome)`), then prints what `close` returns. The run
 * owns the envelope: runtime (clock, logger, the one scheduler and client, progress), the stop
 * (signals, `--max-run-time`, a lost lease), the state under the run's lease, the destination stack
 * (the warehouse, the dry run's decorator, the read copy published during the run, the full-refresh
 * shadow), the rate-limit spend carried between runs, the monitor, and the run's id, contract and
 * history row. A failure while opening or in the step becomes the command's FAILED line (or JSON).
 *
 *   sync, backfill, verify --repair   openRun(command, config, io) → run.sync() | run.backfill() | run.verifyRepair()
 *   reset                             openRun('reset', config)      → run.reset(keys)
 *   publish                           openRun('publish', config)    → run.publish(hooks)
 */

/**
 * What a run may be given besides its config: the in-process test harness's destination (made
 * by the test, not from the config: the warehouse itself, not the CLI's working file, so no read
 * copy is published from it), its client tuning (fast retries, no pacing) and a logger it reads.
 * The commands give none.
 */
export interface RunParts {
  readonly destination?: OpensDestination;
  readonly client?: ClientTuning;
  readonly logger?: Logger;
}

export function openRun(command: 'sync', config: SyncConfig, io: CommandIo, parts?: RunParts): Promise<Run<SyncConfig>>;
export function openRun(
  command: 'backfill',
  config: BackfillConfig,
  io: CommandIo,
  parts?: RunParts,
): Promise<Run<BackfillConfig>>;
export function openRun(
  command: 'verify',
  config: VerifyConfig,
  io: CommandIo,
  parts?: RunParts,
): Promise<Run<VerifyConfig>>;
export function openRun(command: 'reset', config: ResetConfig): Promise<ResetRun>;
export function openRun(command: 'publish', config: PublishedConfig): Promise<PublishRun>;
export async function openRun(
  command: WritingCommand | 'reset' | 'publish',
  config: SyncConfig | ResetConfig | PublishedConfig,
  io?: CommandIo,
  parts: RunParts = {},
): Promise<Run<SyncConfig> | ResetRun | PublishRun> {
  if (command === 'reset') return ResetRun.open(config as ResetConfig);
  if (command === 'publish') return PublishRun.open(config as PublishedConfig);
  const opened = config as SyncConfig;
  // verify --repair: the repaired rows reach the published read copy at its end, not during it (docs/analysts.md).
  return Run.open(
    command,
    command === 'verify' ? { ...opened, publishEveryMs: 0 } : opened,
    io ?? { print: () => undefined },
    parts,
  );
}

/** A writing run (sync, backfill, verify --repair: `RunContext` is what its steps see). */
export class Run<C extends SyncConfig> implements RunContext<C> {
  readonly command: WritingCommand;
  readonly config: C;
  readonly io: CommandIo;
  /**
   * The run's id, chosen once as the run is made: its rows' `_run_id`, its row in
   * `_query_sync_runs` (and its schema changes' and reconcile rows'), the pings' `rid`, `runId` of
   * the `--json` summary. Everything else is handed this one.
   */
  readonly runId: string = randomUUID();
  readonly runtime: Runtime;
  readonly stop: RunStop;
  readonly monitor: RunMonitor;
  readonly before: { readonly warehouse: boolean; readonly state: boolean };
  private readonly owner: string;
  private opened: { readonly state: StateStore; readonly destination: Destination } | undefined;
  private publishing: RunPublishing | undefined;
  private journal: SpendJournal | undefined;
  /** The full-refresh shadow, once the walk asked for it. */
  private shadow: { readonly state: StateStore; readonly destination: Destination } | undefined;
  /** Why the run could not open: its step then only reports it. */
  private openFailure: { readonly error: unknown } | undefined;

  private readonly parts: RunParts;

  private constructor(command: WritingCommand, config: C, io: CommandIo, parts: RunParts) {
    this.parts = parts;
    this.command = command;
    this.config = config;
    this.io = io;
    // Before the run creates them: a new warehouse or state file beside an old one is worth a warning.
    this.before = {
      warehouse: config.destination !== 'duckdb' || existsSync(workingPathForReading(config.duckdbPath)),
      state: existsSync(config.statePath),
    };
    this.runtime = createRuntime(config, io, parts.client, parts.logger);
    const { clock, logger } = this.runtime;
    this.stop = createRunStop({ outer: io.signal, maxRunTimeMs: config.maxRunTimeMs, logger });
    this.owner = budgetOwner(config.baseUrl, config.apiKey);
    // Metrics, pings and notifications: started first (the start ping), told the end last. A dry run
    // (BigQuery: prints what it would send) writes nothing, and is no scheduled run to report.
    this.monitor = startRunMonitor({
      command,
      runId: this.runId,
      settings: config.dryRun ? undefined : config.monitor,
      everyMs: config.publishEveryMs ?? 0,
      ...(config.destination === 'duckdb' && !config.dryRun ? { publishedPath: config.duckdbPath } : {}),
      resources: config.resources,
      limits: config.limits,
      secrets: [config.apiKey],
      clock,
      logger,
    });
  }

  static async open<C extends SyncConfig>(
    command: WritingCommand,
    config: C,
    io: CommandIo,
    parts: RunParts = {},
  ): Promise<Run<C>> {
    const run = new Run(command, config, io, parts);
    try {
      await run.openStack();
    } catch (error) {
      run.openFailure = { error };
    }
    return run;
  }

  /** State under the lease, destination, the spend carried from earlier runs, the read copy's publishing. */
  private async openStack(): Promise<void> {
    const { config, runtime, stop } = this;
    const { clock, logger } = runtime;
    const purpose = this.command === 'sync' ? 'sync' : 'backfill';
    const print = config.json ? (line: string) => logger.info(line) : this.io.print;
    const made = this.parts.destination;
    const opened =
      made === undefined
        ? await openStateAndDestination(config, purpose, { clock, logger, stop }, print)
        : await openStateAndDestination(config, purpose, { clock, logger, stop }, print, { open: made });
    this.opened = opened;
    const { state, destination } = opened;
    // The previous runs' requests still in the rate-limit windows count against this run's: those
    // committed in state and, from a run killed after its last commit, those in the journal.
    const journalFile = journalPath(config.statePath);
    const journaled = config.dryRun ? [] : readJournal(journalFile, clock.now());
    seedBudget(state.document, runtime.budget, this.owner, logger, journaled);
    if (!config.dryRun) {
      // From now on the spend is committed with every batch, and each request journaled as it leaves.
      const { budget } = runtime;
      const owner = this.owner;
      state.withEachCommit(() => spendChange(budget, owner, clock.now()));
      try {
        const journal = new SpendJournal(journalFile, owner, journaled);
        this.journal = journal;
        runtime.recordRequests((endpoint, atMs) => journal.record(endpoint, atMs));
      } catch (error) {
        logger.warn(
          { err: (error as Error).message },
          `could not open the request journal ${journalFile}: a run started right after this one is killed may draw 429s`,
        );
      }
    }
    this.monitor.attach({ state, budget: runtime.budget });
    // DuckDB: the read copy users open is published during the run and at its end (docs/analysts.md),
    // from the working file the config names (a destination handed in has no read copy).
    this.publishing =
      config.dryRun || made !== undefined
        ? undefined
        : publishDuringRun(destination, {
            path: config.duckdbPath,
            everyMs: config.publishEveryMs ?? 0,
            clock,
            logger,
            partitioned: partitionedTables(RESOURCES),
          });
  }

  get state(): StateStore {
    return this.stack().state;
  }

  get destination(): Destination {
    return this.publishing?.destination ?? this.stack().destination;
  }

  get services(): RunServices {
    const { client, clock, logger } = this.runtime;
    return { client, destination: this.destination, state: this.state, clock, logger };
  }

  private stack(): { readonly state: StateStore; readonly destination: Destination } {
    if (this.opened === undefined) throw new Error('the run is not open');
    return this.opened;
  }

  /** `query-sync sync`. */
  sync(this: Run<SyncConfig>): Promise<RunOutcome> {
    return this.step(() => syncStep(this));
  }

  /** `query-sync backfill`. */
  backfill(this: Run<BackfillConfig>): Promise<RunOutcome> {
    return this.step(() => backfillStep(this));
  }

  /** `query-sync verify --repair` (the read copy is published at its end only). */
  verifyRepair(this: Run<VerifyConfig>): Promise<RunOutcome> {
    return this.step(() => verifyRepairStep(this));
  }

  /** Run a step on the open run; a failure (or one while opening) becomes the run's FAILED outcome. */
  async step(body: () => Promise<RunOutcome>): Promise<RunOutcome> {
    try {
      if (this.openFailure !== undefined) throw this.openFailure.error;
      return await body();
    } catch (error) {
      const code = exitCodeFor(error);
      this.monitor.failed(error);
      return {
        code,
        output: this.config.json
          ? [JSON.stringify(failedRunJson(this.command, error, code))]
          : [`${this.command} FAILED: ${(error as Error).message}`],
      };
    }
  }

  async walkTarget(): Promise<{ readonly state: StateStore; readonly destination: Destination }> {
    if (this.config.fullRefresh !== true) return { state: this.state, destination: this.destination };
    this.shadow ??= await beginRefresh(this.config.resources, {
      state: this.state,
      destination: this.destination,
      clock: this.runtime.clock,
    });
    return this.shadow;
  }

  async finishRefresh(finished: (resource: string) => boolean): Promise<RefreshOutcome | undefined> {
    if (this.shadow === undefined) return undefined;
    return finishRefresh(this.config.resources, finished, {
      destination: this.destination,
      memory: this.shadow.state,
      state: this.state,
      logger: this.runtime.logger,
    });
  }

  plan(what: string, plan: () => Promise<Plan>): Promise<Plan | undefined> {
    return planForProgress(this.runtime, what, plan);
  }

  begin(extraTables: readonly string[] = []): Promise<StartedRun> {
    return startRun(this.runtime, this.destination, this.config, extraTables);
  }

  end<S extends StreamResult>(
    streams: readonly S[],
  ): { readonly reason: RunStoppedError | undefined; readonly streams: S[] } {
    return endRun(this.runtime, this.stop, streams);
  }

  billing(): BillingTotals | undefined {
    return billingOf(this.config, this.destination);
  }

  async record(
    started: StartedRun,
    run: Omit<RunRecord, 'endedAt' | 'requests' | 'rateLimited' | 'end' | 'command' | 'secrets'> & {
      readonly end: RunEndCode;
    },
  ): Promise<{ readonly runId: string; readonly changes: readonly SchemaChange[] } | undefined> {
    const recorded = await recordWritingRun(
      this.config,
      this.destination,
      started,
      this.runId,
      { ...run, command: this.command, secrets: [this.config.apiKey] },
      this.runtime,
    );
    if (recorded !== undefined) this.monitor.schemaChanged(recorded.changes);
    return recorded;
  }

  defineExtras(): Promise<void> {
    return defineWarehouseExtras(this.config, this.destination, this.runtime.logger);
  }

  /**
   * Close everything the run opened (the read copy published last, the spend kept in state, the
   * lease released), tell the monitor the end, and return the outcome for the command to print
   * last: the live display's last frame, the per-stream log lines and the repeated errors' counts
   * come before it.
   */
  async close(outcome: RunOutcome): Promise<RunOutcome> {
    const { runtime } = this;
    const { clock, logger } = runtime;
    this.stop.dispose();
    runtime.tracker.finish();
    runtime.display.stop();
    await this.publishing?.finish();
    runtime.repeats.flush(logger);
    const state = this.opened?.state;
    if (state !== undefined) {
      await saveBudget(state, runtime.budget, this.owner, clock.now()).catch((error: unknown) =>
        logger.warn(
          { err: (error as Error).message },
          "could not keep this run's rate-limit spend in state: a run starting within a minute may draw 429s",
        ),
      );
    }
    runtime.recordRequests(undefined);
    this.journal?.close();
    await this.opened?.destination.close().catch(() => undefined);
    await runtime.close().catch(() => undefined);
    await state?.close().catch(() => undefined);
    await this.monitor.finish(outcome);
    return outcome;
  }
}

/** A failure as a command's one line, for the runs that have no JSON form. */
function failedLine(command: string, error: unknown): RunOutcome {
  return { code: exitCodeFor(error), output: [`${command} FAILED: ${(error as Error).message}`] };
}

/**
 * `reset`'s run: the state under the `sync` lease and the destination, opened as a writing run
 * opens them (`openStateAndDestination`), except that reset never creates a warehouse, reads no
 * API and is not monitored.
 */
export class ResetRun {
  readonly config: ResetConfig;
  readonly stop: RunStop;
  private opened: { readonly state: StateStore; readonly destination: Destination | undefined } | undefined;
  private openFailure: { readonly error: unknown } | undefined;

  private constructor(config: ResetConfig) {
    this.config = config;
    this.stop = createRunStop({ logger: silentLogger() });
  }

  static async open(config: ResetConfig): Promise<ResetRun> {
    const run = new ResetRun(config);
    try {
      run.opened = await openStateAndDestination(
        config,
        'sync',
        { clock: systemClock, logger: silentLogger(), stop: run.stop },
        () => undefined,
        { existingOnly: true },
      );
    } catch (error) {
      run.openFailure = { error };
    }
    return run;
  }

  /** Forget the marks and checkpoints of `keys` (and the trace reads they name), then publish the read copy. */
  async reset(keys: readonly string[]): Promise<RunOutcome> {
    try {
      if (this.openFailure !== undefined) throw this.openFailure.error;
      if (this.opened === undefined) throw new Error('the run is not open');
      return await resetStep({ ...this.opened, stop: this.stop, config: this.config }, keys);
    } catch (error) {
      return failedLine('reset', error);
    }
  }

  /** Release the lease and close the warehouse; a state that cannot be closed fails the reset. */
  async close(outcome: RunOutcome): Promise<RunOutcome> {
    this.stop.dispose();
    await this.opened?.destination?.close().catch(() => undefined);
    try {
      await this.opened?.state.close();
    } catch (error) {
      return failedLine('reset', error);
    }
    return outcome;
  }
}

/** `publish`'s run: the working file opened read only (a sync holding it publishes itself). */
export class PublishRun {
  readonly config: PublishedConfig;
  private db: DuckDbDestination | undefined;
  private openFailure: { readonly error: unknown } | undefined;

  private constructor(config: PublishedConfig) {
    this.config = config;
  }

  static async open(config: PublishedConfig): Promise<PublishRun> {
    const run = new PublishRun(config);
    try {
      run.db = await DuckDbDestination.open(workingPathForReading(config.duckdbPath), {
        readOnly: true,
        memoryLimitBytes: config.duckdbMemoryLimitBytes,
      });
    } catch (error) {
      run.openFailure = { error };
    }
    return run;
  }

  /** Publish the read copy and its Parquet set now. */
  async publish(hooks: PublisherHooks = {}): Promise<RunOutcome> {
    try {
      if (this.openFailure !== undefined) throw this.openFailure.error;
      if (this.db === undefined) throw new Error('the run is not open');
      return await publishStep(this.config, this.db, hooks);
    } catch (error) {
      return failedLine('publish', error);
    }
  }

  async close(outcome: RunOutcome): Promise<RunOutcome> {
    await this.db?.close().catch(() => undefined);
    return outcome;
  }
}
