import type { StatusConfig } from '../config.js';
import { EXIT_CODES, exitCodeFor } from '../core/exit-codes.js';
import { DBT_SOURCE_NAME, writeDbtSourcesOf } from '../app/dbt-sources.js';

/** `query-sync dbt-sources [--out sources.yml]`: reads the warehouse (a DuckDB file read-only). */
export async function dbtSourcesCommand(
  config: StatusConfig & { readonly out: string; readonly publishEveryMs?: number },
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
