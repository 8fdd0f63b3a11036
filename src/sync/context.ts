import { randomUUID } from 'node:crypto';
import type { Logger } from '../core/log.js';
import type { TraceSelection, Clock } from '../core/types.js';
import { RequestMemo } from '../extract/memo.js';
import type { ApiClient } from '../http/client.js';
import type { Destination } from '../load/destination.js';
import type { StateStore } from '../state/store.js';
import { Capabilities } from './capabilities.js';
import type { SplitLimits } from './split/plan.js';

/**
 * What the engine is given. A run's services, the same for its whole life (the run object's,
 * `run/context.ts` `RunContext.services`), and the run's context, built once per run: the services,
 * its start, id and stop (`EngineRun`, `engineRun`), and its settings, for a sync (`SyncRun`,
 * `openSyncRun`: with what its streams share) and a backfill (`BackfillRun`, `sync/backfill.ts`). A
 * stream and a walk are handed that context and only what is their own (resource, scope, window,
 * cursor, bounds).
 */

/** The services of one run: passed, never module singletons, so every part can be tested with its own. */
export interface RunServices {
  readonly client: ApiClient;
  readonly destination: Destination;
  /**
   * The run's state: each batch is written with its state changes (its book's checkpoint) in one
   * transaction where the warehouse keeps the state (`withBatch`).
   */
  readonly state: StateStore;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** How a sync run reads, the same for every stream of the run (the flags, resolved in `config/run.ts`). */
export interface SyncSettings {
  /** How far before the mark each sync re-reads, for late-indexed records (`--lookback`). */
  readonly lookbackMs: number;
  /** Oldest instant a first sync reads (`--start`). @default 0 (all history) */
  readonly startMs?: number;
  /** Rows buffered per stream before one write + checkpoint (`--batch-rows`). */
  readonly batchRows: number;
  /** Text buffered before a write (`--batch-bytes`, in bytes). */
  readonly batchBytes: number;
  /** Most sub-windows of one large window walked at once (split walks, `--concurrency`). 1 reads every window in one walk. */
  readonly concurrency: number;
  /** Stop each stream once it has written this many rows (a dry run's sample). @default all */
  readonly sampleRows?: number;
  /**
   * Re-read each window of a resource that `settles` once it is this old (`--settle`, late
   * enrichment); 0 turns the settle pass off.
   */
  readonly settleMs: number;
  /** Which events get their traces read (`--traces`, traces per event). @default 'all' */
  readonly traces?: TraceSelection;
  /** After the events walks end, traces drain this long at most. @default DEFAULT_TRACE_DRAIN_MS (engine.ts) */
  readonly traceDrainMs?: number;
  /** The configured rate limits (`--max-rps`, `--max-rpm`): splits are sized by them. */
  readonly limits: SplitLimits;
}

/** What every run of the engine has beside its services: its start, its id and its stop. */
export interface EngineRun extends RunServices {
  /** The run's start: the end of every window a sync reads (exclusive). */
  readonly runStartMs: number;
  /** `_synced_at` of this run's rows (the run's start). */
  readonly syncedAt: string;
  /** `_run_id` of every row written (the run's id in `_query_sync_runs`); none: rows carry no `_run_id`. */
  readonly runId: string | undefined;
  /** The run's stop (`--max-run-time`, a signal). */
  readonly signal: AbortSignal | undefined;
}

/** A run of the engine over `services`, starting now. */
export function engineRun(
  services: RunServices,
  run: { readonly runId?: string | undefined; readonly signal?: AbortSignal | undefined } = {},
): EngineRun {
  const { client, destination, state, clock, logger } = services;
  const runStartMs = clock.now();
  return {
    client,
    destination,
    state,
    clock,
    logger,
    runStartMs,
    syncedAt: new Date(runStartMs).toISOString(),
    runId: run.runId,
    signal: run.signal,
  };
}

/** One sync run's context: its services, its settings, its start, and the books its streams share. */
export interface SyncRun extends EngineRun {
  readonly settings: SyncSettings;
  readonly runId: string;
  /** What this server offers: one book per run, so what one stream learns the others use (and it is logged once). */
  readonly capabilities: Capabilities;
  /**
   * The run's memo of aggregate answers (`extract/memo.ts`): identical aggregate requests (split
   * planning's timeseries for events, users, conversations) go out once a run.
   */
  readonly aggregates: RequestMemo;
}

/**
 * The sync run's context, built once when the run starts reading: the run's start is taken now.
 * A dry run's sample caps the batch (a batch never holds more than the sample).
 */
export function openSyncRun(
  services: RunServices & { readonly capabilities?: Capabilities },
  settings: SyncSettings,
  /**
   * The run's id (the run object's, `run/run.ts` `Run.runId`) and its stop. A new UUID only when
   * none is given: tests and benchmarks (`bench/`) that wire the engine without a run object.
   */
  run: { readonly runId?: string; readonly signal?: AbortSignal } = {},
): SyncRun {
  return {
    ...engineRun(services, run),
    runId: run.runId ?? randomUUID(),
    settings: { ...settings, batchRows: Math.min(settings.batchRows, settings.sampleRows ?? Infinity) },
    capabilities: services.capabilities ?? new Capabilities(services),
    aggregates: new RequestMemo(services.client),
  };
}
