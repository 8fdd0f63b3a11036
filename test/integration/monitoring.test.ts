import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { layoutOf } from '../../src/publish/layout.js';
import { jsonLines, runCli } from '../fakes/cli.js';
import { dbPathOf, readTable, statePathOf } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';
import {
  downUrl,
  promtoolCheckMetrics,
  sampleValue,
  startPushgateway,
  startReceiver,
  type Received,
} from '../fakes/monitoring.js';

/**
 * A run's monitoring (issue 32; docs/monitoring.md) through the real CLI against the emulator, into
 * a real DuckDB file: its metrics in the real Pushgateway and in a file the real `promtool` checks,
 * its pings and notifications received by a local HTTP endpoint; and endpoints that are down, never
 * answer or answer 500 change neither the exit code nor the data, and hold the run no longer than
 * the monitoring timeout.
 */

const HOUR = 3_600_000;
const PING_TOKEN = '7d3c1e0a-5b2f-4c9e-8a61-0f3e2d1c4b5a';
const HOOK_TOKEN = 'T000/B000/XXXXsecretXXXX';

const pingsOf = (received: readonly Received[]): string[] =>
  received.filter((r) => r.url.startsWith('/ping/')).map((r) => r.url.replace(/\?rid=[\w-]+$/, ''));
const hooksOf = (received: readonly Received[]): string[] =>
  received.filter((r) => r.url.startsWith('/hook/')).map((r) => (JSON.parse(r.body) as { text: string }).text);

/** Delete alpha's events of one hour in the sync's working file; how many went. */
async function deleteHour(d: string, fromMs: number): Promise<number> {
  const db = await DuckDbDestination.open(layoutOf(dbPathOf(d)).work);
  try {
    const where = `project_id = 'alpha' AND timestamp >= '${new Date(fromMs).toISOString()}' AND timestamp < '${new Date(fromMs + HOUR).toISOString()}'`;
    const [row] = await db.query(`SELECT count(*) AS n FROM events WHERE ${where}`);
    await db.query(`DELETE FROM events WHERE ${where}`);
    return Number(row?.n);
  } finally {
    await db.close();
  }
}

