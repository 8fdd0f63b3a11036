import { existsSync } from 'node:fs';
import type { PublishedConfig } from '../../config/index.js';
import { EXIT_CODES, exitCodeFor } from '../../core/exit-codes.js';
import { layoutOf, workingPathForReading } from '../../publish/layout.js';
import { publishNow } from '../../run/publish.js';
import type { CommandIo } from '../../run/io.js';

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
  try {
    const result = await publishNow(config, working, io.publishHooks);
    io.print(
      `published ${layout.published} as of ${result.asOf} (publish ${result.publish}: ${result.tables} tables, ${result.rewritten} partition file(s) rewritten in ${result.totalMs} ms); Parquet set and manifest in ${layout.files}`,
    );
    return EXIT_CODES.ok;
  } catch (error) {
    io.print(`publish FAILED: ${(error as Error).message}`);
    return exitCodeFor(error);
  }
}
