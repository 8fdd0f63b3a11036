/**
 * Pacing benchmark (issues 3 and 11). Runs the real pipeline against the emulator enforcing the
 * documented limits and prints figures. Not part of `npm test`:
 * `npm run bench:pace [-- run1|run2|run3] [--latency 0,100,300]`.
 *
 *  run1  ≥ 80,000 events of one project: requests, seconds, the floor of the limits, efficiency,
 *        at each latency (the emulator's answer time, ± 20 % jitter).
 *  run2  all five resources of three projects at once, at each latency: rate per endpoint,
 *        busiest second, 429s, and where the time went.
 *  run3  the emulator's limits at half of ours: time, 429s, and whether every row arrived.
 *
 * `--margins 250,50` measures other safety margins (minute, second windows, ms) than the defaults.
 * `PACE_LOG=file` keeps the run's debug log there (splits, cuts, each page with its walk's window
 * start): which walks hold the last seconds.
 * `--lacks timeseries` (or `--timeseries-intervals hour,day,week`, `--timeseries-shape rows`) runs
 * against a server that differs so (docs/server-differences.md): split planning then falls back.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RESOURCES } from '../connectors/index.js';
import { events } from '../connectors/events.js';
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/log.js';
import { pino } from 'pino';
import type { ResourceDefinition } from '../src/core/types.js';
import type { EmulatorOptions, EmulatorStats } from '../emulator/index.js';
import { startEmulatorThread, type LoopDelay } from '../emulator/thread.js';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { DEFAULT_RATE_LIMITS, type RateLimits, type RequestBudget } from '../src/http/scheduler/budget.js';
import { SPEC_RATE_LIMITS } from '../emulator/index.js';
import { connectApi } from '../src/run/runtime.js';
import { minimumSeconds } from '../src/http/scheduler/floor.js';
import { DEFAULT_SAFETY_MARGINS } from '../src/http/scheduler/options.js';
import { DuckDbDestination } from '../src/load/duckdb/destination.js';
import { runSync, type RunSummary } from '../src/sync/engine.js';
import { openSyncRun } from '../src/sync/context.js';
import { StateStore } from '../src/state/store.js';
import { PIPELINE_DEFAULTS } from '../src/config/index.js';

interface Measured {
  readonly summary: RunSummary;
  readonly seconds: number;
  readonly emulator: EmulatorStats;
  readonly counts: Record<string, { warehouse: number; api: number }>;
  /** Seconds from the start at which each 429 reached the scheduler. */
  readonly rateLimitedAt: readonly number[];
  /** Every request: endpoint, when it asked for budget, started and was answered (ms from the start). */
  readonly timeline: readonly TimedRequest[];
  /** When the run started (epoch ms, as `TimedRequest.sentAt`). */
  readonly startedAt: number;
  /** How late the event loops ran: the emulator's gate (its arrival stamps), its page server, and ours (our send stamps). */
  readonly loopDelay: { readonly gate?: LoopDelay; readonly server: LoopDelay; readonly client: LoopDelay };
  /** Every request head as undici wrote it to its socket (epoch ms, path and query), in write order. */
  readonly writes: readonly { readonly at: number; readonly path: string }[];
}

interface TimedRequest {
  readonly endpoint: string;
  /** When its request was written to the socket (ms since the epoch): what our windows count. */
  readonly sentAt: number | undefined;
  readonly askedMs: number;
  readonly startedMs: number;
  readonly endedMs: number;
}

