/**
 * Requests of an incremental sync with and without its state file (issue 9: state beside the data).
 * The real CLI against the emulator (limits off: the figure is requests, not time), real DuckDB files:
 *
 *   stateful    the state file and the warehouse, as an ordinary scheduled run;
 *   stateless   the state file deleted: the state is restored from the warehouse's _query_sync_state;
 *   no state    neither (the warehouse's state table dropped, no file): what a fresh container
 *               cost before state lived in the warehouse, a re-read of all history.
 *
 *   npm run bench:stateless [-- EVENTS_PER_PROJECT NEW_EVENTS_PER_PROJECT]   (default 5000 100, three projects)
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmulator, type Emulator } from '../emulator/index.js';
import { DuckDbDestination } from '../src/load/duckdb/destination.js';

const CLI = join(process.cwd(), 'dist', 'bin', 'cli.js');
const events = Number(process.argv[2] ?? 5_000);
const added = Number(process.argv[3] ?? 100);
const PROJECTS = ['default', 'alpha', 'beta'];

interface Run {
  readonly requests: number;
  readonly rows: number;
  readonly seconds: number;
}

function sync(emu: Emulator, dir: string): Promise<Run> {
  const started = Date.now();
  const child = spawn(
    process.execPath,
    [
      CLI,
      'sync',
      '--project',
      '*',
      '--duckdb-path',
      join(dir, 'w.duckdb'),
      '--state',
      join(dir, 'state.json'),
      '--json',
      '--log-level',
      'warn',
    ],
    {
      env: { ...process.env, QUERY_API_BASE_URL: emu.url, QUERY_API_KEY: emu.apiKey },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  return new Promise((resolve, reject) =>
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`sync exited ${code}: ${out}`));
      const json = JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as { totals: { requests: number; rows: number } };
      resolve({ requests: json.totals.requests, rows: json.totals.rows, seconds: (Date.now() - started) / 1000 });
    }),
  );
}

const emu = await startEmulator({ seed: 9, eventsPerProject: events, limits: false });
const base = mkdtempSync(join(tmpdir(), 'qs-stateless-'));
try {
  const first = join(base, 'first');
  const firstRun = await sync(emu, first);
  process.stdout.write(
    `first sync: ${events} events × ${PROJECTS.length} projects (and their traces, users, …): ${firstRun.requests} requests, ${firstRun.rows} rows, ${firstRun.seconds.toFixed(1)} s\n`,
  );
  const dirs = { stateful: join(base, 'stateful'), stateless: join(base, 'stateless'), none: join(base, 'none') };
  for (const d of Object.values(dirs)) copyRun(first, d);
  rmSync(join(dirs.stateless, 'state.json'));
  rmSync(join(dirs.none, 'state.json'));
  const db = await DuckDbDestination.open(join(dirs.none, 'w.duckdb'));
  await db.query('DROP TABLE _query_sync_state');
  await db.close();

  for (const p of PROJECTS) emu.addEvents(p, added);
  process.stdout.write(`then ${added} new events per project; the next sync:\n`);
  const results: Record<string, Run> = {};
  for (const [name, d] of Object.entries(dirs)) {
    results[name] = await sync(emu, d);
    const r = results[name] as Run;
    process.stdout.write(
      `  ${name.padEnd(10)} ${String(r.requests).padStart(6)} requests  ${String(r.rows).padStart(7)} rows  ${r.seconds.toFixed(1).padStart(5)} s\n`,
    );
  }
  const ratio = (results['stateless'] as Run).requests / (results['stateful'] as Run).requests;
  process.stdout.write(`stateless / stateful requests: ${ratio.toFixed(2)}\n`);
} finally {
  await emu.close();
  rmSync(base, { recursive: true, force: true });
}

/** A copy of the warehouse and the state file, as a run would find them. */
function copyRun(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  copyFileSync(join(from, 'w.duckdb'), join(to, 'w.duckdb'));
  copyFileSync(join(from, 'state.json'), join(to, 'state.json'));
}
