import type { VerifyConfig } from '../../config/index.js';
import type { CommandIo } from '../../run/io.js';
import { verifyRun } from '../../run/verify.js';

/**
 * `query-sync verify --from --to [--repair]`: compare API counts with warehouse counts per window
 * and project; exit 5 on any mismatch. `--repair` re-reads the mismatched windows and checks them
 * again. The report is printed as it is made (`run/verify.ts`); returns the exit code.
 */
export async function verifyCommand(config: VerifyConfig, io: CommandIo): Promise<number> {
  return verifyRun(config, io);
}