async function measure(
  emulatorOptions: EmulatorOptions,
  sync: { project?: string; resources: readonly ResourceDefinition[]; limits: RateLimits },
): Promise<Measured> {
  const seedStarted = Date.now();
  const emu = await startEmulatorThread(emulatorOptions);
  process.stdout.write(
    `  (emulator seeded in ${((Date.now() - seedStarted) / 1000).toFixed(1)} s, on its own thread)\n`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'qs-pace-'));
  // PACE_LOG=file: the run's debug log there (splits, cuts), one JSON line each, for reading the tail.
  const logger =
    process.env.PACE_LOG === undefined
      ? silentLogger()
      : pino({ level: 'debug' }, pino.destination({ dest: process.env.PACE_LOG, sync: true }));
  const rateLimitedAt: number[] = [];
  const timeline: TimedRequest[] = [];
  const clientDelay = monitorEventLoopDelay({ resolution: 10 });
  // Each request head as undici writes it (published synchronously right before the socket write):
  // matched by path with the gate's arrival stamps, the delay the server's windows see on top of ours.
  const writes: { at: number; path: string }[] = [];
  const onWrite = (message: unknown): void => {
    const { request } = message as { request: { path: string } };
    writes.push({ at: Date.now(), path: request.path });
  };
  subscribe('undici:client:sendHeaders', onWrite);
  let started = Date.now();
  // The run's scheduler as every command wires it, wrapped to record when each request went out.
  const observe = (scheduler: RequestBudget): RequestBudget => ({
    schedule: (endpoint, task, options) => {
      const askedMs = Date.now() - started;
      return scheduler.schedule(
        endpoint,
        async (sent) => {
          const startedMs = Date.now() - started;
          let sentAt: number | undefined;
          try {
            return await task(() => {
              sentAt = Date.now();
              sent();
            });
          } finally {
            timeline.push({ endpoint, sentAt, askedMs, startedMs, endedMs: Date.now() - started });
          }
        },
        options,
      );
    },
    stats: () => scheduler.stats(),
    headroom: (endpoint) => scheduler.headroom?.(endpoint) ?? Number.POSITIVE_INFINITY,
    onRateLimited: (endpoint, retryAfterMs) => {
      rateLimitedAt.push((Date.now() - started) / 1000);
      scheduler.onRateLimited(endpoint, retryAfterMs);
    },
  });
  const { client } = connectApi({
    baseUrl: emu.url,
    apiKey: emu.apiKey,
    projectHeader: 'X-Service-Project-Id',
    limits: sync.limits,
    safetyMarginMs: margins,
    observe,
    clock: systemClock,
    logger,
  });
  const destination = await DuckDbDestination.open(join(dir, 'w.duckdb'));
  const state = await StateStore.open(join(dir, 'state.json'), { clock: systemClock, purpose: 'sync' });
  try {
    await emu.resetStats();
    clientDelay.reset();
    clientDelay.enable();
    started = Date.now();
    const summary = await runSync(
      { resources: sync.resources, project: sync.project },
      openSyncRun(
        { client, destination, state, clock: systemClock, logger },
        { ...PIPELINE_DEFAULTS.sync, lookbackMs: 15 * 60_000, limits: sync.limits },
      ),
    );
    const seconds = (Date.now() - started) / 1000;
    const api = await emu.counts(Date.parse(summary.startedAt));
    const counts: Measured['counts'] = {};
    for (const r of sync.resources)
      counts[r.name] = { warehouse: await destination.count(r.name), api: api[r.name] ?? -1 };
    clientDelay.disable();
    unsubscribe('undici:client:sendHeaders', onWrite);
    const emulatorDelay = await emu.loopDelay();
    const ours: LoopDelay = {
      p50Ms: clientDelay.percentile(50) / 1e6,
      p99Ms: clientDelay.percentile(99) / 1e6,
      maxMs: clientDelay.max / 1e6,
    };
    return {
      summary,
      seconds,
      startedAt: started,
      emulator: await emu.stats(),
      counts,
      rateLimitedAt,
      timeline,
      loopDelay: { ...emulatorDelay, client: ours },
      writes,
    };
  } finally {
    unsubscribe('undici:client:sendHeaders', onWrite);
    await destination.close();
    await client.close();
    await state.close();
    await emu.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Where the time went: before the first request (start-up), after the last answer (final writes),
 * and in between, time with a request queued for budget (the budget binds: good), with requests in
 * flight and none queued (waiting on the network), and with neither (the client was busy: parsing,
 * normalizing, writing, or a walk waiting on another).
 */
function printBreakdown(m: Measured): void {
  const t = m.timeline;
  if (t.length === 0) return;
  const events: { at: number; queued: number; inFlight: number }[] = [];
  for (const r of t) {
    events.push({ at: r.askedMs, queued: 1, inFlight: 0 });
    events.push({ at: r.startedMs, queued: -1, inFlight: 1 });
    events.push({ at: r.endedMs, queued: 0, inFlight: -1 });
  }
  events.sort((a, b) => a.at - b.at);
  let queued = 0;
  let inFlight = 0;
  let last = events[0]?.at ?? 0;
  const spent = { budget: 0, network: 0, client: 0 };
  for (const e of events) {
    const span = e.at - last;
    if (queued > 0) spent.budget += span;
    else if (inFlight > 0) spent.network += span;
    else spent.client += span;
    queued += e.queued;
    inFlight += e.inFlight;
    last = e.at;
  }
  const first = Math.min(...t.map((r) => r.askedMs));
  const end = Math.max(...t.map((r) => r.endedMs));
  const latency = t.reduce((n, r) => n + (r.endedMs - r.startedMs), 0) / t.length;
  const s = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
  process.stdout.write(
    `  time: start-up ${s(first)}, queued for budget ${s(spent.budget)}, network only ${s(spent.network)}, ` +
      `client only ${s(spent.client)}, after the last answer ${s(m.seconds * 1000 - end)}; mean latency ${latency.toFixed(0)} ms\n`,
  );
  const d = (l: LoopDelay): string =>
    `p50 ${l.p50Ms.toFixed(0)} / p99 ${l.p99Ms.toFixed(0)} / max ${l.maxMs.toFixed(0)} ms`;
  process.stdout.write(
    `  event-loop delay: the emulator's rate gate ${m.loopDelay.gate === undefined ? '-' : d(m.loopDelay.gate)}; its pages ${d(m.loopDelay.server)}; ours ${d(m.loopDelay.client)}\n`,
  );
  // The busiest 1-s window as the server stamped arrivals, and our sends in that same window: more
  // arrivals than sends means the server's stamps bunched (its loop lagged, or the network did).
  const sends = t
    .map((r) => r.sentAt)
    .filter((v): v is number => v !== undefined)
    .sort((a, b) => a - b);
  const arrivals = [...m.emulator.requestTimes].sort((a, b) => a - b);
  const busiest = (times: readonly number[]): { count: number; at: number } => {
    let best = { count: 0, at: 0 };
    for (let i = 0, j = 0; i < times.length; i += 1) {
      while ((times[j] as number) <= (times[i] as number) - 1000) j += 1;
      if (i - j + 1 > best.count) best = { count: i - j + 1, at: times[i] as number };
    }
    return best;
  };
  // An endpoint past a minute's budget: how long its first minute's budget took to send. The rest
  // can only follow a minute after each of those, so a slow first minute makes the run that much longer.
  for (const [endpoint, n] of Object.entries(m.emulator.byEndpoint)) {
    if (n <= DEFAULT_RATE_LIMITS.maxRpm) continue;
    const own = t
      .filter((r) => r.endpoint === endpoint && r.sentAt !== undefined)
      .map((r) => r.sentAt as number)
      .sort((a, b) => a - b);
    const first = own[0];
    const last = own[DEFAULT_RATE_LIMITS.maxRpm - 1];
    if (first !== undefined && last !== undefined) {
      process.stdout.write(
        `  ${endpoint}: its first ${DEFAULT_RATE_LIMITS.maxRpm} requests went out over ${((last - first) / 1000).toFixed(1)} s (${(DEFAULT_RATE_LIMITS.maxRpm / DEFAULT_RATE_LIMITS.maxRps).toFixed(0)} s at ${DEFAULT_RATE_LIMITS.maxRps}/s)\n`,
      );
    }
  }
  // Requests sent in each second of the run: a second under the limit at the start or the end is
  // where the walks could not fill the budget (start-up, the tail of the last sub-windows).
  if (sends.length > 0) {
    const perSecond: number[] = [];
    for (const at of sends) {
      const i = Math.floor((at - m.startedAt) / 1000);
      perSecond[i] = (perSecond[i] ?? 0) + 1;
    }
    process.stdout.write(`  sends per second: ${Array.from(perSecond, (n) => n ?? 0).join(' ')}\n`);
    // The same by endpoint (the two long streams, the rest together): who holds the last seconds.
    const endpointsPerSecond = new Map<string, number[]>();
    for (const r of t) {
      if (r.sentAt === undefined) continue;
      const key = r.endpoint === '/v1/events' || r.endpoint === '/v1/conversations' ? r.endpoint : 'other';
      const row = endpointsPerSecond.get(key) ?? Array.from(perSecond, () => 0);
      const i = Math.floor((r.sentAt - m.startedAt) / 1000);
      row[i] = (row[i] ?? 0) + 1;
      endpointsPerSecond.set(key, row);
    }
    for (const [key, row] of [...endpointsPerSecond].sort()) {
      process.stdout.write(`    ${key.replace('/v1/', '').padEnd(13)} ${row.join(' ')}\n`);
    }
    // The start: what goes out before the walks fill the budget (one round trip after another is the loss).
    const firstAt = (sends[0] as number) - m.startedAt;
    const early = [...t]
      .filter((r) => r.sentAt !== undefined)
      .sort((a, b) => (a.sentAt as number) - (b.sentAt as number))
      .slice(0, 12);
    process.stdout.write(
      `  first requests (ms from the start): ${early.map((r) => `${r.endpoint.replace('/v1/', '')}@${(r.sentAt as number) - m.startedAt}`).join(' ')} (first at ${firstAt} ms)\n`,
    );
    const late = [...t]
      .filter((r) => r.sentAt !== undefined)
      .sort((a, b) => (a.sentAt as number) - (b.sentAt as number))
      .slice(-12);
    process.stdout.write(
      `  last requests (ms from the start): ${late.map((r) => `${r.endpoint.replace('/v1/', '')}@${(r.sentAt as number) - m.startedAt}`).join(' ')}\n`,
    );
  }
  const within = (times: readonly number[], to: number): number => times.filter((v) => v > to - 1000 && v <= to).length;
  const server = busiest(arrivals);
  const ours = busiest(sends);
  process.stdout.write(
    `  busiest 1-s window: server's stamps ${server.count} (our sends in it ${within(sends, server.at)}); our sends ${ours.count} (server's stamps in it ${within(arrivals, ours.at)})\n`,
  );
}

/**
 * What the server's per-second window sees against what we sent: each request's arrival at the
 * emulator's gate (its stamp, which its limiter counts) less the time undici wrote its head, matched
 * by path and query (a retried path in turn). The second margin must cover the spread of that delay
 * between requests sent about a second apart: a request delayed more than one sent a second after it
 * moves the two closer, and 41 that we spread over 1 s + margin arrive within 1 s once the spread
 * passes the margin. `margin needed` is the largest such spread in the run (pairs sent ≤ 1.2 s apart).
 */
function printArrivals(m: Measured): void {
  const byPath = new Map<string, number[]>();
  const times = m.emulator.requestTimes;
  m.emulator.requestPaths.forEach((path, i) => {
    const list = byPath.get(path) ?? [];
    list.push(times[i] as number);
    byPath.set(path, list);
  });
  const pairs: { sent: number; delay: number }[] = [];
  for (const w of m.writes) {
    const arrival = byPath.get(w.path)?.shift();
    if (arrival !== undefined) pairs.push({ sent: w.at, delay: arrival - w.at });
  }
  if (pairs.length === 0) return;
  const delays = pairs.map((p) => p.delay).sort((a, b) => a - b);
  const pct = (q: number): number =>
    delays[Math.min(delays.length - 1, Math.floor((q / 100) * delays.length))] as number;
  let needed = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < pairs.length; i += 1) {
    const a = pairs[i] as { sent: number; delay: number };
    for (let j = i + 1; j < pairs.length; j += 1) {
      const b = pairs[j] as { sent: number; delay: number };
      if (b.sent - a.sent > 1200) break;
      needed = Math.max(needed, a.delay - b.delay);
    }
  }
  // The shortest span of any 41 requests in a row: under 1000 ms is 41 within one sliding second.
  const span41 = (sorted: readonly number[]): number => {
    let least = Number.POSITIVE_INFINITY;
    for (let i = 40; i < sorted.length; i += 1)
      least = Math.min(least, (sorted[i] as number) - (sorted[i - 40] as number));
    return least;
  };
  const most = (sorted: readonly number[]): number => {
    let best = 0;
    for (let i = 0, j = 0; i < sorted.length; i += 1) {
      while ((sorted[j] as number) <= (sorted[i] as number) - 1000) j += 1;
      best = Math.max(best, i - j + 1);
    }
    return best;
  };
  // From the scheduler's start of a request to its `sent` stamp (a new connection, our loop late):
  // a start the scheduler has forgotten by then (its window is past) is not moved, so not counted.
  const late = m.timeline
    .filter((r) => r.sentAt !== undefined)
    .map((r) => (r.sentAt as number) - (m.startedAt + r.startedMs))
    .sort((a, b) => a - b);
  const arrivals = [...times].sort((a, b) => a - b);
  const sent = m.writes.map((w) => w.at).sort((a, b) => a - b);
  // What the scheduler's windows counted: the `sent` stamps (its restamps), against the writes.
  const counted = m.timeline
    .map((r) => r.sentAt)
    .filter((v): v is number => v !== undefined)
    .sort((a, b) => a - b);
  process.stdout.write(
    `  arrival − send (gate's stamp − undici's write, ${pairs.length} of ${m.writes.length} writes matched): ` +
      `min ${delays[0]} / p50 ${pct(50)} / p99 ${pct(99)} / max ${delays.at(-1)} ms; ` +
      `most in a sliding 1 s: arrivals ${most(arrivals)}, writes ${most(sent)}; ` +
      `41 in a row spanned at least ${span41(arrivals)} ms arriving, ${span41(sent)} ms written, ${span41(counted)} ms counted by the scheduler; ` +
      `start to send max ${late.at(-1) ?? 0} ms (${late.filter((v) => v >= 1000).length} ≥ 1 s); ` +
      `margin needed ${needed} ms (largest delay of a request less that of one sent ≤ 1.2 s after it)\n`,
  );
}

