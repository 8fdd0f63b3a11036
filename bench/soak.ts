/**
 * Soak benchmark (issue 34 item 4: a run costs what is new, on disk too). Not part of `npm test`:
 *
 *   npm run bench:soak [-- RUNS [NEW_EVENTS_PER_RUN]]      (default: 60 runs, 0 new events)
 *
 * The emulator in this process (limits off: the figures are our own costs), the real CLI in child
 * processes against one DuckDB warehouse and state file: a first sync of 3,000 events of one
 * project, then RUNS syncs, each after NEW_EVENTS_PER_RUN new events (0: nothing new). Per run it
 * prints the working file's size (`w.work.duckdb`, with its WAL), the published catalog's and the
 * Parquet set's, the files of the Parquet set written by the run, the run's requests, rows, wall
 * and CPU seconds; at the end the growth over the runs and per run.
 *
 * Environment: BENCH_CLI (another build's `dist/bin/cli.js`, to run the commit before a change side
 * by side), BENCH_SYNC_ARGS (more sync flags), BENCH_EVENTS (events of the first sync), BENCH_KEEP
 * (keep the folder, to look into the files).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmulator, type Emulator } from '../emulator/index.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const CLI = process.env.BENCH_CLI ?? join(here, '..', 'bin', 'cli.js');
const PROBE = join(here, 'rss-probe.js');
const runs = Number(process.argv[2] ?? 60);
const added = Number(process.argv[3] ?? 0);
const firstEvents = Number(process.env.BENCH_EVENTS ?? 3_000);

interface Run {
  readonly requests: number;
  readonly rows: number;
  readonly seconds: number;
  readonly cpuSeconds: number;
}

function sync(emu: Emulator, dir: string): Promise<Run> {
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [
      '--import',
      PROBE,
      CLI,
      'sync',
      '--duckdb-path',
      join(dir, 'w.duckdb'),
      '--state',
      join(dir, 'state.json'),
      '--max-rpm',
      '1000000',
      '--max-rps',
      '1000000',
      '--json',
      '--log-level',
      'warn',
      ...(process.env.BENCH_SYNC_ARGS ?? '').split(' ').filter(Boolean),
    ],
    {
      env: { ...process.env, QUERY_API_BASE_URL: emu.url, QUERY_API_KEY: emu.apiKey },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  return new Promise((resolve, reject) =>
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`sync exited ${code}: ${out}${err}`));
      const json = JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as { totals: { requests: number; rows: number } };
      const probe = err.split('\n').find((l) => l.startsWith('rss-probe '));
      const cpuSeconds =
        probe === undefined
          ? Number.NaN
          : (JSON.parse(probe.slice('rss-probe '.length)) as { cpuSeconds: number }).cpuSeconds;
      resolve({
        requests: json.totals.requests,
        rows: json.totals.rows,
        seconds: (performance.now() - started) / 1000,
        cpuSeconds,
      });
    }),
  );
}

const size = (path: string): number => (existsSync(path) ? statSync(path).size : 0);

/** Every file under `dir` with its size and modification time. */
function files(dir: string): Map<string, { size: number; mtimeMs: number }> {
  const out = new Map<string, { size: number; mtimeMs: number }>();
  if (!existsSync(dir)) return out;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    const s = statSync(path);
    out.set(path, { size: s.size, mtimeMs: s.mtimeMs });
  }
  return out;
}

const kb = (bytes: number): string => `${(bytes / 1024).toFixed(0)} KB`;

async function main(): Promise<void> {
  const out = (line: string): void => void process.stdout.write(`${line}\n`);
  const emu = await startEmulator({ seed: 7, eventsPerProject: firstEvents, projects: ['default'], limits: false });
  const dir = mkdtempSync(join(tmpdir(), 'qs-bench-soak-'));
  const work = join(dir, 'w.work.duckdb');
  const parquet = join(dir, 'w.duckdb.files');
  try {
    out(`== soak: a first sync of ${firstEvents} events, then ${runs} syncs with ${added} new events each ==`);
    const first = await sync(emu, dir);
    const base = { work: size(work) + size(`${work}.wal`), published: size(join(dir, 'w.duckdb')) };
    let before = files(parquet);
    const setBytes = (m: Map<string, { size: number }>): number => [...m.values()].reduce((n, f) => n + f.size, 0);
    out(
      `first sync: ${first.rows} rows, ${first.requests} requests, ${first.seconds.toFixed(1)} s (CPU ${first.cpuSeconds} s); working file ${kb(base.work)}, Parquet set ${kb(setBytes(before))} in ${before.size} files`,
    );
    out('run  new  rows  requests  wall s  CPU s  working file (+WAL)  Δ working  Parquet set  files written');
    const seconds: number[] = [];
    const cpu: number[] = [];
    let last = base.work;
    for (let i = 1; i <= runs; i++) {
      if (added > 0) emu.addEvents('default', added);
      const run = await sync(emu, dir);
      const now = size(work) + size(`${work}.wal`);
      const after = files(parquet);
      const written = [...after].filter(([path, f]) => before.get(path)?.mtimeMs !== f.mtimeMs).length;
      out(
        `${String(i).padStart(3)}  ${String(added).padStart(3)}  ${String(run.rows).padStart(4)}  ${String(run.requests).padStart(8)}  ${run.seconds.toFixed(2).padStart(6)}  ${run.cpuSeconds.toFixed(2).padStart(5)}  ${kb(now).padStart(19)}  ${(now - last >= 0 ? '+' : '') + kb(now - last)}  ${kb(setBytes(after)).padStart(11)}  ${written}`,
      );
      seconds.push(run.seconds);
      cpu.push(run.cpuSeconds);
      last = now;
      before = after;
    }
    const grown = last - base.work;
    const mean = (xs: readonly number[]): number => xs.reduce((n, x) => n + x, 0) / Math.max(1, xs.length);
    out(
      `working file: ${kb(base.work)} after the first sync, ${kb(last)} after ${runs} more runs: ${grown >= 0 ? '+' : ''}${kb(grown)} (${kb(grown / Math.max(1, runs))} a run); run time mean ${mean(seconds).toFixed(2)} s wall, ${mean(cpu).toFixed(2)} s CPU`,
    );
  } finally {
    await emu.close();
    if (process.env.BENCH_KEEP === undefined) rmSync(dir, { recursive: true, force: true });
    else out(`kept ${dir}`);
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench failed: ${String((error as Error)?.stack ?? error)}\n`);
  process.exitCode = 1;
});
