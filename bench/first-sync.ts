/**
 * First-sync throughput and memory (issue 2): the real CLI syncs a large emulator with the rate
 * limits off, so the figure is the connector's own speed (parse, normalize, load), not the API's.
 * The emulator runs in its own process, so the sync's peak memory is measured alone.
 *
 *   npm run bench:first-sync [-- EVENTS_PER_PROJECT]     (default 100000, one project)
 *   BENCH_SYNC_ARGS="--duckdb-memory-limit 128MB" npm run bench:first-sync   (more sync flags)
 *   BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" npm run bench:first-sync   (Node flags for the sync)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CLI = join(process.cwd(), 'dist', 'bin', 'cli.js');
const events = Number(process.argv[2] ?? 100_000);
const port = 18_000 + Math.floor(Math.random() * 2000);

function waitForLine(child: ChildProcess, pattern: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    child.stdout?.on('data', (b: Buffer) => {
      seen += b.toString();
      if (pattern.test(seen)) resolve();
    });
    child.on('exit', (code) => reject(new Error(`exited ${code} before printing ${pattern}: ${seen}`)));
  });
}

/** VmHWM (peak resident set) of a live process, in MB. */
function peakRssMb(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** User + system CPU seconds of a live process so far (all its threads: DuckDB's too). */
function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /s, '')
      .split(' ');
    // utime and stime are fields 14 and 15 of stat (11 and 12 after the command's name), in clock ticks.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** CPU seconds per thread name of a live process (the main thread, V8's workers, libuv's pool, DuckDB's). */
function threadCpu(pid: number, into: Map<string, number>): void {
  const byTid = new Map<string, [string, number]>();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = /\((.*)\)/s.exec(stat)?.[1] ?? '?';
      const fields = stat.replace(/^.*\) /s, '').split(' ');
      byTid.set(tid, [tid === String(pid) ? 'main' : name, (Number(fields[11]) + Number(fields[12])) / 100]);
    }
  } catch {
    return;
  }
  for (const [tid, [name, cpu]] of byTid) into.set(`${name}\t${tid}`, cpu);
}

const emulator = spawn(
  process.execPath,
  [CLI, 'emulate', '--port', String(port), '--events-per-project', String(events), '--no-limits'],
  {
    stdio: ['ignore', 'pipe', 'inherit'],
  },
);
try {
  const seedStarted = Date.now();
  await waitForLine(emulator, /emulator .*\bon http/);
  process.stdout.write(
    `emulator: ${events} events per project × 3 projects, seeded in ${((Date.now() - seedStarted) / 1000).toFixed(1)} s\n`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'qs-first-'));
  const started = Date.now();
  const sync = spawn(
    process.execPath,
    [
      ...(process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean),
      CLI,
      'sync',
      '--project',
      'default',
      '--duckdb-path',
      join(dir, 'w.duckdb'),
      '--state',
      join(dir, 'state.json'),
      '--max-rpm',
      '1000000',
      '--max-rps',
      '1000000',
      '--log-level',
      'warn',
      ...(process.env.BENCH_SYNC_ARGS ?? '').split(' ').filter(Boolean),
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, QUERY_API_BASE_URL: `http://127.0.0.1:${port}`, QUERY_API_KEY: 'qs_org_emulator_key' },
    },
  );
  let out = '';
  sync.stdout.on('data', (b: Buffer) => (out += b.toString()));
  let peak = 0;
  let cpu = 0;
  const threads = new Map<string, number>();
  const poll = setInterval(() => {
    if (sync.pid === undefined) return;
    peak = Math.max(peak, peakRssMb(sync.pid));
    cpu = Math.max(cpu, cpuSeconds(sync.pid));
    threadCpu(sync.pid, threads);
  }, 100);
  const code = await new Promise<number | null>((resolve) => sync.on('exit', resolve));
  clearInterval(poll);
  const seconds = (Date.now() - started) / 1000;
  const rows = [...out.matchAll(/rows=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
  const eventRows = Number(/events\s+default\s+rows=(\d+)/.exec(out)?.[1] ?? 0);
  process.stdout.write(out);
  process.stdout.write(
    `first sync: exit ${code}, ${rows} rows (${eventRows} events) in ${seconds.toFixed(1)} s = ${Math.round(rows / seconds)} rows/s ` +
      `(${Math.round(eventRows / seconds)} event rows/s of wall time), peak RSS ${peak.toFixed(0)} MB, ` +
      `${cpu.toFixed(1)} CPU-s (sampled every 0.1 s)\n`,
  );
  const byName = new Map<string, number>();
  for (const [key, seconds] of threads) {
    const name = key.split('\t')[0] as string;
    if (process.env.BENCH_THREADS !== undefined && seconds >= 0.1)
      process.stdout.write(`  thread ${key} ${seconds.toFixed(1)} s\n`);
    byName.set(name, (byName.get(name) ?? 0) + seconds);
  }
  process.stdout.write(
    `CPU-s by thread: ${[...byName].map(([name, seconds]) => `${name} ${seconds.toFixed(1)}`).join(', ')}\n`,
  );
  rmSync(dir, { recursive: true, force: true });
} finally {
  emulator.kill('SIGTERM');
}