function requestsByEndpoint(stats: Measured['emulator']): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [endpoint, n] of Object.entries(stats.byEndpoint)) out[endpoint] = n;
  return out;
}

function allRowsArrived(m: Measured): boolean {
  return Object.values(m.counts).every((c) => c.warehouse === c.api);
}

function printCounts(m: Measured): void {
  for (const [table, c] of Object.entries(m.counts)) {
    process.stdout.write(
      `  ${table.padEnd(14)} warehouse ${String(c.warehouse).padStart(7)}  api ${String(c.api).padStart(7)}\n`,
    );
  }
}

/** One line of the final table: a run at one latency. */
interface Row {
  readonly run: string;
  readonly latencyMs: number;
  readonly requests: number;
  readonly seconds: number;
  readonly floor: number;
  readonly marginFloor: number;
  readonly rateLimited: number;
  readonly exact: boolean;
}
const table: Row[] = [];

function report(run: string, latencyMs: number, m: Measured): void {
  const floor = minimumSeconds(requestsByEndpoint(m.emulator), DEFAULT_RATE_LIMITS);
  // The same requests with the scheduler's safety margins: what pacing within them can reach.
  const marginFloor = minimumSeconds(requestsByEndpoint(m.emulator), DEFAULT_RATE_LIMITS, margins);
  const row: Row = {
    run,
    latencyMs,
    requests: m.emulator.requests,
    seconds: m.seconds,
    floor,
    marginFloor,
    rateLimited: m.emulator.rateLimited,
    exact: allRowsArrived(m),
  };
  table.push(row);
  if (m.rateLimitedAt.length > 0) {
    process.stdout.write(`  429s reached the client at ${m.rateLimitedAt.map((t) => t.toFixed(1)).join(', ')} s\n`);
  }
  process.stdout.write(
    `  requests ${row.requests}  seconds ${row.seconds.toFixed(1)}  floor ${floor.toFixed(1)} (with our safety margins ${marginFloor.toFixed(1)})  ` +
      `efficiency ${(floor / m.seconds).toFixed(3)}  429s ${row.rateLimited}  busiest second ${m.emulator.maxPerSecond} (limit 40)  every row: ${row.exact ? 'yes' : 'NO'}\n`,
  );
}

