/**
 * Backfill benchmark (issue 5). Not part of `npm test`: `npm run bench:backfill [-- 100k|1m]`.
 *
 *  100k (default)  ≥ 100,000 events of one project over 30 days, the documented limits enforced by
 *                  the emulator: `plan`, then `backfill --concurrency 4`. Prints the elapsed time
 *                  against the floor of the limits (`minimumSeconds`), plan's ETA against the real
 *                  time, the requests and 429s, and the backfill's peak memory.
 *  1m              1,000,000 events, limits off (emulator and client): peak memory of a large
 *                  backfill (target: under 300 MB, flat).
 *  2y              4,000 events over two years, every resource, limits off: 731 daily windows ×
 *                  4 windowed resources, so many small windows, each rewriting the state (the
 *                  ledger grows with every window) — DuckDB's memory at a long history (docs/memory.md).
 *  windows         the same many small windows (2,928 = 732 daily windows × 4 windowed resources),
 *                  limits off so only our own work counts: seconds per window, requests per window
 *                  and by route, CPU seconds of the backfill process (issue 34's 2,924-window case).
 *
 * Any failure (the backfill's exit code, rows missing) exits non-zero: a run out of memory fails loudly.
 *
 * The emulator runs in this process; `plan` and `backfill` run as the real CLI in child processes,
 * so the backfill's memory (`process.resourceUsage().maxRSS`, via `rss-probe.js`) is its own.
 *
 * Environment: BENCH_BACKFILL_ARGS (more backfill flags), BENCH_CHILD_NODE_FLAGS (node flags for
 * the backfill process), BENCH_CHILD_STDERR (print the backfill process's stderr), BENCH_SAMPLES (print every memory sample), BENCH_CLI (another build's
 * `dist/bin/cli.js`, to measure a commit before a change side by side with this one), BENCH_DAYS
 * (days of history, and of daily windows, instead of the mode's).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmulator } from '../emulator/index.js';
import { DEFAULT_RATE_LIMITS, type RateLimits } from '../src/http/scheduler/budget.js';
import { minimumSeconds } from '../src/http/scheduler/floor.js';
import { DuckDbDestination } from '../src/load/duckdb/destination.js';
import { cursorMillis } from '../src/normalize/normalize.js';
import type { Plan } from '../src/reports/plan.js';
import { RESOURCES } from '../connectors/index.js';
import type { ApiRecord } from '../src/core/types.js';

const DAY = 86_400_000;
const here = fileURLToPath(new URL('.', import.meta.url));
const CLI = process.env.BENCH_CLI ?? join(here, '..', 'bin', 'cli.js');
const PROBE = join(here, 'rss-probe.js');

interface Mode {
  readonly name: string;
  readonly events: number;
  /** Limits of the emulator and the client; `undefined`: none (the client gets huge ones). */
  readonly limits: RateLimits | undefined;
  /** Days of history (and of daily windows). @default 30 */
  readonly days?: number;
  /** `--resources`; undefined: all of them. @default events */
  readonly resources?: string | undefined;
  /** Print seconds and requests per window (the ledger's windows), and requests by route. */
  readonly perWindow?: boolean;
}

const MODES: Readonly<Record<string, Mode>> = {
  '100k': { name: '100k events, documented limits', events: 100_000, limits: { ...DEFAULT_RATE_LIMITS } },
  '1m': { name: '1M events, limits off', events: 1_000_000, limits: undefined },
  '2y': {
    name: '4,000 events over two years (731 daily windows), every resource, limits off',
    events: 4_000,
    limits: undefined,
    days: 731,
    resources: undefined,
  },
  windows: {
    name: 'many small windows: 4,000 events over two years in daily windows, every resource, limits off',
    events: 4_000,
    limits: undefined,
    days: 731,
    resources: undefined,
    perWindow: true,
  },
};

interface ChildResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly seconds: number;
}

function run(args: readonly string[], env: NodeJS.ProcessEnv): Promise<ChildResult> {
  const started = performance.now();
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  return new Promise((resolve) => {
    child.on('close', (code) => resolve({ code, stdout, stderr, seconds: (performance.now() - started) / 1000 }));
  });
}

function fmt(seconds: number): string {
  return seconds < 60 ? `${seconds.toFixed(1)} s` : `${Math.floor(seconds / 60)} min ${(seconds % 60).toFixed(1)} s`;
}

