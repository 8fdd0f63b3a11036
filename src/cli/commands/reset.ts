import { createInterface } from 'node:readline/promises';
import type { ResetConfig } from '../../config/index.js';
import { RESOURCE_NAMES } from '../../../connectors/index.js';
import { ConfigError } from '../../core/errors.js';
import { EXIT_CODES, exitCodeFor } from '../../core/exit-codes.js';
import { streamsToReset } from '../../run/reset.js';
import { openRun } from '../../run/run.js';
import { printOutcome } from '../../run/writing.js';

export interface ResetIo {
  readonly print: (line: string) => void;
  /** Whether a person can answer a question (stdin and stdout are a terminal). */
  readonly interactive: boolean;
  /** Ask and return the answer (a terminal prompt by default). */
  readonly ask?: (question: string) => Promise<string>;
}

/**
 * `query-sync reset --resources users [--project p] [--yes]`: forget the marks and checkpoints of
 * those streams, so the next sync re-reads them from their start (`--start`, else all history).
 * Rows stay: the re-read merges on the key. Holds the `sync` lease meanwhile, so no sync runs on a
 * half-reset state. Asks for confirmation on a terminal; elsewhere `--yes` is required.
 */
export async function resetCommand(config: ResetConfig, io: ResetIo): Promise<number> {
  try {
    if (!config.resourcesGiven) {
      throw new ConfigError(
        `reset: name the streams to forget with --resources (e.g. --resources users; every resource: --resources ${RESOURCE_NAMES.join(',')})`,
      );
    }
    if (!config.yes && !io.interactive) {
      throw new ConfigError(
        'reset changes the state and cannot ask for confirmation here (not a terminal): pass --yes',
      );
    }
    const keys = await streamsToReset(config);
    const names = config.resources.map((r) => r.name).join(',');
    const scope = config.project === undefined ? 'every project scope' : `project scope ${config.project}`;
    if (keys.length === 0) {
      io.print(
        `reset: nothing to forget: the state (the warehouse's, or ${config.statePath} without one) has no stream of ${names} in ${scope}`,
      );
      return EXIT_CODES.ok;
    }
    if (!config.yes) {
      const question = `Forget the marks of ${keys.length} stream${keys.length === 1 ? '' : 's'} (${keys.join(', ')}) in ${config.statePath}? The next sync re-reads them from their start. [y/N] `;
      const answer = await (io.ask ?? askOnTerminal)(question);
      if (!/^y(es)?$/i.test(answer.trim())) {
        io.print('reset cancelled: nothing changed');
        return EXIT_CODES.failed;
      }
    }
    const run = await openRun('reset', config);
    return printOutcome(io, await run.close(await run.reset(keys)));
  } catch (error) {
    io.print(`reset FAILED: ${(error as Error).message}`);
    return exitCodeFor(error);
  }
}

async function askOnTerminal(question: string): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    return await rl.question(question);
  } finally {
    rl.close();
  }
}
