import { existsSync } from 'node:fs';
import type { PublishedConfig } from '../../config/index.js';
import { EXIT_CODES } from '../../core/exit-codes.js';
import { layoutOf, workingPathForReading } from '../../publish/layout.js';
import type { CommandIo } from '../../run/io.js';
import { openRun } from '../../run/run.js';
import { printOutcome } from '../../run/writing.js';

/**
 * `query-sync publish`: publish the read copy and its Parquet set now from the working file, read
 * only (a sync publishes at its end and every --publish-every; this is for a copy deleted or moved,
 * or a Parquet set wanted now). While a sync holds the working file it says so: that sync publishes.
 */
export async function publishCommand(config: PublishedConfig, io: CommandIo): Promise<number> {
  const layout = layoutOf(config.duckdbPath);
  const working = workingPathForReading(config.duckdbPath);
  if (working !== layout.work || !existsSync(working)) {
    io.print(
      `publish FAILED: no working file ${layout.work}: run \`query-sync sync --duckdb-path ${config.duckdbPath}\` first (its first run takes an older warehouse file over)`,
    );
    return EXIT_CODES.configuration;
  }
  const run = await openRun('publish', config);
  return printOutcome(io, await run.close(await run.publish(io.publishHooks)));
}
