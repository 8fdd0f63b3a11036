import type { SyncConfig } from '../config/index.js';
import type { RunStoppedError } from '../core/errors.js';
import type { RunEndCode } from '../core/exit-codes.js';
import type { BillingTotals, Destination } from '../load/destination.js';
import type { RunMonitor } from '../monitor/monitor.js';
import type { Plan } from '../reports/plan.js';
import type { RunRecord, SchemaChange } from '../analysts/run-history.js';
import type { StateStore } from '../state/store.js';
import type { StreamResult } from '../sync/frame.js';
import type { RunServices } from '../sync/context.js';
import type { StartedRun } from './envelope.js';
import type { RefreshOutcome } from './refresh.js';
import type { CommandIo } from './io.js';
import type { Runtime } from './runtime.js';
import type { RunStop } from './stop.js';

/**
 * What a writing run's step sees (`run.ts` `Run` is the one that exists): the run opened (runtime,
 * stop, state under the lease, the destination stack, monitoring) and the envelope's parts a step
 * calls in order: `begin` (the columns as they were, the resources under the contract), `end` (the stop mapped onto
 * the streams), `billing`, `record` (the row in `_query_sync_runs`, the schema changes told to the
 * monitor), `defineExtras` (views, dbt sources). A step says only what it reads and what it reports.
 */
export interface RunContext<C extends SyncConfig = SyncConfig> {
  readonly command: WritingCommand;
  readonly config: C;
  readonly io: CommandIo;
  /** The run's id (the one source of it): `_run_id`, `_query_sync_runs.run_id`, the pings' `rid`. */
  readonly runId: string;
  readonly runtime: Runtime;
  readonly stop: RunStop;
  readonly state: StateStore;
  /** The destination stack: the warehouse, the dry run's decorator, the read copy's publish tracking. */
  readonly destination: Destination;
  readonly monitor: RunMonitor;
  /** Whether the warehouse and the state file existed before this run opened them. */
  readonly before: { readonly warehouse: boolean; readonly state: boolean };
  /** The services the engine is given: the run's client, destination, state, clock and logger. */
  readonly services: RunServices;
  /**
   * The state and destination the walk writes: the run's own, or under `--full-refresh` the
   * shadow (marks in memory, rows into shadow tables) that `finishRefresh` swaps in at the end.
   */
  walkTarget(): Promise<{ readonly state: StateStore; readonly destination: Destination }>;
  /** `--full-refresh`'s end: each resource whose streams all finished replaces its table (none otherwise). */
  finishRefresh(finished: (resource: string) => boolean): Promise<RefreshOutcome | undefined>;
  /** A plan for the progress display's ETA (only when progress is shown). */
  plan(what: string, plan: () => Promise<Plan>): Promise<Plan | undefined>;
  /** The columns read, the resources put under the contract, the display started. */
  begin(extraTables?: readonly string[]): Promise<StartedRun>;
  /** The walk is over: the display stops, a stream stopped by the run's stop carries the stop. */
  end<S extends StreamResult>(
    streams: readonly S[],
  ): { readonly reason: RunStoppedError | undefined; readonly streams: S[] };
  /** The run's billing (read once, before its row is written), none for a dry run. */
  billing(): BillingTotals | undefined;
  /** The run's row in `_query_sync_runs` and its schema changes (told to the monitor); none for a dry run. */
  record(
    started: StartedRun,
    run: Omit<RunRecord, 'endedAt' | 'requests' | 'rateLimited' | 'end' | 'command' | 'secrets'> & {
      readonly end: RunEndCode;
    },
  ): Promise<{ readonly runId: string; readonly changes: readonly SchemaChange[] } | undefined>;
  /** The views and the dbt sources file, brought up to date (not for a dry run). */
  defineExtras(): Promise<void>;
}

/** The commands whose run writes through the API's reads (the `Run` object's writing steps). */
export type WritingCommand = 'sync' | 'backfill' | 'verify';
