/**
 * Two `--traces all` syncs back to back under the documented limits (issue 21): the 429s each
 * draws. Not part of `npm test`: `npm run bench:traces-back-to-back`.
 *
 * The emulator (real flavor: traces per event; events without `model`, so only `all` reads every
 * span) runs on threads of its own with the documented limits kept by its gate; each sync is the
 * real CLI in a child process. Run 1 reads EVENTS events and their traces; BENCH_GAP_MS after run 1
 * STARTED (default 25 s, or when it ends if later), NEW events are added and run 2 starts. Before
 * issue 21, run 2 did not know what run 1 had spent in the current minute window.
 *
 * Environment: BENCH_EVENTS (default 600), BENCH_NEW (default 300), BENCH_GAP_MS (default 25000).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_RATE_LIMITS } from '../src/http/scheduler/budget.js';
import { SPEC_RATE_LIMITS } from '../emulator/index.js';
import { startEmulatorThread } from '../emulator/thread.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const CLI = join(here, '..', 'bin', 'cli.js');

function sync(url: string, apiKey: string, dir: string): Promise<{ code: number | null; seconds: number }> {
  const started = Date.now();
  const args = [
    'sync',
    '--resources',
    'events,traces',
    '--traces',
    'all',
    '--duckdb-path',
    join(dir, 'w.duckdb'),
    '--state',
    join(dir, 'state.json'),
    '--log-level',
    'warn',
  ];
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { ...process.env, QUERY_API_BASE_URL: url, QUERY_API_KEY: apiKey },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return new Promise((resolve) =>
    child.on('close', (code) => resolve({ code, seconds: (Date.now() - started) / 1000 })),
  );
}

const events = Number(process.env.BENCH_EVENTS ?? 600);
const fresh = Number(process.env.BENCH_NEW ?? 300);
const gapMs = Number(process.env.BENCH_GAP_MS ?? 25_000);
const emu = await startEmulatorThread({
  flavor: 'real',
  seed: 21,
  projects: ['default'],
  eventsPerProject: events,
  enrichAfterMs: 0,
  hideModel: true,
  limits: { ...SPEC_RATE_LIMITS },
});
const dir = mkdtempSync(join(tmpdir(), 'qs-b2b-'));
try {
  const t0 = Date.now();
  const first = await sync(emu.url, emu.apiKey, dir);
  const s1 = await emu.stats();
  await new Promise((r) => setTimeout(r, Math.max(0, t0 + gapMs - Date.now())));
  await emu.addEvents('default', fresh);
  const second = await sync(emu.url, emu.apiKey, dir);
  const s2 = await emu.stats();
  console.log(
    `run 1: exit ${first.code}, ${first.seconds.toFixed(1)} s, ${s1.byEndpoint['/v1/traces'] ?? 0} trace requests, ${s1.rateLimited} x 429`,
  );
  console.log(
    `run 2: exit ${second.code}, ${second.seconds.toFixed(1)} s, ${(s2.byEndpoint['/v1/traces'] ?? 0) - (s1.byEndpoint['/v1/traces'] ?? 0)} trace requests, ${s2.rateLimited - s1.rateLimited} x 429`,
  );
  const loops = await emu.loopDelay();
  console.log(
    `event-loop delay of the emulator's gate (its arrival stamps are late by as much): p99 ${loops.gate?.p99Ms ?? '?'} ms, max ${loops.gate?.maxMs ?? '?'} ms; the scheduler's minute margin is 250 ms`,
  );
  console.log(
    `busiest minute of /v1/traces as the server counted it: ${s2.maxPerMinuteByEndpoint['/v1/traces'] ?? 0} (limit ${DEFAULT_RATE_LIMITS.maxRpm}); busiest second: ${s2.maxPerSecond} (limit ${DEFAULT_RATE_LIMITS.maxRps})`,
  );
} finally {
  await emu.close();
  rmSync(dir, { recursive: true, force: true });
}
