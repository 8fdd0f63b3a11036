import type { SyncConfig } from '../config.js';
import { systemClock } from '../core/clock.js';
import { createLogger, type Logger } from '../core/log.js';
import type { Clock } from '../core/types.js';
import type { RequestBudget } from '../http/budget.js';
import { ApiClient } from '../http/client.js';
import { createScheduler } from '../http/scheduler.js';
import type { BackfillHooks } from '../pipeline/backfill.js';
import { ProgressTracker } from '../pipeline/progress.js';
import type { RunHooks } from '../pipeline/run.js';
import { LogProgressDisplay, NO_PROGRESS, TtyProgressDisplay, type ProgressDisplay } from './progress-display.js';
import type { CommandIo } from './sync.js';

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
  close(): Promise<void>;
}

export function createRuntime(config: SyncConfig, io: CommandIo): Runtime {
  const clock = io.clock ?? systemClock;
  const tracker = new ProgressTracker(clock);
  const tty = config.progress === 'tty' ? new TtyProgressDisplay(tracker) : undefined;
  const logger = createLogger({
    level: config.logLevel,
    format: config.logFormat,
    secrets: [config.apiKey],
    // On a TTY, log lines go through the live display, which prints them above its lines.
    ...(tty === undefined ? {} : { destination: tty.logStream }),
  });
  let display: ProgressDisplay = NO_PROGRESS;
  if (tty !== undefined) display = tty;
  else if (config.progress === 'log' && logger.isLevelEnabled('info')) display = new LogProgressDisplay(tracker, logger, config.progressIntervalMs);
  const budget = createScheduler({ limits: config.limits, logger });
  const client = new ApiClient({
    baseUrl: config.baseUrl,
    apiKey: config.apiKey,
    projectHeader: config.projectHeader,
    budget,
    clock,
    logger,
    timeouts: config.timeouts,
    maxRetryAfterMs: config.maxRetryAfterMs,
  });
  return {
    clock,
    logger,
    budget,
    client,
    tracker,
    display,
    showsProgress: display !== NO_PROGRESS,
    close: async () => {
      display.stop();
      await client.close();
    },
  };
}

/** Sync hooks feeding the tracker: a stream is one "window" of its resource. */
export function syncProgressHooks(tracker: ProgressTracker): RunHooks {
  return {
    onStreamStart: (resource) => tracker.addWindows(resource, 1),
    onStreamDone: (result) => (result.outcome === 'scope-rejected' ? tracker.removeWindow(result.resource) : tracker.windowDone(result.resource)),
    onPage: (resource, _scope, page) => tracker.page(resource, page.rowsStored),
  };
}

/** Backfill hooks feeding the tracker. */
export function backfillProgressHooks(tracker: ProgressTracker): BackfillHooks {
  return {
    onWindows: (resource, _scope, total, skipped) => tracker.addWindows(resource, total, skipped),
    onWindowDone: (resource) => tracker.windowDone(resource),
    onPage: (resource, _scope, page) => tracker.page(resource, page.rowsStored),
  };
}
