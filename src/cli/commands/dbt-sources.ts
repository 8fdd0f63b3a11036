import type { StatusConfig } from '../../config/index.js';
import { EXIT_CODES, exitCodeFor } from '../../core/exit-codes.js';
import { existsSync } from 'node:fs';
import { DBT_SOURCE_NAME, writeDbtSources } from '../../analysts/dbt-sources.js';
import { openReadOnly } from '../../run/open-destination.js';
import type { Destination } from '../../load/destination.js';
import { DuckDbDestination } from '../../load/duckdb/destination.js';
import { layoutOf } from '../../publish/layout.js';

/** `query-sync dbt-sources [--out sources.yml]`: reads the warehouse (a DuckDB file read-only). */
export async function dbtSourcesCommand(
  config: StatusConfig & { readonly out: string; readonly publishEveryMs: number },
  io: { readonly print: (line: string) => void },
): Promise<number> {
  try {
    const { path, tables } = await writeDbtSourcesOf(config, io.print);
    io.print(`dbt sources: ${tables} tables written to ${path} (source "${DBT_SOURCE_NAME}")`);
    return EXIT_CODES.ok;
  } catch (error) {
    io.print(`dbt-sources FAILED: ${(error as Error).message}`);
    return exitCodeFor(error);
  }
}

/**
 * `query-sync dbt-sources [--out sources.yml]`: reads the warehouse (a DuckDB file read-only) and
 * writes the file; the caller closes nothing (the warehouse is closed here).
 */
async function writeDbtSourcesOf(
  config: StatusConfig & { readonly out: string; readonly publishEveryMs: number },
  print: (line: string) => void,
): Promise<{ readonly path: string; readonly tables: number }> {
  let destination: Destination | undefined;
  try {
    // DuckDB: the columns as readers see them, in the published copy (the working file before a first publish).
    const published = config.destination === 'duckdb' ? layoutOf(config.duckdbPath) : undefined;
    destination =
      published !== undefined && existsSync(published.manifest)
        ? await DuckDbDestination.open(published.published, { readOnly: true })
        : await openReadOnly(config, print);
    return await writeDbtSources(destination, config.out, config);
  } finally {
    await destination?.close().catch(() => undefined);
  }
}
