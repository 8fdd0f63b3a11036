import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import vm from 'node:vm';
import { crc32 } from 'node:zlib';

/**
 * The CLI's bundle run from V8's code cache (entry.ts): the functions a command compiled, kept on disk
 * after it ran and loaded by the next run of that command instead of being parsed and compiled again.
 * Node 20 has no compile cache of its own (Node 22's `module.enableCompileCache` covers modules Node
 * loads, not this `vm.Script`). What was measured is in docs/benchmarks.md, CLI start: a sync with
 * nothing new 0.14 CPU-s less on Node 20, `status --check` 0.05.
 *
 * One cache file per bundle, Node version, flags and command (`codeCacheFile`), written at exit by a
 * run that found none, or one V8 refused (made by another V8 or under other flags), and once more by
 * the first run that exits with 0 where a failed run made it (it may have compiled less: a run
 * stopped by a wrong flag compiles little, and `status --check` exits 7 wherever the data is stale,
 * so waiting for a 0 left some commands with no cache at all). A cache is made after the command
 * ran, so it holds the functions V8 compiled lazily as well (made before the run, it holds only the
 * top level: a sync 0.09 CPU-s less instead of 0.14). Nothing here fails a run: a cache that cannot be read, is
 * corrupt or refused is compiled as without one; one that cannot be written is not written.
 */

/** What `node:module` wraps a CommonJS file in; the bundle's first line keeps its number. */
const WRAPPER_HEAD = '(function (exports, require, module, __filename, __dirname) { ';
const WRAPPER_TAIL = '\n});';

/** Other bundles' caches not written for this long are removed when a cache is written. */
const PRUNE_AFTER_MS = 24 * 3_600_000;

/**
 * The cache file for running `bundle` (its file name, which holds its content hash) with the
 * process's arguments `args` (after the script), in `dir`; `undefined` where the cache is off
 * (`NODE_DISABLE_COMPILE_CACHE`, Node's own switch for its cache, turns this one off too).
 *
 * Keyed by the command (and `--help`), so each loads only what it runs (`status --check` does not
 * load a sync's 1.7 MB); by Node's version and platform; and by what changes V8's flags, which V8
 * checks (a cache made under others is refused, and was then rewritten by every run).
 */
export function codeCacheFile(
  dir: string,
  bundle: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  execArgv: readonly string[],
): string | undefined {
  if (env.NODE_DISABLE_COMPILE_CACHE !== undefined) return undefined;
  const first = args[0] ?? '';
  const command = /^-{0,2}[a-z][a-z-]{0,40}$/.test(first) ? first.replace(/^-+/, '') : 'other';
  const help = args.includes('--help') || args.includes('-h') ? '-help' : '';
  const flags = fnv1a(JSON.stringify([execArgv, env.NODE_OPTIONS ?? '', env.QUERY_SYNC_OPTIMIZE_FOR ?? '']));
  const name = basename(bundle).replace(/\.c?js$/, '');
  return join(dir, `${name}-${process.version}-${process.platform}-${process.arch}-${flags}-${command}${help}.cache`);
}

/** What became of the cache: used, none there (or not as written), or refused by V8. */
export type CodeCacheUse = 'used' | 'none' | 'refused' | 'off';

/**
 * Run the CommonJS file `file` as `require` would (its own `require`, `module`, `__filename`), its
 * compiled code read from `cacheFile` when there is one V8 accepts, and the cache written when the
 * process exits where there was none (`undefined`: no cache).
 */
export function runWithCodeCache(file: string, cacheFile: string | undefined): CodeCacheUse {
  const source = readFileSync(file, 'utf8').replace(/^#!.*/, '');
  const cached = cacheFile === undefined ? undefined : readCache(cacheFile);
  const script = new vm.Script(`${WRAPPER_HEAD}${source}${WRAPPER_TAIL}`, {
    filename: file,
    ...(cached === undefined ? {} : { cachedData: cached.code }),
  });
  if (cacheFile !== undefined) {
    const missing = cached === undefined || script.cachedDataRejected === true;
    const partial = cached?.ofSuccess !== true;
    process.once('exit', (code) => {
      if (missing || (code === 0 && partial)) writeCache(cacheFile, script, code === 0);
    });
  }
  const module = { exports: {} };
  const run = script.runInThisContext() as (...args: unknown[]) => void;
  run.call(module.exports, module.exports, createRequire(file), module, file, dirname(file));
  if (cacheFile === undefined) return 'off';
  if (cached === undefined) return 'none';
  return script.cachedDataRejected === true ? 'refused' : 'used';
}

interface Cache {
  /** V8's code cache. */
  readonly code: Buffer;
  /** Made by a run that exited with 0 (one that failed may have compiled less of the command). */
  readonly ofSuccess: boolean;
}

/**
 * The cache, or `undefined`: none, unreadable, or not as written. V8 checks its version, flags and
 * the source's length, not the rest (a byte changed in the code was accepted, or crashed the
 * process), so each file starts with a CRC-32 of what follows: a byte, 1 where the run that made it
 * exited with 0, then V8's cache. Only from a folder of this user's that no one else can write to:
 * a cache is code this process runs.
 */
function readCache(cacheFile: string): Cache | undefined {
  try {
    if (!privateFolder(dirname(cacheFile))) return undefined;
    const data = readFileSync(cacheFile);
    if (data.length <= 5 || data.readUInt32LE(0) !== crc32(data.subarray(4))) return undefined;
    return { code: data.subarray(5), ofSuccess: data[4] === 1 };
  } catch {
    return undefined;
  }
}

function privateFolder(dir: string): boolean {
  const stat = statSync(dir);
  if (!stat.isDirectory()) return false;
  if (process.getuid === undefined) return true;
  return stat.uid === process.getuid() && (stat.mode & 0o022) === 0;
}

/**
 * Write the cache as a temporary file renamed into place, so a reader sees a whole file or none and
 * concurrent writers each replace it whole. The folder is made one level (as entry.ts does for
 * Node's cache), only this user's.
 */
function writeCache(cacheFile: string, script: vm.Script, ofSuccess: boolean): void {
  const dir = dirname(cacheFile);
  const temp = `${cacheFile}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    try {
      mkdirSync(dir, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return;
    }
    if (!privateFolder(dir)) return;
    const body = Buffer.concat([Buffer.from([ofSuccess ? 1 : 0]), script.createCachedData()]);
    const head = Buffer.alloc(4);
    head.writeUInt32LE(crc32(body));
    writeFileSync(temp, Buffer.concat([head, body]), { mode: 0o600 });
    renameSync(temp, cacheFile);
    pruneOthers(dir, basename(cacheFile));
  } catch {
    // An optimisation only: the next run compiles as this one did.
    try {
      rmSync(temp, { force: true });
    } catch {
      // Never made, or not ours to remove.
    }
  }
}

/** Remove other bundles' and Node versions' caches, and temporary files, not written for a day. */
function pruneOthers(dir: string, kept: string): void {
  const current = `${kept.split(`-${process.version}-`)[0]}-${process.version}-`;
  const now = Date.now();
  for (const name of readdirSync(dir)) {
    if (name.startsWith(current) && name.endsWith('.cache')) continue;
    try {
      if (now - statSync(join(dir, name)).mtimeMs > PRUNE_AFTER_MS) rmSync(join(dir, name), { force: true });
    } catch {
      // Gone already, or another's: left.
    }
  }
}

/** A short hash of a short string (FNV-1a, 32 bits), for a file name. */
function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return (hash >>> 0).toString(36);
}
