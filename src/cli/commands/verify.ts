import type { VerifyConfig } from '../../config/index.js';
import type { CommandIo } from '../../run/io.js';
import { openRun } from '../../run/run.js';
import { verifyRead } from '../../run/verify.js';
import { printOutcome } from '../../run/writing.js';

/**
 * `query-sync verify --from --to [--repair]`: compare API counts with warehouse counts per window
 * and project; exit 5 on any mismatch. `--repair` re-reads the mismatched windows and checks them
 * again, a writing run (the run object's step). The report is printed as it is made
 * (`run/verify.ts`); returns the exit code.
 */
export async function verifyCommand(config: VerifyConfig, io: CommandIo): Promise<number> {
  if (!config.repair) return verifyRead(config, io);
  const run = await openRun('verify', config, io);
  return printOutcome(io, await run.close(await run.verifyRepair()));
}