async function main(): Promise<number> {
  const mode = MODES[process.argv[2] ?? '100k'];
  if (mode === undefined) {
    process.stderr.write(`usage: node dist/bench/backfill.js [${Object.keys(MODES).join('|')}]\n`);
    return 2;
  }
  const out = (line: string): void => void process.stdout.write(`${line}\n`);
  out(`== backfill benchmark: ${mode.name} ==`);
  const seedStarted = performance.now();
  const days = Number(process.env.BENCH_DAYS ?? mode.days ?? 30);
  const emu = await startEmulator({
    seed: 5,
    eventsPerProject: mode.events,
    projects: ['default'],
    historyDays: days,
    limits: mode.limits ?? false,
  });
  out(
    `emulator: ${mode.events} events of project "default" over ${days} days, seeded in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'qs-bench-backfill-'));
  try {
    const now = new Date();
    const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
    const from = new Date(today - days * DAY).toISOString();
    const to = new Date(today + DAY).toISOString();
    const limitFlags = mode.limits === undefined ? ['--max-rpm', '1000000', '--max-rps', '1000000'] : [];
    const clientLimits: RateLimits = mode.limits ?? { ...DEFAULT_RATE_LIMITS, maxRpm: 1_000_000, maxRps: 1_000_000 };
    const resources = 'resources' in mode ? mode.resources : 'events';
    const common = [
      '--from',
      from,
      '--to',
      to,
      ...(resources === undefined ? [] : ['--resources', resources]),
      '--duckdb-path',
      join(dir, 'w.duckdb'),
      '--state',
      join(dir, 'state.json'),
      ...limitFlags,
    ];
    const env = { QUERY_API_BASE_URL: emu.url, QUERY_API_KEY: emu.apiKey };

    const planned = await run([CLI, 'plan', ...common, '--json'], env);
    if (planned.code !== 0) throw new Error(`plan failed: ${planned.stdout}${planned.stderr}`);
    const plan = JSON.parse(planned.stdout) as Plan;
    const planRows = plan.rows.find((r) => r.resource === 'events')?.rows ?? 0;
    out(
      `plan: [${from}, ${to}) in 1d windows: ${planRows} rows, ${plan.requestsByEndpoint['/v1/events'] ?? 0} requests, ETA (floor of the limits) ${fmt(plan.minimumSeconds)}; took ${planned.seconds.toFixed(1)} s, ${plan.countRequests} count requests`,
    );

    emu.resetStats();
    const nodeFlags = (process.env.BENCH_CHILD_NODE_FLAGS ?? '').split(' ').filter(Boolean);
    const backfill = await run(
      [
        ...nodeFlags,
        '--import',
        PROBE,
        CLI,
        'backfill',
        ...common,
        '--concurrency',
        '4',
        '--quiet',
        ...(process.env.BENCH_BACKFILL_ARGS ?? '').split(' ').filter(Boolean),
      ],
      env,
    );
    if (backfill.code !== 0)
      throw new Error(`backfill failed (${String(backfill.code)}): ${backfill.stdout}${backfill.stderr}`);
    // BENCH_CHILD_STDERR: print what the backfill process wrote to stderr (a probe passed in BENCH_CHILD_NODE_FLAGS).
    if (process.env.BENCH_CHILD_STDERR !== undefined) out(backfill.stderr.trimEnd());
    const probeLine = backfill.stderr.split('\n').find((l) => l.startsWith('rss-probe '));
    const probe =
      probeLine === undefined
        ? undefined
        : (JSON.parse(probeLine.slice('rss-probe '.length)) as {
            maxRssMb: number;
            cpuSeconds?: number;
            samplesMb: number[];
            heapMb?: number[];
            peakSample?: { rssMb: number; heapMb: number; externalMb: number; second: number };
          });
    const stats = emu.stats();
    const requests = stats.byEndpoint['/v1/events'] ?? 0;
    const floor = minimumSeconds(stats.byEndpoint, clientLimits);
    const inner = /in ([\d.]+) s/.exec(backfill.stdout)?.[1];

    const db = await DuckDbDestination.open(join(dir, 'w.duckdb'));
    const rows = await db.count('events');
    // Every row exact (perWindow): each table of a resource read by window holds exactly the
    // emulator's records of [from, to), each at its cursor value (the newest copy).
    const inexact: string[] = [];
    if (mode.perWindow === true) {
      const [fromMs, toMs] = [Date.parse(from), Date.parse(to)];
      for (const resource of RESOURCES) {
        if (resource.mode === 'full' || resource.cursorField === undefined) continue;
        const want = new Map<string, number | undefined>();
        for (const r of emu.snapshot(resource.name)) {
          const ms = cursorMillis(resource, r);
          if (ms !== undefined && ms >= fromMs && ms < toMs)
            want.set(`${String(r.project_id)}|${String(r[resource.key])}`, ms);
        }
        const got = await db.query(
          `SELECT project_id, "${resource.key}" AS k, "${resource.cursorField}" AS c FROM "${resource.name}"`,
        );
        let wrong = got.length === want.size ? 0 : Math.abs(got.length - want.size);
        for (const row of got) {
          const ms = cursorMillis(resource, { [resource.cursorField]: row.c } as ApiRecord);
          if (want.get(`${String(row.project_id)}|${String(row.k)}`) !== ms) wrong += 1;
        }
        if (wrong > 0) inexact.push(`${resource.name}: ${got.length} rows, ${want.size} expected, ${wrong} wrong`);
        else out(`  ${resource.name}: ${got.length} rows, each exact (key and ${resource.cursorField})`);
      }
    }
    await db.close();

    const samples = probe?.samplesMb ?? [];
    const at = (q: number, of: readonly number[] = samples): number | undefined =>
      of[Math.min(of.length - 1, Math.floor(q * (of.length - 1)))];
    out(
      `backfill --concurrency 4: ${fmt(backfill.seconds)} wall (process start to exit; the run itself ${inner ?? '?'} s)`,
    );
    out(
      `  rows in the warehouse: ${rows} (plan said ${planRows}); requests ${requests} (plan said ${plan.requestsByEndpoint['/v1/events'] ?? 0}); 429s ${stats.rateLimited}`,
    );
    if (mode.limits !== undefined) {
      out(
        `  floor of the limits for ${requests} requests: ${fmt(floor)}; elapsed / floor = ${(backfill.seconds / Math.max(floor, 1e-9)).toFixed(3)} (wall), ${(Number(inner) / Math.max(floor, 1e-9)).toFixed(3)} (run)`,
      );
      out(
        `  plan's ETA ${fmt(plan.minimumSeconds)} vs real ${fmt(Number(inner))}: off by ${(Number(inner) - plan.minimumSeconds).toFixed(1)} s (${((Number(inner) / plan.minimumSeconds - 1) * 100).toFixed(1)} %)`,
      );
    } else {
      out(
        `  throughput: ${Math.round(rows / Number(inner))} rows/s, ${Math.round(requests / Number(inner))} requests/s`,
      );
    }
    out(
      `  peak RSS of the backfill process: ${probe?.maxRssMb ?? '?'} MB (samples at 25/50/75/100 % of the run: ${[0.25, 0.5, 0.75, 1].map((q) => at(q)).join(' / ')} MB; of which V8 heap ${[0.25, 0.5, 0.75, 1].map((q) => at(q, probe?.heapMb ?? [])).join(' / ')} MB)`,
    );
    if (mode.perWindow === true) {
      const ledger = (
        JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as {
          sections: { backfills?: { streams: Record<string, { done: { windows?: number }[] }> } };
        }
      ).sections.backfills;
      // Finished windows (an entry is an interval of merged windows: `windows`, else one).
      const windows = Object.values(ledger?.streams ?? {}).reduce(
        (n, s) => n + s.done.reduce((m, d) => m + (d.windows ?? 1), 0),
        0,
      );
      const all = Object.values(stats.byEndpoint).reduce((n, c) => n + c, 0);
      const run = Number(inner);
      out(
        `  windows done in the ledger: ${windows}; ${((run / windows) * 1000).toFixed(1)} ms a window (run), ${(all / windows).toFixed(2)} requests a window; CPU ${probe?.cpuSeconds ?? '?'} s (${(((probe?.cpuSeconds ?? Number.NaN) / windows) * 1000).toFixed(1)} ms a window)`,
      );
      out(`  requests ${all}, by route: ${JSON.stringify(stats.byEndpoint)}`);
    }
    const peak = probe?.peakSample;
    if (process.env.BENCH_SAMPLES !== undefined)
      out(
        `  samples (MB, every 0.5 s): ${(probe?.samplesMb ?? []).join(' ')}\n  V8 heap: ${(probe?.heapMb ?? []).join(' ')}`,
      );
    if (peak !== undefined)
      out(
        `  largest 100 ms sample: ${peak.rssMb} MB at ${peak.second.toFixed(1)} s (V8 heap ${peak.heapMb} MB, external ${peak.externalMb} MB then)`,
      );
    for (const line of inexact) out(`  NOT EXACT: ${line}`);
    return rows === planRows && inexact.length === 0 ? 0 : 1;
  } finally {
    await emu.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`bench failed: ${String((error as Error)?.stack ?? error)}\n`);
    process.exitCode = 1;
  },
);
