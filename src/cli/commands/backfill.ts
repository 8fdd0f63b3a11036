import type { BackfillConfig } from '../../config/index.js';
import type { CommandIo } from '../../run/io.js';
import { openRun } from '../../run/run.js';
import { printOutcome } from '../../run/writing.js';

/**
 * `query-sync backfill --from --to`: load [from, to) in windows, resumable, alongside the sync;
 * returns the exit code (0 only when every stream finished every window), its summary printed last.
 */
export async function backfillCommand(config: BackfillConfig, io: CommandIo): Promise<number> {
  const run = await openRun('backfill', config, io);
  return printOutcome(io, await run.close(await run.backfill()));
}
