import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { RESOURCES } from '../../connectors/index.js';
import type { ApiRecord, ResourceDefinition } from '../../src/core/types.js';
import { SPEC_RATE_LIMITS } from '../../emulator/index.js';
import type { Emulator } from '../../emulator/index.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { cursorMillis } from '../../src/normalize/normalize.js';
import { StateStore } from '../../src/state/store.js';
import type { StateDocument } from '../../src/state/document.js';
import { CLI, runCli, type ChildRun } from '../fakes/cli.js';
import { dbPathOf, expectTableMatches, readTable, statePathOf, syncOnce } from '../fakes/harness.js';
import { layoutOf } from '../../src/publish/layout.js';

/** The sync's working file (rows and state); `--duckdb-path` is the published read copy (docs/analysts.md). */
const workOf = (d: string): string => layoutOf(dbPathOf(d)).work;
import { dir, emulator as startEmulatorFor } from '../fakes/lifecycle.js';

/** Scheduled runs as deployed: kill -9 then an immediate restart, SIGTERM, --max-run-time, reset, --full-refresh. */

const emulator = (seed: number, eventsPerProject: number, limits = true): Promise<Emulator> =>
  startEmulatorFor({ seed, eventsPerProject, limits: limits ? { ...SPEC_RATE_LIMITS } : false });

const files = (d: string): string[] => ['--duckdb-path', dbPathOf(d), '--state', statePathOf(d)];

function hasProgress(path: string): boolean {
  if (!existsSync(path)) return false;
  try {
    const doc = JSON.parse(readFileSync(path, 'utf8')) as StateDocument;
    return Object.values(doc.streams).some((s) => s.pending?.cursor !== undefined || s.mark !== undefined);
  } catch {
    return false;
  }
}

/** Start the CLI; the caller signals it. */
function start(
  emu: Emulator,
  args: readonly string[],
): { child: ChildProcessWithoutNullStreams; done: Promise<ChildRun>; stderr: () => string } {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { ...process.env, QUERY_API_BASE_URL: emu.url, QUERY_API_KEY: emu.apiKey },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const timeout = setTimeout(() => child.kill('SIGKILL'), 150_000); // a net for a hung child, not a bound on a run
  const done = new Promise<ChildRun>((resolve) =>
    child.on('close', (code, signal) => {
      clearTimeout(timeout);
      resolve({ code, signal, stdout, stderr });
    }),
  );
  return { child, done, stderr: () => stderr };
}

/** Wait for what a run has written (not for a time); give up after 2 minutes, a net for a run that never gets there. */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (!condition() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
  expect(condition(), what).toBe(true);
}

/**
 * A first sync that only sets a test up, in-process (a CLI process costs its start-up; the runs under
 * test are the CLI's): under `*`, the rows and `_query_sync_state` in the sync's working file and the
 * state file its export, as a CLI sync leaves them (the published copy appears at the next CLI run).
 */
async function seed(emu: Emulator, d: string, resources = RESOURCES): Promise<void> {
  const summary = await syncOnce({
    baseUrl: emu.url,
    apiKey: emu.apiKey,
    dir: d,
    project: '*',
    resources,
    destination: () => DuckDbDestination.open(workOf(d)),
  });
  expect(summary.ok, JSON.stringify(summary.streams.map((s) => s.error?.message))).toBe(true);
}

/** Every table equals the API up to an instant the last run certainly covered. */
async function expectExact(emu: Emulator, d: string, coveredBefore: number): Promise<void> {
  const before = (resource: ResourceDefinition, r: Record<string, unknown>): boolean =>
    (cursorMillis(resource, r as ApiRecord) ?? 0) < coveredBefore;
  for (const resource of RESOURCES) {
    const rows = (await readTable(d, resource.name)).filter((r) => before(resource, r));
    expectTableMatches(
      rows,
      emu.snapshot(resource.name).filter((r) => before(resource, r)),
      resource.key,
      resource.name,
    );
  }
}

