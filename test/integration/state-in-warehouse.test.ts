import { copyFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';

import { describe, expect, it } from 'vitest';
import { RESOURCES } from '../../connectors/index.js';
import type { ApiRecord, ResourceDefinition } from '../../src/core/types.js';
import type { Emulator } from '../../emulator/index.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { cursorMillis } from '../../src/normalize/normalize.js';
import type { StateDocument } from '../../src/state/document.js';
import { runCli, type ChildRun } from '../fakes/cli.js';
import { dbPathOf, expectTableMatches, readTable, statePathOf, syncOnce } from '../fakes/harness.js';
import { layoutOf } from '../../src/publish/layout.js';

/** The sync's working file, where the state lives (`--duckdb-path` is the published read copy: docs/analysts.md). */
const workOf = (d: string): string => layoutOf(dbPathOf(d)).work;
import { dir, emulator as startEmulatorFor } from '../fakes/lifecycle.js';

/**
 * State beside the data (the warehouse's `_query_sync_state`): the real CLI, real DuckDB files, the
 * emulator on loopback. A run without its state file restores the state from the warehouse and
 * reads only what is new; a state file and a warehouse that disagree: the warehouse wins.
 */

const emulator = (seed: number, eventsPerProject: number): Promise<Emulator> =>
  startEmulatorFor({ seed, eventsPerProject, limits: false });

const files = (d: string): string[] => ['--duckdb-path', dbPathOf(d), '--state', statePathOf(d)];

async function sync(
  emu: Emulator,
  d: string,
  extra: readonly string[] = [],
): Promise<ChildRun & { requests: number; json: Record<string, unknown> }> {
  const run = await runCli(emu, [
    'sync',
    '--project',
    '*',
    ...files(d),
    '--json',
    '--log-level',
    'info',
    '--log-format',
    'json',
    ...extra,
  ]);
  expect(run.code, run.stdout + run.stderr).toBe(0);
  const json = JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}') as { totals: { requests: number } };
  return { ...run, requests: json.totals.requests, json };
}

/**
 * A first full sync as a test's setup, in-process (a CLI process costs its start-up, and what these
 * tests prove is the run after it): every resource under `*`, the rows and `_query_sync_state` in the
 * sync's working file and the state file its export, as a CLI sync leaves them (the published copy
 * appears at the next CLI run's publish).
 */
async function seed(emu: Emulator, d: string): Promise<void> {
  const summary = await syncOnce({
    baseUrl: emu.url,
    apiKey: emu.apiKey,
    dir: d,
    project: '*',
    destination: () => DuckDbDestination.open(workOf(d)),
  });
  expect(summary.ok, JSON.stringify(summary.streams.map((s) => s.error?.message))).toBe(true);
}

