import { parseDuration } from '../../core/duration.js';
import { ConfigError } from '../../core/errors.js';
import {
  LACKS,
  SPEC_RATE_LIMITS,
  parseListQuirks,
  type EmulatorOptions,
  type Flavor,
  type ListQuirks,
  type TimeseriesShape,
} from '../../../emulator/index.js';
import { startEmulatorThread } from '../../../emulator/thread.js';
import type { CommandIo } from '../../run/io.js';
import { EXIT_CODES } from '../../core/exit-codes.js';

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
  /** `--list-quirks`: e.g. `page-cap=50,offset-cursors` (emulator/quirks.ts). */
  readonly listQuirks?: string | undefined;
  /** Comma list of capabilities the server lacks (`LACKS`). */
  readonly lacks?: string | undefined;
  /** Comma list of the intervals the timeseries accepts. */
  readonly timeseriesIntervals?: string | undefined;
  readonly timeseriesShape?: TimeseriesShape;
  /** Events served with `model: null` (issue 21's server variants). */
  readonly hideModel?: boolean;
  /** A duration: spans appear this long after their event. */
  readonly spanLag?: string | undefined;
  /** A duration: conversations' `signals` appear this long after their last message. */
  readonly convoEnrichAfter?: string | undefined;
  /** A duration: counts and timeseries trail the list by it. */
  readonly countLag?: string | undefined;
  /** A duration: events older than it are deleted at the source. */
  readonly retention?: string | undefined;
}

function list(flag: string, text: string | undefined, allowed: readonly string[]): string[] | undefined {
  if (text === undefined) return undefined;
  const items = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const unknown = items.filter((i) => !allowed.includes(i));
  if (unknown.length > 0)
    throw new ConfigError(`--${flag}: expected a comma list of ${allowed.join(', ')}; got "${unknown.join(', ')}"`);
  return items;
}

function duration(flag: string, text: string): number {
  try {
    return parseDuration(text);
  } catch (error) {
    throw new ConfigError(`--${flag}: ${(error as Error).message}`);
  }
}

function listQuirks(text: string): ListQuirks {
  try {
    return parseListQuirks(text);
  } catch (error) {
    throw new ConfigError((error as Error).message);
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
    limits: flags.limits ? { ...SPEC_RATE_LIMITS } : false,
    faults: flags.faults > 0 || flags.lateRate > 0 ? { rate: flags.faults, lateRate: flags.lateRate } : undefined,
    flavor: flags.flavor,
    latencyMs: duration('latency', flags.latency),
    enrichAfterMs: flags.enrichAfter === undefined ? undefined : duration('enrich-after', flags.enrichAfter),
    allProjects: flags.allProjects,
    lists: flags.listQuirks === undefined ? undefined : listQuirks(flags.listQuirks),
    lacks: list('lacks', flags.lacks, LACKS) as EmulatorOptions['lacks'],
    timeseriesIntervals: list('timeseries-intervals', flags.timeseriesIntervals, [
      'minute',
      'hour',
      'day',
      'week',
      'month',
    ]),
    timeseriesShape: flags.timeseriesShape,
    hideModel: flags.hideModel === true,
    ...(flags.spanLag === undefined ? {} : { spanLagMs: duration('span-lag', flags.spanLag) }),
    ...(flags.convoEnrichAfter === undefined
      ? {}
      : { convoEnrichAfterMs: duration('convo-enrich-after', flags.convoEnrichAfter) }),
    ...(flags.countLag === undefined ? {} : { countLagMs: duration('count-lag', flags.countLag) }),
    ...(flags.retention === undefined ? {} : { retentionMs: duration('retention', flags.retention) }),
  });
  io.print(
    `Query API emulator (${emulator.flavor} flavor, project header ${emulator.projectHeader}) on ${emulator.url}`,
  );
  io.print(`  org API key:  ${emulator.apiKey}   (write key ${emulator.writeKey} is refused with 401)`);
  const differs = [
    ...(flags.lacks === undefined ? [] : [`lacks ${flags.lacks}`]),
    ...(flags.timeseriesIntervals === undefined ? [] : [`timeseries intervals ${flags.timeseriesIntervals} only`]),
    ...(flags.timeseriesShape === 'rows' ? ['timeseries in another shape (rows)'] : []),
    ...(flags.countLag === undefined ? [] : [`counts trail the list by ${flags.countLag}`]),
    ...(flags.retention === undefined ? [] : [`events older than ${flags.retention} deleted (retention)`]),
  ];
  if (differs.length > 0) io.print(`  differs: ${differs.join('; ')} (docs/server-differences.md)`);
  io.print(
    `  try: QUERY_API_BASE_URL=${emulator.url} QUERY_API_KEY=${emulator.apiKey} npx query-sync sync --project '*'`,
  );
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await emulator.close();
  return EXIT_CODES.ok;
}
