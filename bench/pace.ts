/**
 * Pacing benchmark (issue 3). Runs the real pipeline against the emulator enforcing the documented
 * limits and prints figures. Not part of `npm test`: `npm run bench:pace [-- run1|run2|run3]`.
 *
 *  run1  ≥ 80,000 events of one project: requests, seconds, the floor of the limits, efficiency.
 *  run2  all five resources of three projects at once: rate per endpoint, busiest second, 429s.
 *  run3  the emulator's limits at half of ours: time, 429s, and whether every row arrived.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RESOURCES } from '../connectors/index.js';
import { events } from '../connectors/events.js';
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/log.js';
import type { ResourceDefinition } from '../src/core/types.js';
import type { EmulatorOptions, EmulatorStats } from '../src/emulator/index.js';
import { startEmulatorThread } from '../src/emulator/thread.js';
import { DEFAULT_RATE_LIMITS, type RateLimits, type RequestBudget } from '../src/http/budget.js';
import { ApiClient } from '../src/http/client.js';
import { minimumSeconds } from '../src/http/floor.js';
import { createScheduler } from '../src/http/scheduler.js';
import { DuckDbDestination } from '../src/load/duckdb.js';
import { runSync, type RunSummary } from '../src/pipeline/run.js';
import { StateStore } from '../src/state/store.js';


interface Measured {
  readonly summary: RunSummary;
  readonly seconds: number;
  readonly emulator: EmulatorStats;
  readonly counts: Record<string, { warehouse: number; api: number }>;
  /** Seconds from the start at which each 429 reached the scheduler. */
  readonly rateLimitedAt: readonly number[];
}

async function measure(
  emulatorOptions: EmulatorOptions,
  sync: { project?: string; resources: readonly ResourceDefinition[]; limits: RateLimits },
): Promise<Measured> {
  const seedStarted = Date.now();
  const emu = await startEmulatorThread(emulatorOptions);
  process.stdout.write(`  (emulator seeded in ${((Date.now() - seedStarted) / 1000).toFixed(1)} s, on its own thread)\n`);
  const dir = mkdtempSync(join(tmpdir(), 'qs-pace-'));
  const logger = silentLogger();
  const scheduler = createScheduler({ limits: sync.limits });
  const rateLimitedAt: number[] = [];
  let started = Date.now();
  const budget: RequestBudget = {
    schedule: (endpoint, task, options) => scheduler.schedule(endpoint, task, options),
    stats: () => scheduler.stats(),
    onRateLimited: (endpoint, retryAfterMs) => {
      rateLimitedAt.push((Date.now() - started) / 1000);
      scheduler.onRateLimited(endpoint, retryAfterMs);
    },
  };
  const client = new ApiClient({
    baseUrl: emu.url,
    apiKey: emu.apiKey,
    projectHeader: 'X-Service-Project-Id',
    budget,
    clock: systemClock,
    logger,
  });
  const destination = await DuckDbDestination.open(join(dir, 'w.duckdb'));
  const state = await StateStore.open(join(dir, 'state.json'), { clock: systemClock, purpose: 'sync' });
  try {
    await emu.resetStats();
    started = Date.now();
    const summary = await runSync(
      { resources: sync.resources, project: sync.project, lookbackMs: 15 * 60_000 },
      { client, destination, state, clock: systemClock, logger },
    );
    const seconds = (Date.now() - started) / 1000;
    const api = await emu.counts(Date.parse(summary.startedAt));
    const counts: Measured['counts'] = {};
    for (const r of sync.resources) counts[r.name] = { warehouse: await destination.count(r.name), api: api[r.name] ?? -1 };
    return { summary, seconds, emulator: await emu.stats(), counts, rateLimitedAt };
  } finally {
    await destination.close();
    await client.close();
    await state.close();
    await emu.close();
    rmSync(dir, { recursive: true, force: true });
  }
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
    process.stdout.write(`  ${table.padEnd(14)} warehouse ${String(c.warehouse).padStart(7)}  api ${String(c.api).padStart(7)}\n`);
  }
}

async function run1(): Promise<void> {
  process.stdout.write('\nrun1: 80,000 events of one project, documented limits (400/min per endpoint, 40/s)\n');
  const m = await measure(
    { seed: 101, projects: ['default'], eventsPerProject: 80_000, limits: { ...DEFAULT_RATE_LIMITS } },
    { resources: [events], limits: DEFAULT_RATE_LIMITS },
  );
  const floor = minimumSeconds(requestsByEndpoint(m.emulator), DEFAULT_RATE_LIMITS);
  process.stdout.write(
    `  requests ${m.emulator.requests}  seconds ${m.seconds.toFixed(1)}  floor ${floor.toFixed(1)}  ` +
      `efficiency ${(floor / m.seconds).toFixed(3)}  429s ${m.emulator.rateLimited}  busiest second ${m.emulator.maxPerSecond}\n`,
  );
  printCounts(m);
}

async function run2(): Promise<void> {
  process.stdout.write('\nrun2: all five resources of three projects at once, documented limits\n');
  const m = await measure(
    { seed: 202, eventsPerProject: 12_000, limits: { ...DEFAULT_RATE_LIMITS } },
    { project: '*', resources: RESOURCES, limits: DEFAULT_RATE_LIMITS },
  );
  const floor = minimumSeconds(requestsByEndpoint(m.emulator), DEFAULT_RATE_LIMITS);
  process.stdout.write(
    `  requests ${m.emulator.requests}  seconds ${m.seconds.toFixed(1)}  floor ${floor.toFixed(1)}  efficiency ${(floor / m.seconds).toFixed(3)}\n` +
      `  busiest 1-second window ${m.emulator.maxPerSecond} (limit 40)  429s ${m.emulator.rateLimited}\n`,
  );
  for (const [endpoint, n] of Object.entries(m.emulator.byEndpoint)) {
    const perMinute = m.emulator.maxPerMinuteByEndpoint[endpoint] ?? 0;
    process.stdout.write(
      `  ${endpoint.padEnd(20)} ${String(n).padStart(5)} requests  ${(n / m.seconds).toFixed(2)}/s  busiest minute ${perMinute} (limit 400)\n`,
    );
  }
  printCounts(m);
}

async function run3(): Promise<void> {
  process.stdout.write('\nrun3: the server allows half of what we are configured for (200/min, 20/s, search 25/min, gate 10/s)\n');
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

const runs: Record<string, () => Promise<void>> = { run1, run2, run3 };
const chosen = process.argv.slice(2).filter((a) => a in runs);
for (const name of chosen.length > 0 ? chosen : Object.keys(runs)) await (runs[name] as () => Promise<void>)();
