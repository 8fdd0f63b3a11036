import type { Logger } from '../core/log.js';
import type { Clock } from '../core/types.js';
import type { Destination } from '../load/destination.js';
import { Publisher, type PublishResult } from './publisher.js';
import { trackWrites } from './tracking.js';
import type { DayCut } from './partitions.js';

/**
 * A writing run's publishing: every `everyMs` while it runs, and once at its end (also a failed or
 * stopped run: whatever it committed). A publish that fails is a warning: the run's rows and state
 * are untouched, the previous published copy stays readable, and the next publish catches up.
 */
export interface RunPublishing {
  /** The run's destination, which tells the publisher what each write touched. */
  readonly destination: Destination;
  /** Publish what the run committed (its end); undefined when it failed (logged). */
  finish(): Promise<PublishResult | undefined>;
}

export function publishDuringRun(
  destination: Destination,
  options: {
    readonly path: string;
    readonly everyMs: number;
    readonly clock: Clock;
    readonly logger: Logger;
    /** The tables cut by day (`partitionedTables` of the resources). */
    readonly partitioned: Readonly<Record<string, DayCut>>;
  },
): RunPublishing {
  const copy = destination.can.publish;
  if (copy === undefined || options.path === ':memory:')
    return { destination, finish: () => Promise.resolve(undefined) };
  const { logger } = options;
  const publisher = new Publisher(options.path, copy, options.clock, { partitioned: options.partitioned });
  const attempt = async (final: boolean): Promise<PublishResult | undefined> => {
    try {
      const result = await publisher.publish(final);
      logger.info(
        {
          publish: result.publish,
          asOf: result.asOf,
          partitions: result.rewritten,
          heldMs: result.heldMs,
          ms: result.totalMs,
        },
        `published ${publisher.layout.published} (${result.rewritten} partition(s) rewritten in ${result.totalMs} ms; writes waited ${result.heldMs} ms)`,
      );
      return result;
    } catch (error) {
      logger.warn((error as Error).message);
      return undefined;
    }
  };
  let busy = false;
  const timer =
    options.everyMs > 0
      ? setInterval(() => {
          if (busy) return;
          busy = true;
          void attempt(false).finally(() => {
            busy = false;
          });
        }, options.everyMs)
      : undefined;
  timer?.unref();
  return {
    destination: trackWrites(destination, publisher),
    finish: () => {
      if (timer !== undefined) clearInterval(timer);
      return attempt(true);
    },
  };
}
