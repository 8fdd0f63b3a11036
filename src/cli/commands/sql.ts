import { existsSync } from 'node:fs';
import type { PublishedConfig } from '../../config/index.js';
import { layoutOf } from '../../publish/layout.js';
import type { CommandIo } from '../../run/io.js';
import { EXIT_CODES } from '../../core/exit-codes.js';
import { render, runOn, type SqlFormat } from '../../publish/sql.js';
import { shell } from '../sql-shell.js';

/**
 * `query-sync sql "select …"`: SQL on the published read copy (never the sync's working file, so it
 * runs while a sync does and never makes one wait). With no query, a small shell: each statement
 * opens the newest published copy, so a long session sees each publish as it lands.
 */
export async function sqlCommand(
  config: PublishedConfig & { readonly query?: string; readonly format: SqlFormat },
  io: CommandIo & { readonly interactive?: boolean },
): Promise<number> {
  const path = layoutOf(config.duckdbPath).published;
  if (!existsSync(path)) {
    io.print(
      `sql FAILED: there is no published copy at ${path} yet: run \`query-sync sync\` (it publishes at its end and every --publish-every), or \`query-sync publish\` after a run, or pass --duckdb-path`,
    );
    return EXIT_CODES.configuration;
  }
  if (config.query !== undefined) {
    try {
      for (const line of render(await runOn(path, config.query), config.format)) io.print(line);
      return EXIT_CODES.ok;
    } catch (error) {
      io.print(`sql FAILED: ${(error as Error).message}`);
      return EXIT_CODES.failed;
    }
  }
  return shell(path, config.format, io);
}