describe('runs as deployed', () => {
  it('kill -9 a sync, start the next one at once (the killed process may not be reaped yet): it takes over the lease and runs', async () => {
    const emu = await emulator(41, 400);
    const d = dir();
    const args = ['sync', '--project', '*', ...files(d), '--batch-rows', '200', '--log-level', 'warn'];
    const first = start(emu, args);
    await until(() => hasProgress(statePathOf(d)), 'the first sync checkpointed');
    expect(existsSync(`${statePathOf(d)}.sync.lock`), 'it holds the lease').toBe(true);
    first.child.kill('SIGKILL');
    // No wait for the exit: the next run starts while the killed one may still be a zombie.
    // --lock-wait covers the instant in which the kernel is still closing its DuckDB file.
    const startedAt = Date.now();
    const second = await runCli(emu, [...args, '--lock-wait', '20s']);
    expect((await first.done).signal).toBe('SIGKILL');
    expect(second.code, second.stdout + second.stderr).toBe(0);
    expect(second.stderr).toMatch(/took over the lease .*sync\.lock from sync \(pid \d+.*(no longer runs|expired)/);
    expect(existsSync(`${statePathOf(d)}.sync.lock`), 'released at the end').toBe(false);
    await expectExact(emu, d, startedAt);
  });

  it('SIGTERM mid-batch: the run stops within the grace period, prints its summary, releases the lease, exits 143; data stays exact', async () => {
    const emu = await emulator(42, 400);
    const d = dir();
    const args = ['sync', '--project', '*', ...files(d), '--batch-rows', '200', '--log-level', 'warn'];
    const run = start(emu, args);
    await until(() => hasProgress(statePathOf(d)), 'the sync checkpointed');
    const signalledAt = Date.now();
    run.child.kill('SIGTERM');
    const stopped = await run.done;
    const stopSeconds = (Date.now() - signalledAt) / 1000;
    console.log(`SIGTERM to exit: ${stopSeconds.toFixed(2)} s`);
    expect(stopped.code, stopped.stdout + stopped.stderr).toBe(143);
    expect(stopped.stderr).toMatch(/SIGTERM received: stopping gracefully/);
    expect(stopped.stdout).toMatch(/events\s+\*\s+rows=\d+/);
    expect(stopped.stdout).toMatch(
      /sync STOPPED \(SIGTERM received\) with \d+ rows stored by this run; the state records exactly what is stored/,
    );
    expect(stopped.stdout).not.toMatch(/did not stop within/);
    expect(existsSync(`${statePathOf(d)}.sync.lock`), 'lease released').toBe(false);
    // The state is consistent: it never claims rows that are not stored. A later run completes it exactly.
    const doc = await StateStore.read(statePathOf(d));
    expect(Object.values(doc.streams).some((s) => s.lastRun !== undefined)).toBe(true);
    const finalAt = Date.now();
    const final = await runCli(emu, args);
    expect(final.code, final.stdout + final.stderr).toBe(0);
    await expectExact(emu, d, finalAt);
  });

  it('a second signal exits at once', async () => {
    const emu = await emulator(43, 800);
    const d = dir();
    const run = start(emu, ['sync', '--project', '*', ...files(d), '--batch-rows', '200', '--log-level', 'warn']);
    await until(() => hasProgress(statePathOf(d)), 'the sync checkpointed');
    run.child.kill('SIGINT');
    await until(() => /SIGINT received/.test(run.stderr()), 'the first SIGINT was received');
    run.child.kill('SIGINT');
    const stopped = await run.done;
    expect(stopped.code).toBe(130);
    expect(stopped.stderr).toMatch(/SIGINT again: exiting now \(exit 130\)/);
  });

  it('--max-run-time stops the run the same graceful way, exit 6, and the next run continues exactly', async () => {
    const emu = await emulator(44, 400);
    const d = dir();
    const args = ['sync', '--project', '*', ...files(d), '--batch-rows', '200', '--log-level', 'warn'];
    // Paced to 5 requests a second in all, the run cannot finish in 2 s however fast the
    // machine (with split walks an idle machine syncs this emulator in under 2 s).
    const stopped = await runCli(emu, [...args, '--max-run-time', '2s', '--max-rps', '5', '--search-gate-rps', '5']);
    expect(stopped.code, stopped.stdout + stopped.stderr).toBe(6);
    expect(stopped.stdout).toMatch(
      /sync STOPPED \(--max-run-time 2\.0s reached\) with \d+ rows stored by this run; .*next run continues/,
    );
    expect(existsSync(`${statePathOf(d)}.sync.lock`)).toBe(false);
    const finalAt = Date.now();
    const final = await runCli(emu, args);
    expect(final.code, final.stdout + final.stderr).toBe(0);
    await expectExact(emu, d, finalAt);
  });

  it("reset forgets one table's marks (with --yes off a terminal), and the next sync re-reads only that table", async () => {
    const emu = await emulator(45, 300, false);
    const d = dir();
    const args = ['sync', '--project', '*', ...files(d), '--log-level', 'warn'];
    await seed(emu, d);
    const marked = await StateStore.read(statePathOf(d));

    const refused = await runCli(emu, ['reset', '--resources', 'users', ...files(d)]);
    expect(refused.code).toBe(2);
    expect(refused.stdout).toMatch(/cannot ask for confirmation here \(not a terminal\): pass --yes/);
    expect(await StateStore.read(statePathOf(d))).toEqual(marked);

    // The state lives in the warehouse: reset names it (its file is a copy, rewritten too).
    const reset = await runCli(emu, ['reset', '--resources', 'users', '--yes', ...files(d)]);
    expect(reset.code, reset.stdout).toBe(0);
    expect(reset.stdout).toMatch(/forgot the marks of users:/);
    const after = await StateStore.read(statePathOf(d));
    for (const [key, s] of Object.entries(after.streams)) {
      if (key.startsWith('users:')) expect(s.mark, key).toBeUndefined();
      else expect(s, key).toEqual(marked.streams[key]);
    }

    emu.resetStats();
    const again = await runCli(emu, [...args, '--resources', 'users,events']);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    const users = /users\s+\S+\s+rows=(\d+)/.exec(again.stdout);
    expect(Number(users?.[1])).toBe(emu.snapshot('users').length); // read again from the start
    const events = /events\s+\S+\s+rows=(\d+)/.exec(again.stdout);
    expect(Number(events?.[1])).toBeLessThan(emu.snapshot('events').length); // only its lookback window
  });

  it('sync --full-refresh replaces one table (a row deleted at the source goes) and leaves the others and their marks alone', async () => {
    const emu = await emulator(46, 300, false);
    const d = dir();
    const args = ['sync', '--project', '*', ...files(d), '--log-level', 'warn'];
    await seed(emu, d);
    // A row the API no longer has (deleted at the source), and one in another table.
    const db = await DuckDbDestination.open(workOf(d));
    await db.query(`INSERT INTO users (project_id, id) VALUES ('default', 'deleted-at-source')`);
    await db.query(`INSERT INTO signals (project_id, id) VALUES ('default', 'kept-in-signals')`);
    await db.close();
    const marked = await StateStore.read(statePathOf(d));

    const refreshAt = Date.now();
    const refresh = await runCli(emu, [...args, '--full-refresh', '--resources', 'users']);
    expect(refresh.code, refresh.stdout + refresh.stderr).toBe(0);
    expect(refresh.stdout).toMatch(/full refresh: replaced users/);
    expectTableMatches(await readTable(d, 'users'), emu.snapshot('users'), 'id', 'users');
    expect((await readTable(d, 'signals')).some((r) => r.id === 'kept-in-signals')).toBe(true);
    const doc = await StateStore.read(statePathOf(d));
    for (const [key, s] of Object.entries(doc.streams)) {
      if (key.startsWith('users:')) expect(Date.parse(s.mark ?? '')).toBeGreaterThanOrEqual(refreshAt - 60_000);
      else expect(s, key).toEqual(marked.streams[key]);
    }
    // No shadow table is left behind.
    const check = await DuckDbDestination.open(workOf(d));
    const shadows = await check.query(
      `SELECT table_name FROM information_schema.tables WHERE table_name LIKE '_query_sync_refresh_%'`,
    );
    await check.close();
    expect(shadows).toEqual([]);
  });

  it('warns loudly when the warehouse is new but the state has marks, or the state is new beside a warehouse', async () => {
    const emu = await emulator(47, 50, false);
    const d = dir();
    const common = ['sync', '--project', '*', '--resources', 'events', '--log-level', 'warn'];
    await seed(emu, d, [events]);
    const elsewhere = dir();
    const newWarehouse = await runCli(emu, [
      ...common,
      '--duckdb-path',
      dbPathOf(elsewhere),
      '--state',
      statePathOf(d),
    ]);
    expect(newWarehouse.stdout).toMatch(
      /WARNING: the warehouse .*warehouse\.duckdb is new, but the state .*state\.json has marks for 1 stream\(s\) \(events:\*\).*Wrong --duckdb-path/,
    );
    // A new state file beside a warehouse that keeps the state: restored from it, nothing to warn about.
    const otherState = [
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(elsewhere).replace('state.json', 'other.json'),
    ];
    const restored = await runCli(emu, [...common, ...otherState]);
    expect(restored.stdout).not.toMatch(/WARNING/);
    // A warehouse with rows but no state (the table dropped) and no state file: that one is loud.
    const db = await DuckDbDestination.open(workOf(d));
    await db.query('DROP TABLE _query_sync_state');
    await db.close();
    const newState = await runCli(emu, [
      ...common,
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(elsewhere).replace('state.json', 'third.json'),
    ]);
    expect(newState.stdout).toMatch(
      /WARNING: the warehouse .*warehouse\.duckdb exists but holds no query-sync state, and there is no state file at .*third\.json: this sync reads all history again/,
    );
    const ordinary = await runCli(emu, [...common, ...files(d)]);
    expect(ordinary.stdout).not.toMatch(/WARNING/);
  });
});