async function stateRows(d: string): Promise<Map<string, string>> {
  const db = await DuckDbDestination.open(workOf(d), { readOnly: true });
  try {
    const rows = await db.query('SELECT key, value FROM _query_sync_state ORDER BY key');
    return new Map(rows.map((r) => [String(r['key']), String(r['value'])]));
  } finally {
    await db.close();
  }
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

const addEvents = (emu: Emulator): void => {
  for (const p of ['default', 'alpha', 'beta']) emu.addEvents(p, 40);
};

describe('state in the warehouse (DuckDB)', () => {
  it('a sync whose state file was deleted restores the state from the warehouse: as many requests as an ordinary incremental sync, data exact', async () => {
    const emu = await emulator(61, 400);
    const stateful = dir();
    const stateless = dir();
    await sync(emu, stateless);
    const rows = await stateRows(stateless);
    expect(rows.get('version')).toBe('1');
    expect(
      [...rows.keys()].some((k) => k.startsWith('stream:events:')),
      [...rows.keys()].join(', '),
    ).toBe(true);
    // The control keeps its state file: a copy of the same first sync (one sync fewer to run).
    copyFileSync(workOf(stateless), workOf(stateful));
    copyFileSync(statePathOf(stateless), statePathOf(stateful));

    addEvents(emu);
    const incremental = await sync(emu, stateful);
    // The file a run leaves holds what its warehouse holds: the next run finds nothing to say. (The
    // two were compared as text, which the order of their streams made differ after every first run.)
    expect(incremental.stderr).not.toMatch(/differ; the warehouse wins/);
    rmSync(statePathOf(stateless));
    const startedAt = Date.now();
    const restored = await sync(emu, stateless);
    expect(restored.stderr).toMatch(
      /state: restored from table _query_sync_state of DuckDB file .*warehouse\.work\.duckdb \(no state file at/,
    );
    // The same windows are read: at most a request or two apart (a window ending a moment later).
    expect(
      Math.abs(restored.requests - incremental.requests),
      `stateless ${restored.requests} vs stateful ${incremental.requests}`,
    ).toBeLessThanOrEqual(2);
    expect(restored.requests).toBeLessThan(40); // a full re-read of 1,200 events would be far more
    expect(existsSync(statePathOf(stateless)), 'the file is written again, as an export').toBe(true);
    await expectExact(emu, stateless, startedAt);
  });

  it('a fresh container (a new folder with only the working warehouse file) syncs incrementally and exactly', async () => {
    const emu = await emulator(62, 400);
    const first = dir();
    await seed(emu, first);
    addEvents(emu);
    const control = dir();
    copyFileSync(workOf(first), workOf(control));
    copyFileSync(statePathOf(first), statePathOf(control));
    const fresh = dir();
    copyFileSync(workOf(first), workOf(fresh));
    const incremental = await sync(emu, control);
    const startedAt = Date.now();
    const run = await sync(emu, fresh);
    expect(run.stderr).not.toMatch(/reads all history again/);
    expect(
      Math.abs(run.requests - incremental.requests),
      `fresh ${run.requests} vs with state ${incremental.requests}`,
    ).toBeLessThanOrEqual(2);
    await expectExact(emu, fresh, startedAt);
  });

  it('kill -9 mid-sync, delete the state file, sync again: resumes from the warehouse, no row lost or duplicated', async () => {
    const d = dir();
    /** A checkpoint with a cursor reached the state file (the warehouse's export, written right after its commit). */
    const checkpointed = (): boolean => {
      if (!existsSync(statePathOf(d))) return false;
      try {
        const doc = JSON.parse(readFileSync(statePathOf(d), 'utf8')) as StateDocument;
        return Object.values(doc.streams).some((s) => s.pending?.cursor !== undefined);
      } catch {
        return false;
      }
    };
    // From the first request after that checkpoint on, the API answers no more until the kill: the
    // window has pages left, so the run cannot finish first, however fast the machine.
    let stalled = false;
    const emu = await startEmulatorFor({
      seed: 63,
      eventsPerProject: 1000,
      limits: false,
      onRequest: () => {
        if (stalled || !checkpointed()) return;
        stalled = true;
        emu.configure({ latencyMs: 600_000, latencyJitterMs: 0 });
      },
    });
    const args = [
      'sync',
      '--project',
      '*',
      ...files(d),
      '--batch-rows',
      '100',
      '--log-level',
      'warn',
      '--concurrency',
      '1',
    ];
    const killed = await runCli(emu, args, { killWhen: checkpointed });
    expect(killed.signal, killed.stdout + killed.stderr).toBe('SIGKILL');
    // Disarmed before the next run: the kill may land before any request after the checkpoint
    // arrived, and the resumed run writes a checkpoint of its own (it stalled once, in CI).
    stalled = true;
    emu.configure({ latencyMs: 0, latencyJitterMs: 0 });
    rmSync(statePathOf(d), { force: true });
    addEvents(emu);
    const startedAt = Date.now();
    // The resumed run writes at the default batch size: only the killed run needs small batches.
    const resumed = await runCli(emu, [
      'sync',
      '--project',
      '*',
      ...files(d),
      '--log-level',
      'info',
      '--lock-wait',
      '20s',
    ]);
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0);
    expect(resumed.stderr).toMatch(/restored from table _query_sync_state/);
    await expectExact(emu, d, startedAt);
  });

  it('both present: the warehouse wins over a state file that disagrees, and the file is rewritten from it', async () => {
    const emu = await emulator(64, 300);
    const d = dir();
    await seed(emu, d);
    const doc = JSON.parse(readFileSync(statePathOf(d), 'utf8')) as StateDocument;
    // A file that says everything was read up to the year 3000 would read nothing.
    const wrong = {
      ...doc,
      streams: Object.fromEntries(
        Object.entries(doc.streams).map(([k, s]) => [
          k,
          s.mark === undefined ? s : { ...s, mark: '3000-01-01T00:00:00.000Z' },
        ]),
      ),
    };
    writeFileSync(statePathOf(d), JSON.stringify(wrong));
    addEvents(emu);
    const startedAt = Date.now();
    const run = await sync(emu, d);
    expect(run.stderr).toMatch(/differ; the warehouse wins/);
    expect(readFileSync(statePathOf(d), 'utf8')).not.toContain('3000-01-01');
    await expectExact(emu, d, startedAt);
  });

  it('a state file from before (no state table yet) is migrated into the warehouse once, with a log line', async () => {
    const emu = await emulator(65, 300);
    const d = dir();
    await seed(emu, d);
    // What an older version left: rows and a state file, no state table.
    const db = await DuckDbDestination.open(workOf(d));
    await db.query('DROP TABLE _query_sync_state');
    await db.close();
    addEvents(emu);
    const control = dir();
    copyFileSync(workOf(d), workOf(control));
    copyFileSync(statePathOf(d), statePathOf(control));
    const run = await sync(emu, d);
    expect(run.stderr).toMatch(/migrated the state file .*state\.json into table _query_sync_state/);
    expect((await stateRows(d)).size).toBeGreaterThan(2);
    // From now on the warehouse alone is enough.
    rmSync(statePathOf(d));
    const again = await sync(emu, d);
    expect(again.stderr).not.toMatch(/migrated/);
    expect(again.requests).toBeLessThan(30);
  });

  it('a bad state row stops the run with exit 4 naming the key, before any request', async () => {
    const emu = await emulator(66, 50);
    const d = dir();
    await seed(emu, d);
    const db = await DuckDbDestination.open(workOf(d));
    const key = String(
      (await db.query("SELECT key FROM _query_sync_state WHERE key LIKE 'stream:events:%' LIMIT 1"))[0]?.['key'],
    );
    await db.query(`UPDATE _query_sync_state SET value = '{"mark": "yesterday"}' WHERE key = '${key}'`);
    await db.close();
    rmSync(statePathOf(d));
    const before = emu.stats().requests;
    const run = await runCli(emu, ['sync', '--project', '*', ...files(d)]);
    expect(run.code, run.stdout + run.stderr).toBe(4);
    expect(run.stdout).toMatch(/_query_sync_state .*stream "events:\*", field "mark": expected an ISO-8601 instant/);
    expect(emu.stats().requests).toBe(before);
  });

  it('status and reset read and change the state in the warehouse when there is no state file', async () => {
    const emu = await emulator(67, 100);
    const d = dir();
    await seed(emu, d);
    rmSync(statePathOf(d));
    const status = await runCli(emu, ['status', '--json', ...files(d)]);
    expect(status.code, status.stdout + status.stderr).toBe(0);
    const report = JSON.parse(status.stdout) as {
      state: string;
      resources: readonly {
        resource: string;
        scopes: readonly { project: string; sync?: { highWaterMark?: string } }[];
      }[];
    };
    expect(report.state).toMatch(/_query_sync_state/);
    expect(
      report.resources.find((r) => r.resource === 'users')?.scopes.find((s) => s.project === '*')?.sync?.highWaterMark,
    ).toBeDefined();
    const reset = await runCli(emu, ['reset', '--resources', 'users', '--yes', ...files(d)]);
    expect(reset.code, reset.stdout + reset.stderr).toBe(0);
    expect(reset.stdout).toMatch(/forgot the marks of users:\*/);
    const rows = await stateRows(d);
    expect(JSON.parse(rows.get('stream:users:*') ?? '{}')).not.toHaveProperty('mark');
    expect(JSON.parse(rows.get('stream:events:*') ?? '{}')).toHaveProperty('mark');
  });
});
