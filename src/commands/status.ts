import type { StatusCommandConfig } from '../config.js';
import { EXIT_CODES, exitCodeFor } from '../core/exit-codes.js';
import { formatStatus } from '../app/reports.js';
import { freshnessOf, statusOf } from '../app/status.js';
import { evaluateFreshness, freshLine } from '../pipeline/freshness.js';
import { publishedLine } from '../publish/status.js';
import type { CommandIo } from '../app/io.js';

/**
 * `query-sync status [--json]`: state (read without taking any run lock) and warehouse counts.
 * A warehouse another process holds open (a running sync) is reported as unavailable, not an error.
 * `status --check`: freshness judged against `--max-lag` and `--max-backlog-eta`: one line per
 * breach and exit 7 (`stale`), else one line and 0; for a probe beside a running sync.
 */
export async function statusCommand(config: StatusCommandConfig, io: CommandIo): Promise<number> {
  try {
    if (config.check !== undefined) {
      const facts = await freshnessOf(config, io);
      const breaches = evaluateFreshness(facts, config.check);
      if (breaches.length === 0) {
        io.print(freshLine(facts, config.check));
        return EXIT_CODES.ok;
      }
      for (const b of breaches) io.print(b.line);
      return EXIT_CODES.stale;
    }
    const { report, published } = await statusOf(config, io);
    if (config.json) io.print(JSON.stringify(published === undefined ? report : { ...report, published }, null, 2));
    else {
      for (const line of formatStatus(report)) io.print(line);
      if (published !== undefined) io.print(publishedLine(published));
    }
    return EXIT_CODES.ok;
  } catch (error) {
    io.print(`status FAILED: ${(error as Error).message}`);
    return exitCodeFor(error);
  }
}