async function run1(latencyMs: number): Promise<void> {
  process.stdout.write(
    `\nrun1 @ ${latencyMs} ms: 80,000 events of one project, documented limits (400/min per endpoint, 40/s)\n`,
  );
  const m = await measure(
    {
      seed: 101,
      projects: ['default'],
      eventsPerProject: 80_000,
      limits: { ...SPEC_RATE_LIMITS },
      latencyMs,
      ...serverDifferences,
    },
    { resources: [events], limits: DEFAULT_RATE_LIMITS },
  );
  report(`one endpoint (run1)${differs}`, latencyMs, m);
  printArrivals(m);
  printBreakdown(m);
  printCounts(m);
}

async function run2(latencyMs: number): Promise<void> {
  process.stdout.write(`\nrun2 @ ${latencyMs} ms: all five resources of three projects at once, documented limits\n`);
  const m = await measure(
    { seed: 202, eventsPerProject: 12_000, limits: { ...SPEC_RATE_LIMITS }, latencyMs },
    { project: '*', resources: RESOURCES, limits: DEFAULT_RATE_LIMITS },
  );
  report('all resources (run2)', latencyMs, m);
  printArrivals(m);
  // The longest stream bounds the run: a walk that cannot be split reads its pages one after another.
  const streams = [...m.summary.streams].sort((a, b) => b.seconds - a.seconds).slice(0, 3);
  process.stdout.write(
    `  longest streams: ${streams.map((st) => `${st.resource} ${st.scope} ${st.pages} pages in ${st.seconds.toFixed(1)} s`).join('; ')}\n`,
  );
  for (const [endpoint, n] of Object.entries(m.emulator.byEndpoint)) {
    const perMinute = m.emulator.maxPerMinuteByEndpoint[endpoint] ?? 0;
    process.stdout.write(
      `  ${endpoint.padEnd(20)} ${String(n).padStart(5)} requests  ${(n / m.seconds).toFixed(2)}/s  busiest minute ${perMinute} (limit 400)\n`,
    );
  }
  printBreakdown(m);
  printCounts(m);
}

