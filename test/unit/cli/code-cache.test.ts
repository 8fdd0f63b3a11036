import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { crc32 } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { codeCacheFile } from '../../../src/cli/code-cache.js';
import { CLI } from '../../fakes/cli.js';
import { tempDir } from '../../fakes/tmp.js';

/** The compiled module (`npm test` builds dist/ first), run in child processes: it runs code and hooks `exit`. */
const MODULE = pathToFileURL(join(process.cwd(), 'dist', 'src', 'cli', 'code-cache.js')).href;

interface Child {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function run(command: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Child> {
  const merged = Object.fromEntries(Object.entries({ ...process.env, ...env }).filter(([, v]) => v !== undefined));
  const child = spawn(command, args, { env: merged, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

let tmp: ReturnType<typeof tempDir>;
let bundle: string;
let cacheDir: string;
let cache: string;

beforeEach(() => {
  tmp = tempDir('query-sync-code-cache-');
  bundle = join(tmp.dir, 'main-TEST.cjs');
  // A CommonJS file like the bundle: a shebang, `require`, `module.exports`, `__filename`, lazy functions.
  writeFileSync(
    bundle,
    `#!/usr/bin/env node
const { basename } = require('node:path');
const square = (n) => n * n;
function later() { return [1, 2, 3].map(square).reduce((a, b) => a + b, 0); }
module.exports = { later };
process.stdout.write(\`\${basename(__filename)} \${later()} \${this === exports}\\n\`);
process.exitCode = Number(process.env.EXIT ?? 0);
`,
  );
  cacheDir = join(tmp.dir, 'cache');
  cache = join(cacheDir, 'main-TEST.cache');
});

afterEach(() => tmp.cleanup());

/** Run the test bundle through `runWithCodeCache`; stderr ends with what became of the cache. */
function runBundle(cacheFile: string | null = cache, env: NodeJS.ProcessEnv = {}): Promise<Child> {
  const file = cacheFile === null ? 'undefined' : JSON.stringify(cacheFile);
  const script = `import { runWithCodeCache } from ${JSON.stringify(MODULE)};
process.stderr.write(runWithCodeCache(${JSON.stringify(bundle)}, ${file}));`;
  return run(process.execPath, ['--input-type=module', '-e', script], env);
}

const FIRST: Child = { code: 0, stdout: 'main-TEST.cjs 14 true\n', stderr: 'none' };

const caches = (): string[] => readdirSync(cacheDir).sort();

describe('codeCacheFile', () => {
  const file = (args: string[], env: NodeJS.ProcessEnv = {}, execArgv: string[] = []): string | undefined =>
    codeCacheFile('/c', '/d/main-ABC.cjs', args, env, execArgv);

  it('names the bundle, Node, the command and --help; the flags change the name', () => {
    const sync = file(['sync', '--project', '*']);
    expect(sync).toMatch(
      new RegExp(`^/c/main-ABC-${process.version}-${process.platform}-${process.arch}-\\w+-sync\\.cache$`),
    );
    expect(file(['sync', '--help'])).toBe(sync?.replace('-sync.cache', '-sync-help.cache'));
    expect(file(['--version'])).toMatch(/-version\.cache$/);
    expect(file([])).toMatch(/-other\.cache$/);
    expect(file(['../../etc'])).toMatch(/-other\.cache$/);
    expect(file(['sync'], { QUERY_SYNC_OPTIMIZE_FOR: 'speed' })).not.toBe(sync);
    expect(file(['sync'], { NODE_OPTIONS: '--max-semi-space-size=2' })).not.toBe(sync);
    expect(file(['sync'], {}, ['--cpu-prof'])).not.toBe(sync);
  });

  it('is off with NODE_DISABLE_COMPILE_CACHE', () => {
    expect(file(['sync'], { NODE_DISABLE_COMPILE_CACHE: '1' })).toBeUndefined();
  });
});

describe('runWithCodeCache', () => {
  it('runs the file as require would, writes the cache at exit, and the next run uses it', async () => {
    const first = await runBundle();
    expect(first).toEqual(FIRST);
    expect(caches()).toEqual(['main-TEST.cache']);
    const data = readFileSync(cache);
    expect(data.readUInt32LE(0)).toBe(crc32(data.subarray(4)));
    const second = await runBundle();
    expect(second).toEqual({ code: 0, stdout: 'main-TEST.cjs 14 true\n', stderr: 'used' });
    expect(readFileSync(cache).equals(data)).toBe(true);
  });

  it('a run that exits with another code keeps it and writes a cache, which the first run to exit with 0 replaces', async () => {
    expect(await runBundle(cache, { EXIT: '3' })).toEqual({ ...FIRST, code: 3 });
    const ofFailure = readFileSync(cache);
    expect(ofFailure[4]).toBe(0);
    expect(await runBundle(cache, { EXIT: '3' })).toEqual({ ...FIRST, code: 3, stderr: 'used' });
    expect(readFileSync(cache).equals(ofFailure)).toBe(true);
    expect(await runBundle()).toEqual({ ...FIRST, stderr: 'used' });
    const ofSuccess = readFileSync(cache);
    expect(ofSuccess[4]).toBe(1);
    expect(await runBundle()).toEqual({ ...FIRST, stderr: 'used' });
    expect(await runBundle(cache, { EXIT: '3' })).toEqual({ ...FIRST, code: 3, stderr: 'used' });
    expect(readFileSync(cache).equals(ofSuccess)).toBe(true);
  });

  it('compiles without a cache that is corrupt, truncated or made for another source, and replaces it', async () => {
    await runBundle();
    const good = readFileSync(cache);
    const corrupt = Buffer.from(good);
    const middle = good.length >> 1;
    corrupt.writeUInt8(corrupt.readUInt8(middle) ^ 0x5a, middle);
    for (const bad of [corrupt, good.subarray(0, 100), Buffer.alloc(0), Buffer.from('not a cache')]) {
      writeFileSync(cache, bad);
      expect(await runBundle()).toEqual(FIRST);
      expect(readFileSync(cache).readUInt32LE(0)).toBe(crc32(readFileSync(cache).subarray(4)));
    }
    // Whole, but made for another file (V8 compares the source's length): refused, then rewritten.
    writeFileSync(bundle, `${readFileSync(bundle, 'utf8')}// longer\n`);
    expect((await runBundle()).stderr).toBe('refused');
    expect((await runBundle()).stderr).toBe('used');
  });

  it('runs as before where the cache cannot be written or is not private', async () => {
    writeFileSync(join(tmp.dir, 'file'), '');
    const underFile = join(tmp.dir, 'file', 'cache', 'main-TEST.cache');
    expect(await runBundle(underFile)).toEqual(FIRST);
    expect(await runBundle(underFile)).toEqual(FIRST);
    // A folder others can write to: neither read nor written (a cache is code the process runs).
    mkdirSync(cacheDir);
    chmodSync(cacheDir, 0o777);
    expect(await runBundle()).toEqual(FIRST);
    expect(caches()).toEqual([]);
    expect((await runBundle(null)).stderr).toBe('off');
  });

  it('concurrent first runs each write the cache whole: one file, no temporary left, used next', async () => {
    const runs = await Promise.all(Array.from({ length: 6 }, () => runBundle()));
    // Each found none, or one a faster one had written already.
    for (const r of runs) expect({ ...r, stderr: r.stderr === 'used' ? 'none' : r.stderr }).toEqual(FIRST);
    expect(runs.map((r) => r.stderr)).toContain('none');
    expect(caches()).toEqual(['main-TEST.cache']);
    expect((await runBundle()).stderr).toBe('used');
  });
});

describe('the CLI through its code cache', () => {
  it('prints the same with and without a cache, and writes one per command', async () => {
    const env = { TMPDIR: tmp.dir, NODE_COMPILE_CACHE: undefined, NODE_DISABLE_COMPILE_CACHE: undefined };
    const first = await run(process.execPath, [CLI, '--version'], env);
    const second = await run(process.execPath, [CLI, '--version'], env);
    expect(first.code).toBe(0);
    expect(second).toEqual(first);
    const mine = readdirSync(tmp.dir).find((name) => name.startsWith('query-sync-code-cache'));
    expect(mine).toBeDefined();
    expect(readdirSync(join(tmp.dir, mine ?? ''))).toEqual([
      expect.stringMatching(/^main-\w+-v[\d.]+-.+-version\.cache$/),
    ]);
    const unknown = await run(process.execPath, [CLI, 'nosuch'], env);
    expect(unknown.code).toBe(2);
    expect(await run(process.execPath, [CLI, 'nosuch'], env)).toEqual(unknown);
  });
});
