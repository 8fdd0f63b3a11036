import { setFlagsFromString } from 'node:v8';

/**
 * The V8 flags a CLI process runs with, for the command `args[0]` (the arguments after the script).
 * Set by the bundle's entry before it compiles the CLI, and by `main.ts` again (the same values: a
 * no-op there), which also runs on its own from dist/src/. V8 keeps a hash of its flags in every code
 * cache and refuses a cache made under other flags: set after the compile, they made every cache
 * the entry loads refused (entry.ts, code-cache.ts).
 */
export function setV8Flags(args: readonly string[], env: NodeJS.ProcessEnv): void {
  // A sync is a long batch job whose speed the API's limits set, not the CPU: let V8 keep its heap
  // small (collect sooner, grow slowly) rather than fast. This cut the JS heap of a 1M-event
  // backfill from about 125 to 45 MB, and halves throughput with the limits off (24k → 12k rows/s,
  // still far above the API's ~670 rows/s per endpoint). QUERY_SYNC_OPTIMIZE_FOR=speed opts out.
  // V8 reads this flag as it goes, so setting it here works; heap size flags such as
  // --max-semi-space-size only work on the command line or in NODE_OPTIONS (the Docker image sets
  // one). Not for the emulator, a test server that should be fast.
  if (args[0] !== 'emulate' && env.QUERY_SYNC_OPTIMIZE_FOR !== 'speed') setFlagsFromString('--optimize-for-size');

  // undici parses HTTP with llhttp compiled to WebAssembly when the first connection opens (after
  // this line). V8 compiles it twice: Liftoff at once, then TurboFan in background threads, about
  // 12 % of a small sync's CPU in a `perf` profile; the TurboFan code's speed does not show in a
  // sync (the parser reads headers and skips bodies). Liftoff alone: 120 ms less CPU per small sync
  // (mean of 12 alternating runs), and a first sync no slower (docs/benchmarks.md, First sync).
  setFlagsFromString('--liftoff-only');
}
