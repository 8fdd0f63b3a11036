import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import type { RunJson } from '../../src/reports/run-json.js';
import { silentLogger } from '../../src/core/log.js';
import { newCallStats } from '../../src/http/client.js';
import { recordRun, schemaChanges } from '../../src/analysts/run-history.js';
import { bigqueryTarget } from '../fixtures/bigquery/pipeline-target.js';
import { jsonLines, runCli } from '../fakes/cli.js';
import { dbPathOf, readTable, statePathOf, syncOnce } from '../fakes/harness.js';
import { asTheCliLaysItOut } from '../fakes/cli-warehouse.js';
import { events } from '../../connectors/events.js';
import { users } from '../../connectors/users.js';
import { withPrivacy } from '../../src/normalize/privacy.js';
import { layoutOf } from '../../src/publish/layout.js';
import { dir, emulator } from '../fakes/lifecycle.js';

describe('run history and schema changes in the warehouse (the real CLI into a real DuckDB file)', () => {
  it('a row per run in _query_sync_runs, a row per added column in _query_sync_schema_changes, a log line per change', async () => {
    const emu = await emulator({ seed: 8, eventsPerProject: 80 });
    const d = dir();
    const files = ['--duckdb-path', dbPathOf(d), '--state', statePathOf(d)];
    // First run: events without `model` (excluded), so the second run adds it as a new column.
    const first = await runCli(emu, [
      'sync',
      '--project',
      'alpha',
      '--resources',
      'events,users',
      '--exclude-columns',
      'events.model',
      ...files,
    ]);
    expect(first.code, first.stderr).toBe(0);
    const created = jsonLines(first.stderr).filter((l) => String(l.msg).startsWith('schema change:'));
    expect(created.map((l) => l.msg).sort()).toEqual([
      expect.stringMatching(/^schema change: new table event_signals \(9 columns\)$/),
      expect.stringMatching(/^schema change: new table events \(\d+ columns\)$/),
      expect.stringMatching(/^schema change: new table users \(\d+ columns\)$/),
    ]);

    emu.addEvents('alpha', 5);
    const second = await runCli(emu, ['sync', '--project', 'alpha', '--resources', 'events,users', '--json', ...files]);
    expect(second.code, second.stderr).toBe(0);
    const changeLines = jsonLines(second.stderr).filter((l) => String(l.msg).startsWith('schema change:'));
    expect(changeLines.map((l) => l.msg)).toEqual(['schema change: new column events.model (string)']);
    const summary = JSON.parse(second.stdout) as { runId: string; totals: { rows: number } };

    const runs = await readTable(d, '_query_sync_runs');
    expect(runs).toHaveLength(2);
    const last = runs.find((r) => r.run_id === summary.runId);
    expect(last).toMatchObject({ command: 'sync', outcome: 'ok', rows: BigInt(summary.totals.rows) });
    const streams = JSON.parse(String(last?.streams)) as { resource: string; outcome: string }[];
    expect(streams.map((s) => `${s.resource} ${s.outcome}`).sort()).toEqual(['events ok', 'users ok']);
    const firstRun = runs.find((r) => r.run_id !== summary.runId);
    expect(JSON.parse(String(firstRun?.settings))).toMatchObject({
      project: 'alpha',
      resources: ['events', 'users'],
      excludedColumns: { events: ['model'] },
    });

    const changes = await readTable(d, '_query_sync_schema_changes');
    const eventColumns =
      (await readTable(d, 'events')).length > 0 ? Object.keys((await readTable(d, 'events'))[0] ?? {}) : [];
    expect(
      changes
        .filter((c) => c.table_name === 'events' && c.change === 'new table')
        .map((c) => c.column_name)
        .sort(),
    ).toEqual(eventColumns.filter((c) => c !== 'model').sort());
    expect(
      changes
        .filter((c) => c.run_id === summary.runId)
        .map((c) => [c.table_name, c.column_name, c.column_type, c.change]),
    ).toEqual([['events', 'model', 'string', 'new column']]);
  });

  it('_run_id on every row written: the id of the run that last wrote it, as in _query_sync_runs; a table from before _run_id gains the column', async () => {
    const emu = await emulator({ seed: 9, eventsPerProject: 40 });
    const d = dir();
    const files = ['--duckdb-path', dbPathOf(d), '--state', statePathOf(d)];
    const first = await runCli(emu, ['sync', '--project', 'alpha', '--resources', 'events,users', '--json', ...files]);
    expect(first.code, first.stderr).toBe(0);
    const firstId = (JSON.parse(first.stdout) as { runId: string }).runId;
    for (const table of ['events', 'users']) {
      const rows = await readTable(d, table);
      expect(rows.length).toBeGreaterThan(0);
      expect(new Set(rows.map((r) => r._run_id))).toEqual(new Set([firstId]));
    }
    // A warehouse written before `_run_id` existed: drop the column, as an older version left it.
    const { DuckDBInstance } = await import('@duckdb/node-api');
    // In the sync's working file (`--duckdb-path` is the published read copy).
    const db = await DuckDBInstance.create(layoutOf(dbPathOf(d)).work);
    const c = await db.connect();
    await c.run('ALTER TABLE events DROP COLUMN _run_id');
    c.closeSync();
    db.closeSync();

    emu.addEvents('alpha', 5);
    const second = await runCli(emu, ['sync', '--project', 'alpha', '--resources', 'events,users', '--json', ...files]);
    expect(second.code, second.stderr).toBe(0);
    const secondId = (JSON.parse(second.stdout) as { runId: string }).runId;
    const events = await readTable(d, 'events');
    // The rows the second run wrote (its window: the new events and the lookback) carry its id; the others NULL.
    const byRun = new Map<unknown, number>();
    for (const r of events) byRun.set(r._run_id, (byRun.get(r._run_id) ?? 0) + 1);
    expect([...byRun.keys()].sort()).toEqual([null, secondId].sort());
    expect(byRun.get(secondId)).toBeGreaterThanOrEqual(5);
    const changes = await readTable(d, '_query_sync_schema_changes');
    expect(
      changes.filter((ch) => ch.run_id === secondId).map((ch) => [ch.table_name, ch.column_name, ch.change]),
    ).toEqual([['events', '_run_id', 'new column']]);
    expect((await readTable(d, '_query_sync_runs')).map((r) => r.run_id).sort()).toEqual([firstId, secondId].sort());
  });

  it('a failed run is recorded as failed, its errors without the key', async () => {
    const emu = await emulator({ seed: 8, eventsPerProject: 10 });
    const d = dir();
    const run = await runCli({ url: emu.url, apiKey: 'secret-wrong-key-77' }, [
      'sync',
      '--project',
      'alpha',
      '--resources',
      'events',
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
    ]);
    expect(run.code).toBe(3);
    const [row, ...more] = await readTable(d, '_query_sync_runs');
    expect(more).toHaveLength(0);
    // Every request the server counted: no retry of a 401, and nothing sent once the first is read (a
    // first sync's two timeseries requests: the second leaves only if it was in flight already).
    const server = emu.stats();
    expect(server.requests).toBe(server.unauthorized);
    expect(row).toMatchObject({
      command: 'sync',
      outcome: 'failed',
      exit_code: 3n,
      rows: 0n,
      requests: BigInt(server.requests),
    });
    expect(server.requests).toBeLessThanOrEqual(2);
    expect(JSON.parse(String(row?.errors))).toEqual([expect.stringMatching(/the API key was rejected \(401\)/)]);
    expect(JSON.stringify(row, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).not.toContain(
      'secret-wrong-key-77',
    );
  });
});

describe('schemaChanges', () => {
  it('new table, new column and variant column, in column order', () => {
    const before = new Map([
      [
        'events',
        [
          { name: 'id', type: 'string' as const },
          { name: 'n', type: 'int64' as const },
        ],
      ],
      ['users', undefined],
    ]);
    const after = new Map([
      [
        'events',
        [
          { name: 'id', type: 'string' as const },
          { name: 'n', type: 'int64' as const },
          { name: 'model', type: 'string' as const },
          { name: 'n__v_string', type: 'string' as const },
        ],
      ],
      ['users', [{ name: 'id', type: 'string' as const }]],
    ]);
    expect(schemaChanges(before, after)).toEqual([
      { table: 'events', column: 'model', type: 'string', change: 'new column' },
      { table: 'events', column: 'n__v_string', type: 'string', change: 'variant column' },
      { table: 'users', column: 'id', type: 'string', change: 'new table' },
    ]);
  });
});

describe('--schema-contract (the real CLI into a real DuckDB file)', () => {
  it('freeze-columns fails the stream that meets a new field, naming it, and keeps its mark; freeze refuses a new table', async () => {
    const emu = await emulator({ seed: 9, eventsPerProject: 60 });
    const d = dir();
    const files = [
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
      '--project',
      'alpha',
      '--resources',
      'events,users',
    ];
    // The first sync (as `--exclude-columns events.user_input` runs it) only makes the tables the
    // contract then holds: in-process, into the CLI's layout.
    const withoutUserInput = withPrivacy(events, { exclude: { events: ['user_input'] }, hash: {} }, undefined);
    const first = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      project: 'alpha',
      resources: [withoutUserInput, users],
      destination: asTheCliLaysItOut(d),
    });
    expect(first.ok, JSON.stringify(first.streams.map((s) => s.error?.message))).toBe(true);
    const markBefore = (
      JSON.parse(await readFile(statePathOf(d), 'utf8')) as { streams: Record<string, { mark?: string }> }
    ).streams['events:alpha']?.mark;

    emu.addEvents('alpha', 5);
    const frozen = await runCli(emu, ['sync', '--schema-contract', 'freeze-columns', '--json', ...files]);
    expect(frozen.code).toBe(1);
    const summary = JSON.parse(frozen.stdout) as RunJson;
    expect(summary.streams.map((s) => `${s.resource} ${s.outcome}`).sort()).toEqual(['events failed', 'users ok']);
    expect(summary.errors[0]?.message).toMatch(
      /--schema-contract freeze-columns: a record of events \(key .+\) has the new field "user_input" \(string\)/,
    );
    const state = JSON.parse(await readFile(statePathOf(d), 'utf8')) as { streams: Record<string, { mark?: string }> };
    expect(state.streams['events:alpha']?.mark).toBe(markBefore);
    expect(Object.keys((await readTable(d, 'events'))[0] ?? {})).not.toContain('user_input');

    // The same run under evolve adds the column.
    const evolved = await runCli(emu, ['sync', ...files]);
    expect(evolved.code, evolved.stderr).toBe(0);
    expect(jsonLines(evolved.stderr).map((l) => l.msg)).toContain(
      'schema change: new column events.user_input (string)',
    );

    const fresh = dir();
    const frozenNew = await runCli(emu, [
      'sync',
      '--schema-contract',
      'freeze',
      '--duckdb-path',
      dbPathOf(fresh),
      '--state',
      statePathOf(fresh),
      '--project',
      'alpha',
      '--resources',
      'users',
    ]);
    expect(frozenNew.code).toBe(1);
    expect(frozenNew.stdout).toMatch(
      /the table "users" does not exist and --schema-contract freeze allows no new table/,
    );
  });
});

