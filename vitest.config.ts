import { accessSync, constants, readdirSync, readFileSync, statfsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Two groups. `npm test` runs the fast files; `npm run test:slow` the slow ones; CI runs both.
 *
 * - A slow file: list it here. `npm test` runs every other file under test/, so a new file is in the
 *   fast group unless it is named here. (Files are listed, not renamed, so parallel branches that
 *   edit them still merge.)
 * - A slow test: in a slow file, beside the fast file of its subject (`duckdb.test.ts` and
 *   `duckdb-memory.test.ts`, `sync.test.ts` and `sync-faults.test.ts`). There is no slow tag: a
 *   tagged test in a fast file needed a third vitest run of its own in CI (its own start, transforms
 *   and imports, about 10 CPU-seconds), and a tags filter is global to a run.
 *
 * Slow: kill -9 and resume, long backfills, deploy and the docs' recipes, data sizes that are the point
 * of the test (memory bounds), and files that spawn the built CLI many times.
 *
 * Listed files that mostly wait first, then by CPU seconds, most first (the suite is bound by CPU
 * on two cores), and run in this order (`LongestFirst` below): a clean clone has no timing cache, and
 * vitest would then start the largest files first, leaving a long file that happens to be small for
 * the end, alone on one worker.
 */
export const SLOW_FILES: readonly string[] = [
  // Mostly waiting, first, so that their waits overlap the CPU of the fast group and the other files.
  // Two CLI runs back to back, and six killed ones, under the documented limits wait for the minute
  // window (its two tests run side by side: 23 CPU-s in about 45 s of their own).
  'test/integration/budget-carry.test.ts',
  // A sync paced to one traces request a second while status --check runs beside it (14 CPU-s, 48 s of tests)
  'test/integration/freshness-check.test.ts',
  // Then by CPU seconds, most first (each file alone, 2026-11-29, a loaded machine: docs/benchmarks.md).
  'test/integration/state-in-warehouse.test.ts', // kill -9, fresh containers and restores through the CLI
  'test/integration/backfill.test.ts', // SIGKILLed backfill, the --lock-wait race, timed progress lines
  'test/integration/deploy.test.ts', // kill -9 / SIGTERM / --max-run-time of the real CLI
  // A faulty server into both destinations, and a first sync of 30,000 events at the default memory limit
  'test/integration/sync-faults.test.ts',
  'test/loaders/duckdb-memory.test.ts', // batches of many times the memory limit (16MB): the data size is the point
  // 40 CLI syncs: two or three against each of 18 server variants, in four files so that CI runs them side by side
  'test/integration/server-matrix-2.test.ts',
  'test/integration/server-matrix-3.test.ts',
  'test/integration/server-matrix.test.ts',
  'test/integration/server-matrix-4.test.ts', // issue 31: counts that lag, deletions marked and deleted (7 CLI syncs)
  'test/integration/split-walk.test.ts', // kill -9 while sub-windows are mid-walk
  'test/integration/split-resources.test.ts', // kill -9 mid-split of users, traces, conversations
  'test/integration/published-copy.test.ts',
  'test/integration/traces-owed-cli.test.ts', // reset, verify --repair, reconcile and backfill through the CLI (9 runs)
  'test/integration/kill-resume.test.ts', // five SIGKILLs of the real CLI under the documented rate limits
  'test/loaders/duckdb-reread.test.ts', // 30,000 events re-written at the default memory limit
  'test/integration/run-history.test.ts', // CLI runs into one warehouse
  'test/integration/analysts.test.ts', // searches, aggregates, bridge, view and dbt sources through CLI runs
  'test/integration/verify.test.ts', // verify --repair through the CLI
  'test/integration/plan-sync.test.ts', // six CLI runs: each plan against the requests the sync then sends
  'test/integration/reconcile-deletions.test.ts', // CLI syncs: --deletions keep said once, a mark cleared
  'test/integration/reconcile.test.ts', // CLI syncs: rows deleted by hand, check, a server that keeps a difference, off
  'test/integration/monitoring.test.ts', // six CLI syncs against the real Pushgateway, pings, webhooks, dead endpoints
  'test/integration/big-rows.test.ts', // memory bounds: the data size is the point
  'test/integration/recipes.test.ts', // docs/scheduling.md's crontab, Kubernetes and GitHub Actions recipes
  'test/integration/publish-commands.test.ts', // backfill, publish, verify --repair, sync, reset through the CLI
  'test/integration/real-service.test.ts', // the real-service flavor through the CLI, settle re-read
  'test/integration/publish-kill.test.ts', // publish processes killed -9 mid-publish
  'test/integration/redaction.test.ts', // every output of several CLI runs searched for the key
  'test/integration/traces-per-event.test.ts', // killed mid-drain, then resumed
  'test/integration/configured-limits.test.ts', // two CLI plans and two splits of 30,000 events, at 200 and 400 a minute
  'test/integration/report-html.test.ts', // the HTML report rendered in headless Chromium
  'test/integration/soak.test.ts', // ten CLI syncs with nothing new into one warehouse
];

const ROOT = fileURLToPath(new URL('.', import.meta.url));

/**
 * The tests' folders (test/fakes/tmp.ts, and every child process's `os.tmpdir()`) in memory, on
 * Linux's tmpfs, unless TMPDIR names a place or the tmpfs is small (a container's /dev/shm is often
 * 64 MB; the suite's files reach hundreds). Every run commits with fsync (DuckDB's WAL and
 * checkpoints, the state file, the published copy): a first sync of the server matrix's size makes
 * 145 fsync calls, which took 0.6 s of its wall time on this machine's disk and 0.01 s on tmpfs
 * (`strace -f -c -w`). What the tests check does not depend on the disk: a SIGKILLed process's
 * writes are in the page cache either way.
 */
function inMemoryTmp(): string | undefined {
  if (process.env.TMPDIR !== undefined || process.platform !== 'linux') return undefined;
  try {
    accessSync('/dev/shm', constants.W_OK);
    const fs = statfsSync('/dev/shm');
    return fs.bavail * fs.bsize >= 4 * 1024 ** 3 ? '/dev/shm' : undefined;
  } catch {
    return undefined;
  }
}
const tmp = inMemoryTmp();
if (tmp !== undefined) process.env.TMPDIR = tmp;

/**
 * The suite's processes start without NODE_EXTRA_CA_CERTS (set on some machines for a proxy that
 * inspects TLS). Node 20 reads and parses every certificate the file holds when each process starts,
 * whether it opens a TLS connection or not: 0.07 CPU-seconds a process here (`node -e 0`, 0.09
 * against 0.02), paid by each of the ~220 CLI processes of a CI run and every other child. The
 * tests talk to servers on loopback only (the emulator, the Pushgateway, nock in process), never
 * through TLS; npm ci, which does, runs before this.
 */
delete process.env.NODE_EXTRA_CA_CERTS;

/**
 * Fast files that use nock (directly or through the BigQuery double in test/fixtures/bigquery): nock
 * patches http and fetch for the whole process, so these share workers of their own, not those of
 * the other fast files, and test/fakes/nock-setup.ts resets nock after each file (see `isolate`
 * below). Found by reading the files, so a new one is sorted by itself.
 */
const NOCK_FILES: readonly string[] = readdirSync(`${ROOT}test`, { recursive: true })
  .map((f) => `test/${String(f).replaceAll('\\', '/')}`)
  .filter((f) => f.endsWith('.test.ts') && !SLOW_FILES.includes(f))
  .filter((f) => /from 'nock'|fixtures\/bigquery\//.test(readFileSync(`${ROOT}${f}`, 'utf8')))
  .sort();

/** The slow files in their listed order (longest first); every other file as vitest orders it. */
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (spec: TestSpecification): number => {
      const at = SLOW_FILES.indexOf(spec.moduleId.slice(ROOT.length).replaceAll('\\', '/'));
      return at < 0 ? SLOW_FILES.length : at;
    };
    const group = (spec: TestSpecification): number => spec.project.config.sequence.groupOrder;
    return (await super.sort(files)).sort((a, b) => group(a) - group(b) || rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    sequence: { sequencer: LongestFirst },
    projects: [
      {
        extends: true,
        test: {
          name: 'fast',
          include: ['test/**/*.test.ts'],
          exclude: [...SLOW_FILES, ...NOCK_FILES],
          // Two cores here: vitest's default (cores - 1) runs one file at a time, while most files
          // wait on sockets, child processes and DuckDB rather than on the CPU.
          maxWorkers: 2,
          // One worker process runs many files, keeping modules loaded (DuckDB, the BigQuery client,
          // the emulator): importing them afresh for each file was a third of the group's CPU time.
          // So a fast test must leave no global state behind (fake timers, env, listeners).
          isolate: false,
          sequence: { groupOrder: 0 },
        },
      },
      // Beside `fast` (same order), in workers of their own that they share: nock's interceptors
      // are global to a process, so test/fakes/nock-setup.ts clears them after each file. A fresh
      // worker per file cost 52 CPU-s for these 19 files against 34 shared (import and start-up).
      {
        extends: true,
        test: {
          name: 'fast-nock',
          include: [...NOCK_FILES],
          maxWorkers: 2,
          isolate: false,
          setupFiles: ['test/fakes/nock-setup.ts'],
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'slow',
          include: [...SLOW_FILES],
          // Three files at a time: most of a slow test's time is child processes and the client's
          // pacing, which the other files fill. With two, the last ~100 s of a CI run (the fast group
          // done) left a core idle about 15 % of the time; with three, clean-clone runs of the same
          // commit took 290 and 293 s against 307 and 313 s, at the same CPU (docs/benchmarks.md, Tests).
          // Kills and lock waits are triggered by what a run has written (a checkpoint, a lease, a
          // file), never by a clock, so a neighbour's load moves when they land, not whether. Room
          // for a loaded machine (a timeout here says nothing about behaviour).
          maxWorkers: 3,
          // As in `fast`: a worker keeps its modules between files (no slow file mocks, fakes timers,
          // sets env or patches http; they drive child processes and an in-process emulator).
          isolate: false,
          testTimeout: 180_000,
          hookTimeout: 180_000,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