async function run3(): Promise<void> {
  process.stdout.write(
    '\nrun3: the server allows half of what we are configured for (200/min, 20/s, search 25/min, gate 10/s)\n',
  );
  const half: RateLimits = { maxRpm: 200, searchRpm: 25, maxRps: 20, searchGateRps: 10 };
  const m = await measure(
    { seed: 303, eventsPerProject: 5_000, limits: half },
    { project: '*', resources: RESOURCES, limits: DEFAULT_RATE_LIMITS },
  );
  const floor = minimumSeconds(requestsByEndpoint(m.emulator), half);
  process.stdout.write(
    `  finished ${m.summary.ok ? 'ok' : 'FAILED'} in ${m.seconds.toFixed(1)} s (floor at the real limits ${floor.toFixed(1)} s)  ` +
      `requests ${m.emulator.requests}  429s ${m.emulator.rateLimited}  every row: ${allRowsArrived(m) ? 'yes' : 'NO'}\n` +
      `  converged: last 429 at ${(m.rateLimitedAt.at(-1) ?? 0).toFixed(1)} s; 429s at ${m.rateLimitedAt.map((t) => t.toFixed(1)).join(', ')}\n`,
  );
  printCounts(m);
}

// `-- run1 run2 --latency 0,100,300`: the runs to do (all by default), and the emulator's answer
// latencies for run1 and run2 (run3, about adapting to lower limits, runs at 0 ms).
const args = process.argv.slice(2);
const latencyArg = args[args.indexOf('--latency') + 1];
// `--margins 250,50`: the scheduler's safety margins (minute, second windows) in ms, to measure others than the defaults.
const marginsArg = args.includes('--margins') ? args[args.indexOf('--margins') + 1] : undefined;
const [minuteMs, secondMs] = (marginsArg ?? `${DEFAULT_SAFETY_MARGINS.minuteMs},${DEFAULT_SAFETY_MARGINS.secondMs}`)
  .split(',')
  .map((v) => Number(v));