describe('a run tells the Pushgateway, a metrics file, a ping endpoint and a webhook how it went', () => {
  it('success, a schema change with a difference left, success again, a failure: figures, last success, pings, notifications', async () => {
    const emu = await emulator({ seed: 32, eventsPerProject: 300, historyDays: 3 });
    const gateway = await startPushgateway();
    const receiver = await startReceiver('ok');
    const d = dir();
    const metricsFile = join(d, 'textfile', 'query-sync.prom');
    const args = (...more: string[]): string[] => [
      'sync',
      '--project',
      'alpha',
      '--resources',
      'events,users',
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
      '--log-format',
      'json',
      '--metrics-file',
      metricsFile,
      '--pushgateway',
      gateway.url,
      '--pushgateway-instance',
      'test-warehouse',
      '--ping-url',
      `${receiver.url}/ping/${PING_TOKEN}`,
      '--notify-url',
      `${receiver.url}/hook/${HOOK_TOKEN}`,
      '--notify-on',
      'failure,difference,schema-change',
      ...more,
    ];
    const group = { job: 'query-sync', instance: 'test-warehouse' };
    const pushed = async (name: string, labels: Record<string, string> = {}): Promise<number | undefined> =>
      sampleValue(await gateway.metrics(), name, { ...group, ...labels });

    // 1. A first sync (events without `model`, so that the next run adds it): every figure, pings, no notification.
    const first = await runCli(emu, args('--exclude-columns', 'events.model'));
    expect(first.code, first.stdout + first.stderr).toBe(0);
    const events = await readTable(d, 'events');
    const users = await readTable(d, 'users');
    expect(events.length).toBeGreaterThan(0);
    expect(await pushed('query_sync_rows_total', { resource: 'events', project: 'alpha' })).toBe(events.length);
    expect(await pushed('query_sync_rows_total', { resource: 'users', project: 'alpha' })).toBe(users.length);
    expect(await pushed('query_sync_last_run_outcome', { status: 'ok' })).toBe(1);
    expect(await pushed('query_sync_last_run_exit_code')).toBe(0);
    expect((await gateway.metrics()).match(/^query_sync_build_info\{.*version="[\d.]+".*\} 1$/m)).not.toBeNull();
    const success1 = await pushed('query_sync_last_success_timestamp_seconds');
    const end1 = await pushed('query_sync_last_run_end_timestamp_seconds');
    expect(success1).toBe(end1);
    expect(await pushed('query_sync_stream_lag_seconds', { resource: 'events', project: 'alpha' })).toBeGreaterThan(0);
    expect(await pushed('query_sync_published_as_of_timestamp_seconds')).toBeGreaterThan(0);
    expect(
      await pushed('query_sync_reconcile_windows_checked_total', { resource: 'events', project: 'alpha' }),
    ).toBeGreaterThan(0);
    const file1 = readFileSync(metricsFile, 'utf8');
    expect(promtoolCheckMetrics(file1)).toEqual({ code: 0, output: '' });
    expect(sampleValue(file1, 'query_sync_rows_total', { resource: 'events', project: 'alpha' })).toBe(events.length);
    expect(pingsOf(receiver.received)).toEqual([`/ping/${PING_TOKEN}/start`, `/ping/${PING_TOKEN}`]);
    // One id for the run: the pings' `rid` is its row's in `_query_sync_runs` and its rows' `_run_id`.
    const [run1, ...moreRuns] = await readTable(d, '_query_sync_runs');
    expect(moreRuns).toEqual([]);
    expect(String(run1?.run_id)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const rids = receiver.received
      .filter((r) => r.url.startsWith('/ping/'))
      .map((r) => new URL(r.url, receiver.url).searchParams.get('rid'));
    expect(rids).toEqual([run1?.run_id, run1?.run_id]);
    expect(new Set(events.map((r) => r._run_id))).toEqual(new Set([run1?.run_id]));
    expect(receiver.received.at(-1)?.body).toMatch(/^sync ok in [\d.]+ s$/m);
    // A first sync creates its tables: no change to anyone's queries, no notification.
    expect(hooksOf(receiver.received)).toEqual([]);

    // 2. `model` comes back (a new column) and an hour of rows goes missing, checked only: exit 5.
    receiver.received.length = 0;
    emu.addEvents('alpha', 5);
    const busiest = busiestHour(emu.snapshot('events', 'alpha').map((r) => Date.parse(String(r.timestamp))));
    expect(await deleteHour(d, busiest)).toBeGreaterThan(0);
    const second = await runCli(emu, args('--reconcile', 'check'));
    expect(second.code, second.stdout + second.stderr).toBe(5);
    expect(await pushed('query_sync_last_run_outcome', { status: 'difference' })).toBe(1);
    expect(await pushed('query_sync_last_run_exit_code')).toBe(5);
    expect(await pushed('query_sync_last_success_timestamp_seconds')).toBe(success1);
    expect(await pushed('query_sync_reconcile_windows_still_differing', { resource: 'events', project: 'alpha' })).toBe(
      1,
    );
    expect(await pushed('query_sync_schema_changes_total', { resource: 'events' })).toBe(1);
    expect(pingsOf(receiver.received)).toEqual([`/ping/${PING_TOKEN}/start`, `/ping/${PING_TOKEN}/fail`]);
    const hooks2 = hooksOf(receiver.received);
    expect(hooks2).toHaveLength(2);
    expect(hooks2).toContainEqual(
      expect.stringMatching(
        /^query-sync sync \(warehouse\): events alpha still differs from the API in 1 window after the run's reconcile .*Fix: `query-sync verify --resources events --project alpha --from \S+ --to \S+ --repair`/,
      ),
    );
    expect(hooks2).toContainEqual(
      expect.stringMatching(
        /^query-sync sync \(warehouse\): schema change in events: new column model \(string\)\. Fix: /,
      ),
    );

    // 3. A sync that repairs the hour: a success moves the last success.
    receiver.received.length = 0;
    const third = await runCli(emu, args());
    expect(third.code, third.stdout + third.stderr).toBe(0);
    const success3 = await pushed('query_sync_last_success_timestamp_seconds');
    expect(success3).toBeGreaterThan(success1 ?? Number.POSITIVE_INFINITY);
    expect(await pushed('query_sync_reconcile_windows_repaired_total', { resource: 'events', project: 'alpha' })).toBe(
      1,
    );
    expect(pingsOf(receiver.received)).toEqual([`/ping/${PING_TOKEN}/start`, `/ping/${PING_TOKEN}`]);
    expect(hooksOf(receiver.received)).toEqual([]);

    // 4. A key the API refuses (exit 3), pinged by exit code: the outcome moves, the last success stays, in both.
    receiver.received.length = 0;
    const failed = await runCli({ url: emu.url, apiKey: 'qs_org_not_the_key' }, args('--ping-exit-code'));
    expect(failed.code, failed.stdout + failed.stderr).toBe(3);
    expect(await pushed('query_sync_last_run_outcome', { status: 'failed' })).toBe(1);
    expect(await pushed('query_sync_last_run_outcome', { status: 'ok' })).toBe(0);
    expect(await pushed('query_sync_last_run_exit_code')).toBe(3);
    expect(await pushed('query_sync_last_success_timestamp_seconds')).toBe(success3);
    const file4 = readFileSync(metricsFile, 'utf8');
    expect(promtoolCheckMetrics(file4)).toEqual({ code: 0, output: '' });
    expect(sampleValue(file4, 'query_sync_last_success_timestamp_seconds')).toBe(success3);
    expect(sampleValue(file4, 'query_sync_last_run_exit_code')).toBe(3);
    expect(pingsOf(receiver.received)).toEqual([`/ping/${PING_TOKEN}/start`, `/ping/${PING_TOKEN}/3`]);
    expect(receiver.received.at(-1)?.body).toMatch(/sync FAILED/);
    const hooks4 = hooksOf(receiver.received);
    expect(hooks4.sort()).toEqual([
      expect.stringMatching(/^query-sync sync \(warehouse\) FAILED: events alpha: E_AUTH: .*Fix: check the API key/),
      expect.stringMatching(/^query-sync sync \(warehouse\) FAILED: users alpha: E_AUTH: .*Fix: check the API key/),
    ]);

    // The tokens in the ping and webhook URLs are never logged: only their origin.
    for (const run of [first, second, third, failed]) {
      for (const token of [PING_TOKEN, HOOK_TOKEN, '/hook/', '/ping/'])
        expect(run.stderr + run.stdout).not.toContain(token);
    }
    expect(jsonLines(first.stderr).find((l) => String(l.msg).startsWith('monitoring:'))?.msg).toContain(receiver.url);
  });

  it('a Pushgateway, ping and webhook that are down, never answer or answer 500: same exit code, same data, at most the timeout', async () => {
    const emu = await emulator({ seed: 33, eventsPerProject: 60 });
    const never = await startReceiver('never');
    const failing = await startReceiver('500');
    const down = await downUrl();
    const d = dir();
    const timeoutMs = 1000;
    const run = (pushgateway: string, ping: string, notify: string) =>
      runCli(emu, [
        'sync',
        '--project',
        'alpha',
        '--resources',
        'events',
        '--duckdb-path',
        dbPathOf(d),
        '--state',
        statePathOf(d),
        '--log-format',
        'json',
        '--pushgateway',
        pushgateway,
        '--ping-url',
        `${ping}/ping/${PING_TOKEN}`,
        '--notify-url',
        `${notify}/hook/${HOOK_TOKEN}`,
        // Every stream is "stale" beyond a millisecond: a notification to send each run.
        '--notify-on',
        'stale',
        '--max-lag',
        '1ms',
        '--monitor-timeout',
        `${timeoutMs}ms`,
      ]);
    for (const [pushgateway, ping, notify] of [
      [never.url, failing.url, down],
      [failing.url, down, never.url],
    ] as const) {
      const r = await run(pushgateway, ping, notify);
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^sync ok in/m);
      expect((await readTable(d, 'events')).length).toBe(emu.snapshot('events', 'alpha').length);
      const logs = jsonLines(r.stderr);
      const warnings = logs.filter((l) => l.level === 40 && String(l.msg).startsWith('monitoring:')).map((l) => l.msg);
      // One warning per mechanism (the ping's start and end are one), each naming only an origin.
      expect(warnings).toEqual([
        expect.stringMatching(/Pushgateway|ping|notification/),
        expect.stringMatching(/Pushgateway|ping|notification/),
        expect.stringMatching(/Pushgateway|ping|notification/),
      ]);
      for (const what of ['Pushgateway', 'ping', 'notification'])
        expect(warnings.filter((w) => String(w).includes(what))).toHaveLength(1);
      const end = logs.find((l) => String(l.msg).startsWith("monitoring: the run's end published"));
      // The run's end waits for a dead endpoint no longer than the timeout (the timers' own delay aside).
      expect(Number(end?.pingMs)).toBeLessThan(timeoutMs + 500);
      expect(Number(end?.notifyMs)).toBeLessThan(timeoutMs + 500);
      expect(Number(end?.metricsMs)).toBeLessThan(timeoutMs + 1500); // and making the metrics
      for (const token of [PING_TOKEN, HOOK_TOKEN]) expect(r.stderr + r.stdout).not.toContain(token);
    }
    // The 500 endpoint was asked twice each time (one retry inside the timeout); the silent one once.
    expect(failing.received.filter((x) => x.url.includes('/ping/')).length).toBe(4); // start and end, each retried
    expect(never.received.length).toBeGreaterThan(0);
  });
});

/** The hour (5 to 40 hours ago: inside reconcile's recent range, closed, past lookback) with the most of these times. */
function busiestHour(times: readonly number[]): number {
  const now = Math.floor(Date.now() / HOUR) * HOUR;
  let best = now - 5 * HOUR;
  let most = -1;
  for (let h = now - 40 * HOUR; h <= now - 5 * HOUR; h += HOUR) {
    const n = times.filter((t) => t >= h && t < h + HOUR).length;
    if (n > most) [best, most] = [h, n];
  }
  return best;
}
