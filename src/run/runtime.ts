import type { SyncConfig } from '../config/index.js';
import { systemClock } from '../core/clock.js';
import { createLogger, type Logger } from '../core/log.js';
import type { Clock } from '../core/types.js';
import type { RateLimits, RequestBudget } from '../http/scheduler/budget.js';
import { ApiClient, type ApiClientOptions } from '../http/client.js';
import { observedBudget } from '../http/scheduler/budget-observer.js';
import { createScheduler } from '../http/scheduler/scheduler.js';
import type { SchedulerOptions } from '../http/scheduler/options.js';
import type { BackfillHooks } from '../sync/backfill.js';
import { ProgressTracker } from '../reports/progress.js';
import type { RunHooks } from '../sync/engine.js';
import {
  LogProgressDisplay,
  NO_PROGRESS,
  TtyProgressDisplay,
  type ProgressDisplay,
} from '../reports/progress-display.js';
import { RepeatedLogs } from '../reports/repeats.js';
import type { CommandIo } from './io.js';

/**
 * What every command that reads the API wires the same way: clock, logger, the run's one scheduler,
 * the client, and the progress tracker with its display.
 */
export interface Runtime {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly budget: RequestBudget;
  readonly client: ApiClient;
  readonly tracker: ProgressTracker;
  readonly display: ProgressDisplay;
  /** Whether progress is shown at all (so a plan for the ETA is worth its count requests). */
  readonly showsProgress: boolean;
  /** Repeated warnings and errors, held back as they come: `flush` logs one line each with a count. */
  readonly repeats: RepeatedLogs;
  /** Tell `hook` of every request as it leaves (a writing run's spend journal); `undefined` stops. */
  recordRequests(hook: ((endpoint: string, atMs: number) => void) | undefined): void;
  close(): Promise<void>;
}

/**
 * What the commands leave at the client's defaults, and the in-process test harness sets: fast
 * retries, and the scheduler's limits (none to speak of) apart from the configured ones, which still
 * size the splits, the forecasts and the progress (a test is not paced unless pacing is its point).
 */
export type ClientTuning = Pick<ApiClientOptions, 'retry' | 'longWaitMs'> & { readonly limits?: RateLimits };

export function createRuntime(
  config: SyncConfig,
  io: CommandIo,
  tuning: ClientTuning = {},
  /** The run's logger when not made from the config (a test that reads the lines). */
  given?: Logger,
): Runtime {
  const clock = io.clock ?? systemClock;
  const tracker = new ProgressTracker(clock, config.limits);
  tracker.setOrder(config.resources.map((r) => r.name));
  const tty = config.progress === 'tty' ? new TtyProgressDisplay(tracker) : undefined;
  const repeats = new RepeatedLogs();
  const logger =
    given ??
    createLogger({
      level: config.logLevel,
      format: config.logFormat,
      secrets: [config.apiKey],
      admit: repeats.admit,
      // On a TTY, log lines go through the live display, which prints them above its lines.
      ...(tty === undefined ? {} : { destination: tty.logStream }),
    });
  let requestHook: ((endpoint: string, atMs: number) => void) | undefined;
  let display: ProgressDisplay = NO_PROGRESS;
  if (tty !== undefined) display = tty;
  else if (config.progress === 'log' && logger.isLevelEnabled('info'))
    display = new LogProgressDisplay(tracker, logger, config.progressIntervalMs);
  const { budget, client } = connectApi({
    baseUrl: config.baseUrl,
    apiKey: config.apiKey,
    projectHeader: config.projectHeader,
    limits: config.limits,
    clock,
    logger,
    timeouts: config.timeouts,
    onBackoff: (ctx, delayMs, reason) => tracker.backingOff(ctx.resource, delayMs, reason),
    onRequestStart: (endpoint, atMs) => requestHook?.(endpoint, atMs),
    maxRetryAfterMs: config.maxRetryAfterMs,
    ...tuning,
    // Observed: the display shows requests waiting for the budget, and 429 pauses.
    observe: (scheduler) =>
      observedBudget(scheduler, {
        queued: (endpoint, lane) => tracker.requestQueued(endpoint, lane),
        dequeued: (lane, started) => tracker.requestDequeued(lane, started),
        rateLimited: (endpoint, retryAfterMs) => tracker.rateLimitedOn(endpoint, retryAfterMs),
      }),
  });
  return {
    clock,
    logger,
    budget,
    client,
    tracker,
    display,
    showsProgress: display !== NO_PROGRESS,
    repeats,
    recordRequests: (hook) => {
      requestHook = hook;
    },
    close: async () => {
      display.stop();
      await client.close();
    },
  };
}

export interface ApiConnectionOptions extends Omit<ApiClientOptions, 'budget'> {
  readonly limits: RateLimits;
  /** The scheduler's safety margins (`DEFAULT_SAFETY_MARGINS` unless given: a benchmark tries others). */
  readonly safetyMarginMs?: SchedulerOptions['safetyMarginMs'];
  /** Wrap the scheduler (a progress display, a benchmark's timeline); the client sees the wrapper. */
  readonly observe?: (scheduler: RequestBudget) => RequestBudget;
}

/**
 * The API side of a run, wired one way for the commands, the test harness and the benchmarks: the
 * run's one scheduler (every request of every stream goes through it) and the client over it.
 */
export function connectApi(options: ApiConnectionOptions): {
  readonly budget: RequestBudget;
  readonly client: ApiClient;
} {
  const { limits, observe, safetyMarginMs, ...clientOptions } = options;
  const scheduler = createScheduler({
    limits,
    logger: options.logger,
    ...(safetyMarginMs === undefined ? {} : { safetyMarginMs }),
  });
  const budget = observe === undefined ? scheduler : observe(scheduler);
  return { budget, client: new ApiClient({ ...clientOptions, budget }) };
}

/** Sync hooks feeding the tracker: a stream is one "window" of its resource. */
export function syncProgressHooks(tracker: ProgressTracker): RunHooks {
  return {
    onStreamStart: (resource) => tracker.addWindows(resource, 1),
    onStreamDone: (result) => {
      if (result.outcome === 'scope-rejected') return tracker.removeWindow(result.resource);
      tracker.windowDone(result.resource);
      if (result.outcome === 'failed')
        tracker.streamFailed(result.resource, result.scope, result.error?.message ?? 'unknown error');
    },
    onPage: (resource, _scope, page) => tracker.page(resource, page.rowsStored, page.records),
    onBacklog: (resource, pending) => tracker.backlog(resource, pending),
  };
}

/** Backfill hooks feeding the tracker. */
export function backfillProgressHooks(tracker: ProgressTracker): BackfillHooks {
  return {
    onWindows: (resource, _scope, total, skipped) => tracker.addWindows(resource, total, skipped),
    onWindowDone: (resource, _scope, _rows, windows) => tracker.windowDone(resource, windows),
    onPage: (resource, _scope, page) => tracker.page(resource, page.rowsStored, page.records),
    onStreamDone: (result) => {
      if (result.outcome === 'failed')
        tracker.streamFailed(result.resource, result.scope, result.error?.message ?? 'unknown error');
    },
  };
}
