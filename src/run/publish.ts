import { RESOURCES } from '../../connectors/index.js';
import type { PublishedConfig } from '../config/index.js';
import { partitionedTables } from '../publish/partitions.js';
import { systemClock } from '../core/clock.js';
import { DuckDbDestination } from '../load/duckdb/destination.js';
import { Publisher, type PublisherHooks, type PublishResult } from '../publish/publisher.js';

/**
 * Publish the read copy and its Parquet set now from the working file `working`, opened read only
 * (a sync publishes at its end and every --publish-every): for `query-sync publish`.
 */
export async function publishNow(
  config: PublishedConfig,
  working: string,
  hooks: PublisherHooks = {},
): Promise<PublishResult> {
  let db: DuckDbDestination | undefined;
  try {
    db = await DuckDbDestination.open(working, { readOnly: true, memoryLimit: config.duckdbMemoryLimit });
    return await new Publisher(config.duckdbPath, db, systemClock, {
      partitioned: partitionedTables(RESOURCES),
      hooks,
    }).publish(true);
  } finally {
    await db?.close().catch(() => undefined);
  }
}
