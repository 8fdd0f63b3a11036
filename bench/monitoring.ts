/**
 * What each monitoring mechanism costs a run (docs/monitoring.md): the real CLI against the emulator
 * (limits off), a sync with little to read into a real DuckDB file, run with no monitoring and with
 * each mechanism alone (the real Pushgateway, a local ping and webhook endpoint answering at once),
 * in rotating order. Printed per variant, medians: the run's wall time, and the time its end spent
 * publishing (the `monitoring: the run's end published in N ms` line: metrics made by prom-client,
 * loaded then, and sent; the end ping; the notifications). Then the monitor alone, in this process:
 * each mechanism's end 21 times, the first (which loads prom-client) apart from the median of the rest.
 *
 *   npm run bench:monitoring [-- ROUNDS]   (default 7)
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmulator, type Emulator } from '../emulator/index.js';
import { events } from '../connectors/events.js';
import { systemClock } from '../src/core/clock.js';
import { silentLogger } from '../src/core/log.js';
import { DEFAULT_RATE_LIMITS, type RequestBudget } from '../src/http/scheduler/budget.js';
import { newCallStats } from '../src/http/client.js';
import { startRunMonitor, type MonitorSettings } from '../src/monitor/monitor.js';

const CLI = join(process.cwd(), 'dist', 'bin', 'cli.js');
const rounds = Number(process.argv[2] ?? 7);

interface Run {
  readonly wallMs: number;
  readonly endMs: number | undefined;
}

function sync(emu: Emulator, dir: string, extra: readonly string[]): Promise<Run> {
  const started = Date.now();
  const child = spawn(
    process.execPath,
    [
      CLI,
      'sync',
      '--project',
      'alpha',
      '--resources',
      'events,users',
      '--duckdb-path',
      join(dir, 'w.duckdb'),
      '--state',
      join(dir, 'state.json'),
      '--log-format',
      'json',
      ...extra,
    ],
    {
      env: { ...process.env, QUERY_API_BASE_URL: emu.url, QUERY_API_KEY: emu.apiKey },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let err = '';
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  return new Promise((resolve, reject) =>
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`sync exited ${code}: ${err.slice(-2000)}`));
      const line = err.split('\n').find((l) => l.includes("monitoring: the run's end published"));
      const endMs = line === undefined ? undefined : Number((JSON.parse(line) as { totalMs: number }).totalMs);
      resolve({ wallMs: Date.now() - started, endMs });
    }),
  );
}

async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};

const emu = await startEmulator({ seed: 5, eventsPerProject: 400, limits: false });
const dir = mkdtempSync(join(tmpdir(), 'qs-bench-monitoring-'));
const port = await freePort();
const gateway = spawn('prometheus-pushgateway', [`--web.listen-address=127.0.0.1:${port}`], { stdio: 'ignore' });
const receiver = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.end('OK'));
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
const local = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
try {
  await sync(emu, dir, []); // the first sync: the figure is an ordinary scheduled run after it
  const variants: Record<string, readonly string[]> = {
    none: [],
    'metrics file': ['--metrics-file', join(dir, 'q.prom')],
    Pushgateway: ['--pushgateway', `http://127.0.0.1:${port}`],
    ping: ['--ping-url', `${local}/ping/uuid`],
    notify: ['--notify-url', `${local}/hook`, '--notify-on', 'stale', '--max-lag', '1ms'],
    all: [
      '--metrics-file',
      join(dir, 'q.prom'),
      '--pushgateway',
      `http://127.0.0.1:${port}`,
      '--ping-url',
      `${local}/ping/uuid`,
      '--notify-url',
      `${local}/hook`,
      '--notify-on',
      'stale',
      '--max-lag',
      '1ms',
    ],
  };
  const names = Object.keys(variants);
  const runs = new Map<string, Run[]>(names.map((n) => [n, []]));
  for (let r = 0; r < rounds; r++) {
    emu.addEvents('alpha', 20);
    for (let i = 0; i < names.length; i++) {
      const name = names[(i + r) % names.length] as string;
      runs.get(name)?.push(await sync(emu, dir, variants[name] ?? []));
    }
  }
  process.stdout.write(`${rounds} rounds, medians (ms):\n`);
  process.stdout.write(`${'variant'.padEnd(14)} ${'run (wall)'.padStart(11)} ${'end publish'.padStart(12)}\n`);
  for (const name of names) {
    const list = runs.get(name) ?? [];
    const end = list.flatMap((x) => (x.endMs === undefined ? [] : [x.endMs]));
    process.stdout.write(
      `${name.padEnd(14)} ${String(median(list.map((x) => x.wallMs))).padStart(11)} ${(end.length === 0 ? '—' : String(median(end))).padStart(12)}\n`,
    );
  }
  process.stdout.write('\nthe monitor alone, in this process (ms): first, then the median of 20\n');
  const budget: RequestBudget = {
    schedule: (_e, task) => task(() => undefined),
    onRateLimited: () => undefined,
    stats: () => ({
      requests: 4,
      rateLimited: 0,
      maxPerSecond: 1,
      endpoints: { '/v1/events': { requests: 4, rateLimited: 0, waitedMs: 10, currentRpm: 400 } },
    }),
  };
  const doc = {
    version: 1 as const,
    streams: { 'events:alpha': { mark: new Date(Date.now() - 60_000).toISOString() } },
    projects: [],
    sections: {},
  };
  const alone: Record<string, Omit<MonitorSettings, 'name' | 'timeoutMs'>> = {
    'metrics file': { metricsFile: join(dir, 'alone.prom') },
    Pushgateway: { pushgateway: { url: `http://127.0.0.1:${port}`, job: 'bench', instance: 'alone' } },
    ping: { ping: { url: `${local}/ping/uuid`, exitCode: false } },
    notify: { notify: { url: `${local}/hook`, on: ['stale'] }, maxLagMs: 1 },
  };
  for (const [name, settings] of Object.entries(alone)) {
    const times: number[] = [];
    for (let i = 0; i < 21; i++) {
      const t0 = performance.now();
      const monitor = startRunMonitor({
        command: 'sync',
        runId: `bench-${i}`,
        settings: { name: 'w', timeoutMs: 5000, ...settings },
        everyMs: 0,
        resources: [events],
        limits: DEFAULT_RATE_LIMITS,
        secrets: [],
        clock: systemClock,
        logger: silentLogger(),
      });
      monitor.attach({ state: { document: doc }, budget });
      monitor.observe({}).onStreamDone?.({
        resource: 'events',
        scope: 'alpha',
        outcome: 'ok',
        rows: 10,
        pages: 1,
        windows: 1,
        stats: newCallStats(),
        seconds: 1,
      });
      await monitor.finish({ code: 0, output: ['sync ok'] });
      times.push(performance.now() - t0);
    }
    process.stdout.write(
      `${name.padEnd(14)} ${(times[0] ?? 0).toFixed(1).padStart(8)} ${median(times.slice(1)).toFixed(1).padStart(8)}\n`,
    );
  }
} finally {
  gateway.kill('SIGKILL');
  receiver.close();
  await emu.close();
  rmSync(dir, { recursive: true, force: true });
}
