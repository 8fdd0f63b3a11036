import { parseDuration } from '../core/duration.js';
import { ConfigError } from '../core/errors.js';
import { DEFAULT_RATE_LIMITS } from '../http/budget.js';
import type { Flavor } from '../emulator/index.js';
import { startEmulatorThread } from '../emulator/thread.js';
import type { CommandIo } from './io.js';

export interface EmulateFlags {
  readonly port: number;
  readonly seed: number;
  readonly eventsPerProject: number;
  readonly faults: number;
  readonly lateRate: number;
  readonly limits: boolean;
  readonly flavor: Flavor;
  /** A duration such as `250ms`. */
  readonly latency: string;
  /** A duration; undefined: the flavor's default. */
  readonly enrichAfter: string | undefined;
  readonly allProjects: boolean;
  /** Events served with `model: null` (issue 21's server variants). */
  readonly hideModel?: boolean;
  /** A duration: spans appear this long after their event. */
  readonly spanLag?: string | undefined;
  /** A duration: conversations' `signals` appear this long after their last message. */
  readonly convoEnrichAfter?: string | undefined;
}

function duration(flag: string, text: string): number {
  try {
    return parseDuration(text);
  } catch (error) {
    throw new ConfigError(`--${flag}: ${(error as Error).message}`);
  }
}

/**
 * `query-sync emulate`: serve the emulator until SIGINT/SIGTERM. On worker threads, with its limits
 * kept by a gate on a thread of its own (`emulator/gate.ts`): arrivals are stamped as they come, not
 * after the page the emulator was building when they did (late, bunched stamps made 429s under load).
 */
export async function emulateCommand(flags: EmulateFlags, io: CommandIo): Promise<number> {
  const emulator = await startEmulatorThread({
    port: flags.port,
    seed: flags.seed,
    eventsPerProject: flags.eventsPerProject,
    limits: flags.limits ? { ...DEFAULT_RATE_LIMITS } : false,
    faults: flags.faults > 0 || flags.lateRate > 0 ? { rate: flags.faults, lateRate: flags.lateRate } : undefined,
    flavor: flags.flavor,
    latencyMs: duration('latency', flags.latency),
    enrichAfterMs: flags.enrichAfter === undefined ? undefined : duration('enrich-after', flags.enrichAfter),
    allProjects: flags.allProjects,
    hideModel: flags.hideModel === true,
    ...(flags.spanLag === undefined ? {} : { spanLagMs: duration('span-lag', flags.spanLag) }),
    ...(flags.convoEnrichAfter === undefined ? {} : { convoEnrichAfterMs: duration('convo-enrich-after', flags.convoEnrichAfter) }),
  });
  io.print(`Query API emulator (${emulator.flavor} flavor, project header ${emulator.projectHeader}) on ${emulator.url}`);
  io.print(`  org API key:  ${emulator.apiKey}   (write key ${emulator.writeKey} is refused with 401)`);
  io.print(`  try: QUERY_API_BASE_URL=${emulator.url} QUERY_API_KEY=${emulator.apiKey} npx query-sync sync --project '*'`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await emulator.close();
  return 0;
}