describe('the repairs are runs too: verify --repair and the reconcile repair', () => {
  it('honour --schema-contract and write a _query_sync_runs row each', async () => {
    const HOUR = 3_600_000;
    const emu = await emulator({ seed: 33, eventsPerProject: 300, historyDays: 3, projects: ['alpha'] });
    const d = dir();
    const files = [
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
      '--project',
      'alpha',
      '--resources',
      'events',
    ];
    // A warehouse whose events table has no user_input (as `--exclude-columns events.user_input` left
    // it): in-process, into the CLI's layout.
    const withoutUserInput = withPrivacy(events, { exclude: { events: ['user_input'] }, hash: {} }, undefined);
    const first = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      project: 'alpha',
      resources: [withoutUserInput],
      destination: asTheCliLaysItOut(d),
    });
    expect(first.ok, JSON.stringify(first.streams.map((s) => s.error?.message))).toBe(true);
    // An hour of events lost from the warehouse, well inside the range a sync's reconcile checks.
    const hour = Math.floor(Date.now() / HOUR) * HOUR - 5 * HOUR;
    const where = `timestamp >= '${new Date(hour).toISOString()}' AND timestamp < '${new Date(hour + HOUR).toISOString()}'`;
    const { DuckDBInstance } = await import('@duckdb/node-api');
    const db = await DuckDBInstance.create(layoutOf(dbPathOf(d)).work);
    const c = await db.connect();
    const lost = Number(
      (await c.runAndReadAll(`SELECT count(*) AS n FROM events WHERE ${where}`)).getRowObjects()[0]?.n,
    );
    await c.run(`DELETE FROM events WHERE ${where}`);
    c.closeSync();
    db.closeSync();
    expect(lost).toBeGreaterThan(0);
    const contract = /--schema-contract freeze-columns: a record of events \(key .+\) has the new field "user_input"/;
    const unchanged = async (): Promise<void> => {
      const rows = await readTable(d, 'events');
      expect(Object.keys(rows[0] ?? {})).not.toContain('user_input');
      expect(
        rows.filter((r) => Date.parse(String(r.timestamp)) >= hour && Date.parse(String(r.timestamp)) < hour + HOUR),
      ).toEqual([]);
    };

    // verify --repair re-reads the hour under the contract: refused, the hour still differs (exit 5).
    const range = [
      '--from',
      new Date(hour).toISOString(),
      '--to',
      new Date(hour + HOUR).toISOString(),
      '--window',
      '1h',
    ];
    const verified = await runCli(emu, [
      'verify',
      ...range,
      ...files,
      '--repair',
      '--schema-contract',
      'freeze-columns',
    ]);
    expect(verified.code, verified.stdout + verified.stderr).toBe(5);
    expect(verified.stdout).toMatch(contract);
    await unchanged();
    // Two rows: the setup's sync (the harness runs it as the CLI does, its row included) and the verify.
    const runs = await readTable(d, '_query_sync_runs');
    expect(runs.map((r) => r.command).sort()).toEqual(['sync', 'verify']);
    const verifyRow = runs.find((r) => r.command === 'verify');
    expect(verifyRow).toMatchObject({ command: 'verify', outcome: 'mismatch', exit_code: 5n });
    expect(JSON.parse(String(verifyRow?.errors))).toEqual([expect.stringMatching(contract)]);

    // A sync's reconcile finds the hour and repairs it with the run's contract-wrapped resources: refused
    // too. (No lookback, no settle: the walk itself reads nothing the contract would refuse.)
    const synced = await runCli(emu, [
      'sync',
      ...files,
      '--schema-contract',
      'freeze-columns',
      '--lookback',
      '0s',
      '--settle',
      '0',
      '--json',
    ]);
    expect(synced.code, synced.stdout + synced.stderr).toBe(5);
    const summary = JSON.parse(synced.stdout) as RunJson & {
      runId: string;
      reconcile: { remaining: number; windows: { reason?: string }[] };
    };
    expect(summary.reconcile.remaining).toBe(1);
    expect(summary.reconcile.windows.map((w) => w.reason)).toEqual([expect.stringMatching(contract)]);
    await unchanged();
    const syncRow = (await readTable(d, '_query_sync_runs')).find((r) => r.run_id === summary.runId);
    expect(syncRow).toMatchObject({ command: 'sync', outcome: 'mismatch', exit_code: 5n });
  });
});

