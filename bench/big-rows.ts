/**
 * Memory with very large rows, and the time to give up on a dead server (issue 10):
 *
 *   1. peak RSS of the real CLI syncing 100 pages of 100 events × 200 KB (2 GB of text), at the
 *      default settings and with `--batch-rows 100` (and any BENCH_SYNC_ARGS);
 *   2. how long a sync takes to give up on a server that accepts connections and never answers.
 *
 * The server runs in its own process, so the sync's peak is measured alone (`rss-probe.js` in the
 * sync: peak RSS, and the V8 heap at the peak sample; CPU seconds, which a busy machine inflates
 * less than wall time). Rows hold two-byte text (an emoji: V8 keeps such strings at 2 bytes a
 * character) and a digit-only span id inside a string, as real events do.
 *
 *   npm run bench:big-rows                  (both parts)
 *   BENCH_PARTS=memory npm run bench:big-rows   (or dead; BENCH_PAGES=20 for a shorter run)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CLI = join(process.cwd(), 'dist', 'bin', 'cli.js');
const PROBE = join(process.cwd(), 'dist', 'bench', 'rss-probe.js');
const PAGES = Number(process.env.BENCH_PAGES ?? 100);
const PER_PAGE = 100;
const ROW_CHARS = 200_000;

if (process.argv[2] === 'serve') {
  // Child mode: the API. `big` serves the pages; `dead` accepts connections and never answers.
  const mode = process.argv[3];
  const base = Date.now() - 3_600_000;
  const filler =
    `😀 ${'the quick brown fox jumps over the lazy dog 0123456789 '.repeat(Math.ceil(ROW_CHARS / 55))}`.slice(
      0,
      ROW_CHARS,
    );
  const server = createServer((req, res) => {
    if (mode === 'dead') return; // never a byte
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname !== '/v1/events') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end('{"data":[],"meta":{"cursor":null,"has_more":false}}');
    }
    const page = Number(url.searchParams.get('cursor') ?? '0');
    const data = Array.from({ length: PER_PAGE }, (_, i) => {
      const n = page * PER_PAGE + i;
      return {
        id: `e${n}`,
        timestamp: new Date(base + n).toISOString(),
        event_name: 'big',
        span_id: String(7831528000000000 + n),
        user_input: filler,
      };
    });
    const more = page + 1 < PAGES;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ data, meta: { cursor: more ? String(page + 1) : null, has_more: more } }));
  });
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    process.stdout.write(`listening ${typeof address === 'object' && address !== null ? address.port : 0}\n`);
  });
} else {
  const parts = (process.env.BENCH_PARTS ?? 'memory,dead').split(',');
  if (parts.includes('memory')) {
    for (const extra of [[], ['--batch-rows', '100']]) {
      const r = await run('big', extra);
      process.stdout.write(
        `${PAGES} pages × ${PER_PAGE} events × ${ROW_CHARS / 1000} KB, ${extra.length === 0 ? 'defaults' : extra.join(' ')}${
          process.env.BENCH_SYNC_ARGS ? ` ${process.env.BENCH_SYNC_ARGS}` : ''
        }: exit ${r.code}, ${r.rows} rows in ${r.seconds.toFixed(1)} s (${r.cpuSeconds.toFixed(1)} s CPU), peak RSS ${r.peakMb.toFixed(0)} MB (V8 heap ${r.heapAtPeakMb} MB at the peak sample)${
          r.code === 0 ? '' : `\n  ${r.failure}`
        }\n`,
      );
    }
  }
  if (parts.includes('dead')) {
    const r = await run('dead', ['--resources', 'events']);
    process.stdout.write(
      `a server that never answers (events only, defaults): gave up after ${r.seconds.toFixed(1)} s, exit ${r.code}\n  ${r.failure}\n`,
    );
  }
}

interface RunResult {
  readonly code: number | null;
  readonly seconds: number;
  readonly peakMb: number;
  readonly heapAtPeakMb: number;
  readonly cpuSeconds: number;
  readonly rows: number;
  readonly failure: string;
}

async function run(mode: 'big' | 'dead', extra: readonly string[]): Promise<RunResult> {
  const server = spawn(process.execPath, [fileURLToPath(import.meta.url), 'serve', mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const port = await portOf(server);
    const dir = mkdtempSync(join(tmpdir(), 'qs-big-'));
    const started = Date.now();
    const sync = spawn(
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
        '--log-level',
        'warn',
        '--log-format',
        'json',
        ...extra,
        ...(process.env.BENCH_SYNC_ARGS ?? '').split(' ').filter(Boolean),
      ],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, QUERY_API_BASE_URL: `http://127.0.0.1:${port}`, QUERY_API_KEY: 'bench-key' },
      },
    );
    let out = '';
    let err = '';
    sync.stdout.on('data', (b: Buffer) => (out += b.toString()));
    sync.stderr.on('data', (b: Buffer) => (err += b.toString()));
    const code = await new Promise<number | null>((resolve) => sync.on('close', resolve));
    rmSync(dir, { recursive: true, force: true });
    const failure = /FAILED: (.*)/.exec(out)?.[1] ?? '';
    const line = err.split('\n').find((l) => l.startsWith('rss-probe '));
    const probe =
      line === undefined
        ? undefined
        : (JSON.parse(line.slice('rss-probe '.length)) as {
            maxRssMb: number;
            cpuSeconds: number;
            peakSample: { heapMb: number };
          });
    return {
      code,
      seconds: (Date.now() - started) / 1000,
      peakMb: probe?.maxRssMb ?? 0,
      heapAtPeakMb: probe?.peakSample.heapMb ?? 0,
      cpuSeconds: probe?.cpuSeconds ?? 0,
      rows: Number(/events\s+default\s+rows=(\d+)/.exec(out)?.[1] ?? 0),
      failure: failure.slice(0, 400),
    };
  } finally {
    server.kill('SIGTERM');
  }
}

function portOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    let seen = '';
    child.stdout?.on('data', (b: Buffer) => {
      seen += b.toString();
      const m = /listening (\d+)/.exec(seen);
      if (m) resolve(Number(m[1]));
    });
    child.on('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
}
