#!/usr/bin/env node
import module from 'node:module';

/**
 * The CLI's entry (the package's `bin`, dist/bin/cli.js): turns on Node's compile cache, then loads
 * the CLI (`main.ts`), so every module after this one is compiled from the cache.
 *
 * A run's start is mostly V8 parsing and compiling the bundle's chunks (about 1.5 MB for a sync).
 * From Node 22.1 Node can keep V8's compiled code on disk between runs (`module.enableCompileCache`):
 * a sync with nothing new took about 0.1 CPU-seconds less on Node 22 (docs/benchmarks.md, CLI
 * start). The cache lives where `NODE_COMPILE_CACHE` says, else in `node-compile-cache` under the
 * system's temporary folder; `NODE_DISABLE_COMPILE_CACHE=1` turns it off. Where that folder cannot
 * be written the cache is simply off (Node returns a status, it does not throw); Node 20 has no
 * such API and compiles as before.
 */
type WithCompileCache = { readonly enableCompileCache?: () => unknown };
try {
  (module as WithCompileCache).enableCompileCache?.();
} catch {
  // The cache is an optimisation: without it the CLI runs as before.
}

await import('./main.js');
