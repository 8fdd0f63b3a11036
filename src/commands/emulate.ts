import { DEFAULT_RATE_LIMITS } from '../http/budget.js';
import { startEmulator } from '../emulator/index.js';
import type { CommandIo } from './sync.js';

export interface EmulateFlags {
  readonly port: number;
  readonly seed: number;
  readonly eventsPerProject: number;
  readonly faults: number;
  readonly lateRate: number;
  readonly limits: boolean;
}

/** `query-sync emulate`: serve the emulator until SIGINT/SIGTERM. */
export async function emulateCommand(flags: EmulateFlags, io: CommandIo): Promise<number> {
  const emulator = await startEmulator({
    port: flags.port,
    seed: flags.seed,
    eventsPerProject: flags.eventsPerProject,
    limits: flags.limits ? { ...DEFAULT_RATE_LIMITS } : false,
    faults: flags.faults > 0 || flags.lateRate > 0 ? { rate: flags.faults, lateRate: flags.lateRate } : undefined,
  });
  io.print(`Query API emulator on ${emulator.url}`);
  io.print(`  org API key:  ${emulator.apiKey}   (write key ${emulator.writeKey} is refused with 401)`);
  io.print(`  try: QUERY_API_BASE_URL=${emulator.url} QUERY_API_KEY=${emulator.apiKey} npx query-sync sync --project '*'`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await emulator.close();
  return 0;
}