if (!Number.isFinite(minuteMs) || !Number.isFinite(secondMs))
  throw new Error(`--margins: expected minute,second ms like 250,50, got ${String(marginsArg)}`);
const margins = { minuteMs: minuteMs as number, secondMs: secondMs as number };
process.stdout.write(
  `safety margins: ${margins.minuteMs} ms on minute windows, ${margins.secondMs} ms on second windows\n`,
);
const latencies = (args.includes('--latency') && latencyArg !== undefined ? latencyArg : '0,100,300')
  .split(',')
  .map((v) => Number(v));
if (latencies.some((v) => !Number.isFinite(v) || v < 0))
  throw new Error(`--latency: expected ms values like 0,100,300, got ${String(latencyArg)}`);
// `--lacks timeseries`, `--timeseries-intervals hour,day`, `--timeseries-shape rows`: the server run1 plays.
const flagValue = (flag: string): string | undefined =>
  args.includes(flag) ? args[args.indexOf(flag) + 1] : undefined;
const serverDifferences: Pick<EmulatorOptions, 'lacks' | 'timeseriesIntervals' | 'timeseriesShape'> = {
  ...(flagValue('--lacks') === undefined
    ? {}
    : { lacks: (flagValue('--lacks') ?? '').split(',') as EmulatorOptions['lacks'] }),
  ...(flagValue('--timeseries-intervals') === undefined
    ? {}
    : { timeseriesIntervals: (flagValue('--timeseries-intervals') ?? '').split(',') }),
  ...(flagValue('--timeseries-shape') === 'rows' ? { timeseriesShape: 'rows' as const } : {}),
};
const differs = Object.keys(serverDifferences).length === 0 ? '' : ` ${JSON.stringify(serverDifferences)}`;
const runs: Record<string, (latencyMs: number) => Promise<void>> = { run1, run2, run3: () => run3() };
const chosen = args.filter((a) => a in runs);
for (const name of chosen.length > 0 ? chosen : Object.keys(runs)) {
  for (const latencyMs of name === 'run3' ? [0] : latencies)
    await (runs[name] as (latencyMs: number) => Promise<void>)(latencyMs);
}
if (table.length > 0) {
  process.stdout.write(
    '\nrun                    latency  requests  seconds   floor  efficiency  429s  every row  floor with margins\n',
  );
  for (const r of table) {
    process.stdout.write(
      `${r.run.padEnd(22)} ${`${r.latencyMs} ms`.padStart(7)}  ${String(r.requests).padStart(8)}  ${r.seconds.toFixed(1).padStart(7)}  ` +
        `${r.floor.toFixed(1).padStart(6)}  ${(r.floor / r.seconds).toFixed(3).padStart(10)}  ${String(r.rateLimited).padStart(4)}  ${(r.exact ? 'yes' : 'NO').padEnd(9)}  ${r.marginFloor.toFixed(1)}\n`,
    );
  }
}
