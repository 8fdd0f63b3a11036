import type { StatusCommandConfig } from '../config.js';
import { EXIT_CODES, exitCodeFor } from '../core/exit-codes.js';
import { formatStatus } from '../app/reports.js';
import { statusOf } from '../app/status.js';
import { publishedLine } from '../publish/status.js';
import type { CommandIo } from '../app/io.js';

/**
 * `query-sync status [--json]`: state (read without taking any run lock) and warehouse counts.
 * A warehouse another process holds open (a running sync) is reported as unavailable, not an error.
 */
export async function statusCommand(config: StatusCommandConfig, io: CommandIo): Promise<number> {
  try {
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
