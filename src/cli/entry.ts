#!/usr/bin/env node
import { mkdirSync } from 'node:fs';
import module from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The CLI's entry (the package's `bin`, dist/bin/cli.js): turns on Node's compile cache, then loads
 * the CLI (`main.ts`), so every module after this one is compiled from the cache.
 *
 * A run's start is mostly V8 parsing and compiling the bundle's chunks. From Node 22.1 Node can keep
 * V8's compiled code on disk between runs (`module.enableCompileCache`): a sync with nothing new took
 * about 0.1 CPU-seconds less on Node 22 (docs/benchmarks.md, CLI start). Node 20 has no such API and
 * compiles as before.
 *
 * The cache is `node-compile-cache` in the system's temporary folder (`os.tmpdir()`). Where Node's
 * own `NODE_COMPILE_CACHE` is set, Node has already done as it says, and `NODE_DISABLE_COMPILE_CACHE=1`
 * turns the cache off. The folder is made here, one level, before Node is asked to use it: where it
 * cannot be made the cache stays off and the CLI runs as before (Node's own recursive mkdir never
 * returns under a pseudo-filesystem such as /proc, where mkdir answers ENOENT beside an existing
 * parent: Node 22.23 spins there).
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

enableCompileCache();
await import('./main.js');
