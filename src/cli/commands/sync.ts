import type { SyncConfig } from '../../config/index.js';
import type { CommandIo } from '../../run/io.js';
import { openRun } from '../../run/run.js';
import { printOutcome } from '../../run/writing.js';

/**
 * `query-sync sync`: returns the exit code (0 only when every stream synced). The summary is the
 * last thing printed: the live display's last frame, the per-stream log lines and the repeated
 * errors' counts come before it, and nothing is printed after it (files are closed first).
 */
export async function syncCommand(config: SyncConfig, io: CommandIo): Promise<number> {
  const run = await openRun('sync', config, io);
  return printOutcome(io, await run.close(await run.sync()));
}
