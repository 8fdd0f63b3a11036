import type { SyncConfig } from '../config.js';
import { exitCodeFor } from '../core/exit-codes.js';
import { checkExitCode } from '../pipeline/check.js';
import { checkReport } from '../app/check.js';
import { formatCheck } from '../app/reports.js';
import type { CommandIo } from '../app/io.js';

/**
 * `query-sync check`: one request per endpoint and project scope (first pages only, nothing
 * written, no lock taken), and what they say. Exit codes as for sync: 0 all well, 3 key or project
 * refused, 1 anything else that failed, 2 configuration.
 */
export async function checkCommand(config: SyncConfig, io: CommandIo): Promise<number> {
  const print = io.print;
  try {
    const report = await checkReport(config, io);
    const code = checkExitCode(report);
    if (config.json) print(JSON.stringify({ command: 'check', exitCode: code, ...report }));
    else for (const line of formatCheck(report, config)) print(line);
    return code;
  } catch (error) {
    print(`check FAILED: ${(error as Error).message}`);
    return exitCodeFor(error);
  }
}
