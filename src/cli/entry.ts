#!/usr/bin/env node
import { mkdirSync } from 'node:fs';
import module from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { codeCacheFile, runWithCodeCache } from './code-cache.js';
import { setV8Flags } from './v8-flags.js';

/**
 * The CLI's entry (the package's `bin`, dist/bin/cli.js): sets V8's flags, turns on Node's compile
 * cache, then runs the CLI (`main.ts`), bundled as one CommonJS file beside it, from V8's code cache
 * (code-cache.ts).
 *
 * A run's start is mostly V8 parsing and compiling the bundle. Node 20 keeps nothing between runs;
 * the code cache of `code-cache.ts` does, in `query-sync-code-cache-<uid>` in the system's temporary
 * folder (`os.tmpdir()`): a sync with nothing new 0.14 CPU-seconds less on Node 20, `status --check` 0.05
 * (docs/benchmarks.md, CLI start). The bundle is CommonJS because a `vm.Script` takes a code cache
 * and Node 20 gives ES modules none; its commands stay lazy (esbuild runs a module imported with
 * `import()` when it is imported), though V8 pre-parses the whole file where there is no cache.
 *
 * From Node 22.1 Node keeps its own compile cache (`module.enableCompileCache`): turned on here for
 * what Node loads itself (packages left outside the bundle), in `node-compile-cache` in the same
 * folder. Where Node's own `NODE_COMPILE_CACHE` is set, Node has already done as it says, and
 * `NODE_DISABLE_COMPILE_CACHE=1` turns both caches off. The folder is made here, one level, before
 * Node is asked to use it: where it cannot be made the cache stays off and the CLI runs as before
 * (Node's own recursive mkdir never returns under a pseudo-filesystem such as /proc, where mkdir
 * answers ENOENT beside an existing parent: Node 22.23 spins there).
 */
function enableCompileCache(): void {
  const enable = (module as { readonly enableCompileCache?: (dir: string) => unknown }).enableCompileCache;
  if (enable === undefined) return;
  if (process.env.NODE_COMPILE_CACHE !== undefined || process.env.NODE_DISABLE_COMPILE_CACHE !== undefined) return;
  const dir = join(tmpdir(), 'node-compile-cache');
  try {
    mkdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return;
  }
  try {
    enable.call(module, dir);
  } catch {
    // An optimisation only: without it the CLI runs as before.
  }
}

/** The bundle's file name (`main-<content hash>.cjs`), set by scripts/bundle.mjs. */
declare const QUERY_SYNC_BUNDLE: string;

const args = process.argv.slice(2);
// Before the bundle is compiled: V8 refuses a code cache made under other flags.
setV8Flags(args, process.env);
enableCompileCache();
const bundle = fileURLToPath(new URL(QUERY_SYNC_BUNDLE, import.meta.url));
const dir = join(tmpdir(), `query-sync-code-cache${process.getuid === undefined ? '' : `-${process.getuid()}`}`);
runWithCodeCache(bundle, codeCacheFile(dir, bundle, args, process.env, process.execArgv));
