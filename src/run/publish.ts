import { RESOURCES } from '../../connectors/index.js';
import type { PublishedConfig } from '../config/index.js';
import { partitionedTables } from '../publish/partitions.js';
import { systemClock } from '../core/clock.js';
import { EXIT_CODES } from '../core/exit-codes.js';
import type { PublishesCopy } from '../load/destination-capabilities.js';
import { layoutOf } from '../publish/layout.js';
import { Publisher, type PublisherHooks } from '../publish/publisher.js';
import type { RunOutcome } from './writing.js';

/**
 * `publish`'s step (`run.publish(hooks)`, on the run `openRun('publish', config)` opened: the
 * working file read only): publish the read copy and its Parquet set now (a sync publishes at its
 * end and every --publish-every). Returns the line to print.
 */
export async function publishStep(
  config: PublishedConfig,
  working: PublishesCopy,
  hooks: PublisherHooks = {},
): Promise<RunOutcome> {
  const layout = layoutOf(config.duckdbPath);
  const result = await new Publisher(config.duckdbPath, working, systemClock, {
    partitioned: partitionedTables(RESOURCES),
    hooks,
  }).publish(true);
  return {
    code: EXIT_CODES.ok,
    output: [
      `published ${layout.published} as of ${result.asOf} (publish ${result.publish}: ${result.tables} tables, ${result.rewritten} partition file(s) rewritten in ${result.totalMs} ms); Parquet set and manifest in ${layout.files}`,
    ],
  };
}