describe('run history through the BigQuery destination (real client, strict double)', () => {
  it('recordRun writes _query_sync_runs and _query_sync_schema_changes with the ordinary keyed write', async () => {
    const d = dir();
    const factory = bigqueryTarget.destination(d);
    if (factory === undefined) throw new Error('expected a BigQuery destination factory');
    const destination = await factory();
    try {
      const runId = 'run-history-bigquery';
      await recordRun(
        destination,
        {
          command: 'sync',
          startedAt: '2026-11-23T20:00:00.000Z',
          endedAt: '2026-11-23T20:01:00.000Z',
          streams: [
            {
              resource: 'events',
              scope: '*',
              outcome: 'ok',
              rows: 12,
              pages: 1,
              windows: 1,
              seconds: 1,
              stats: { ...newCallStats(), requests: 1 },
            },
          ],
          settings: { project: '*' },
          secrets: [],
        },
        [{ table: 'events', column: 'model', type: 'string', change: 'new column' }],
        silentLogger(),
        runId,
      );
      const runs = await bigqueryTarget.readTable(d, '_query_sync_runs');
      expect(runs).toEqual([expect.objectContaining({ run_id: runId, command: 'sync', outcome: 'ok', rows: 12n })]);
      const changes = await bigqueryTarget.readTable(d, '_query_sync_schema_changes');
      expect(changes).toEqual([
        expect.objectContaining({ run_id: runId, table_name: 'events', column_name: 'model', change: 'new column' }),
      ]);
    } finally {
      await destination.close();
    }
  });
});
