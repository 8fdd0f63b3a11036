import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { events } from '../../../connectors/events.js';
import { resolveSyncConfig } from '../../../src/config/index.js';
import { systemClock } from '../../../src/core/clock.js';
import { silentLogger } from '../../../src/core/log.js';
import { DEFAULT_RATE_LIMITS, type RequestBudget } from '../../../src/http/scheduler/budget.js';
import { newCallStats } from '../../../src/http/client.js';
import { startRunMonitor } from '../../../src/monitor/monitor.js';
import { ConfigError } from '../../../src/core/errors.js';
import type { RunFigures } from '../../../src/monitor/figures.js';
import { METRICS } from '../../../src/monitor/metric-list.js';
import { lastSuccessIn, metricsText } from '../../../src/monitor/metrics.js';
import { notifications } from '../../../src/monitor/notify.js';
import { pingUrl } from '../../../src/monitor/ping.js';
import { groupUrl } from '../../../src/monitor/pushgateway.js';
import { MonitorHttp } from '../../../src/monitor/send.js';
import { dir } from '../../fakes/lifecycle.js';
import { downUrl, promtoolCheckMetrics, sampleValue, startReceiver } from '../../fakes/monitoring.js';

const ENV = { QUERY_API_BASE_URL: 'https://query.example.com', QUERY_API_KEY: 'k' };
const T0 = Date.parse('2026-11-28T12:00:00Z');

const figures = (more: Partial<RunFigures> = {}): RunFigures => ({
  command: 'sync',
  version: '0.1.0',
  nowMs: T0 + 60_000,
  startedMs: T0,
  endedMs: T0 + 60_000,
  status: 'ok',
  exitCode: 0,
  lastSuccessMs: T0 + 60_000,
  streams: [
    {
      resource: 'events',
      project: 'alpha',
      ok: true,
      rows: 120,
      pages: 3,
      requests: 4,
      retries: 1,
      rateLimited: 1,
      budgetWaitMs: 1500,
      backoffMs: 200,
    },
  ],
  endpoints: [{ endpoint: '/v1/events', requests: 4, rateLimited: 1, budgetWaitMs: 1500, allowedPerMinute: 300 }],
  marks: [{ resource: 'events', project: 'alpha', markMs: T0 - 3 * 3_600_000 }],
  backlogs: [{ resource: 'traces', events: 4000, etaSeconds: 600, dailyDeficit: 0 }],
  reconcile: [
    {
      resource: 'events',
      project: 'alpha',
      checked: 2,
      differing: 2,
      repaired: 1,
      stillDiffering: 1,
      windows: [{ from: '2026-11-28T05:00:00.000Z', to: '2026-11-28T06:00:00.000Z' }],
    },
  ],
  schemaChanges: [
    { table: 'events', column: 'model', type: 'string', change: 'new column' },
    { table: 'events', column: 'score__v_string', type: 'string', change: 'variant column' },
    { table: 'users', column: 'id', type: 'string', change: 'new table' },
  ],
  publishedAsOfMs: T0,
  streamErrors: {},
  ...more,
});

describe('the metrics', () => {
  it("are named by Prometheus' conventions, with bounded labels", () => {
    for (const m of METRICS) {
      expect(m.name).toMatch(/^query_sync_[a-z_]+$/);
      if (m.type === 'counter') expect(m.name, m.name).toMatch(/_total$/);
      else expect(m.name, m.name).not.toMatch(/_total$/);
      if (/timestamp|duration|lag|eta|wait|backoff/.test(m.name)) expect(m.name).toMatch(/_seconds(_total)?$/);
      for (const l of m.labels) expect(['resource', 'project', 'endpoint', 'status', 'version']).toContain(l);
    }
    expect(new Set(METRICS.map((m) => m.name)).size).toBe(METRICS.length);
  });

  it('render as promtool accepts them, and the last success reads back from the text', async () => {
    const text = await metricsText(figures());
    expect(promtoolCheckMetrics(text)).toEqual({ code: 0, output: '' });
    expect(sampleValue(text, 'query_sync_rows_total', { resource: 'events', project: 'alpha' })).toBe(120);
    expect(sampleValue(text, 'query_sync_budget_wait_seconds_total', { resource: 'events' })).toBe(1.5);
    expect(sampleValue(text, 'query_sync_stream_lag_seconds', { resource: 'events' })).toBe(3 * 3600 + 60);
    expect(sampleValue(text, 'query_sync_schema_changes_total', { resource: 'events' })).toBe(2);
    expect(sampleValue(text, 'query_sync_last_run_outcome', { status: 'ok' })).toBe(1);
    expect(sampleValue(text, 'query_sync_last_run_outcome', { status: 'failed' })).toBe(0);
    expect(lastSuccessIn(text)).toBe(T0 + 60_000);
    // A run that goes on has no end, no exit code; an unknown last success is left out, not 0.
    const running = await metricsText(
      figures({ status: 'running', endedMs: undefined, exitCode: undefined, lastSuccessMs: undefined }),
    );
    for (const name of [
      'query_sync_last_run_end_timestamp_seconds',
      'query_sync_last_run_exit_code',
      'query_sync_last_success_timestamp_seconds',
    ])
      expect(running).not.toContain(`\n${name} `);
    expect(sampleValue(running, 'query_sync_last_run_outcome', { status: 'running' })).toBe(1);
  });
});

describe('pings and the Pushgateway group', () => {
  it('healthchecks.io URLs: /start, success, /fail or /<code>, a query kept after the suffix', () => {
    const base = 'https://hc-ping.com/KEY/my-sync?create=1';
    expect(pingUrl(base, { start: true }, false, 'r1')).toBe('https://hc-ping.com/KEY/my-sync/start?create=1&rid=r1');
    expect(pingUrl(base, { exitCode: 0 }, false, 'r1')).toBe('https://hc-ping.com/KEY/my-sync?create=1&rid=r1');
    expect(pingUrl(base, { exitCode: 5 }, false, 'r1')).toBe('https://hc-ping.com/KEY/my-sync/fail?create=1&rid=r1');
    expect(pingUrl('https://hc-ping.com/uuid', { exitCode: 0 }, true, 'r')).toBe('https://hc-ping.com/uuid/0?rid=r');
    expect(pingUrl('https://hc-ping.com/uuid/', { exitCode: 143 }, true, 'r')).toBe(
      'https://hc-ping.com/uuid/143?rid=r',
    );
  });

  it('a label value with a slash goes base64url-encoded', () => {
    expect(groupUrl({ url: 'http://pg:9091', job: 'query-sync', instance: 'prod.warehouse' })).toBe(
      'http://pg:9091/metrics/job/query-sync/instance/prod.warehouse',
    );
    expect(groupUrl({ url: 'http://pg:9091', job: 'query-sync', instance: 'a/b' })).toBe(
      `http://pg:9091/metrics/job/query-sync/instance@base64/${Buffer.from('a/b').toString('base64url')}`,
    );
  });
});

describe('notifications', () => {
  const ctx = { command: 'sync', name: 'warehouse', on: ['failure', 'difference', 'schema-change', 'stale'] as const };

  it('one per kind and stream, naming the resource, project and the fixing command; a new table is none', () => {
    const list = notifications(
      figures({
        status: 'failed',
        streamErrors: { 'users alpha': { code: 'E_RETRIES_EXHAUSTED', message: 'gave up after 8 attempts' } },
      }),
      { ...ctx, maxLagMs: 3_600_000 },
    );
    expect(list.map((n) => `${n.kind} ${n.resource} ${n.project}`)).toEqual([
      'failure users alpha',
      'difference events alpha',
      'schema-change events all',
      'stale events alpha',
    ]);
    expect(list[0]?.text).toBe(
      'query-sync sync (warehouse) FAILED: users alpha: E_RETRIES_EXHAUSTED: gave up after 8 attempts. Fix: run it again (it resumes where it stopped): `query-sync sync --resources users --project alpha`',
    );
    expect(list[1]?.text).toContain(
      '`query-sync verify --resources events --project alpha --from 2026-11-28T05:00:00.000Z --to 2026-11-28T06:00:00.000Z --repair`',
    );
    expect(list[2]?.text).toContain('new column model (string), variant column score__v_string (string)');
    expect(list[3]?.text).toMatch(
      /STALE events alpha: stored up to .*, lag 3 h 1 min > --max-lag 1 h .*: run query-sync sync --resources events/,
    );
  });

  it('only the kinds asked for; stale only with --max-lag, and only after a sync', () => {
    expect(notifications(figures(), { ...ctx, on: ['failure'] })).toEqual([]);
    const stopped = figures({
      status: 'stopped',
      streamErrors: { 'events alpha': { code: 'E_STOPPED', message: 'stopped by --max-run-time' } },
    });
    expect(notifications(stopped, { ...ctx, on: ['failure'] })).toEqual([]);
    expect(notifications(figures(), { ...ctx, on: ['stale'] })).toEqual([]);
    expect(notifications(figures(), { ...ctx, command: 'backfill', on: ['stale'], maxLagMs: 1 })).toEqual([]);
    const runFailed = notifications(
      figures({ status: 'failed', runError: { code: 'E_WAREHOUSE_BUSY', message: 'held by another run' } }),
      ctx,
    ).filter((n) => n.kind === 'failure');
    expect(runFailed.map((n) => n.text)).toEqual([
      expect.stringMatching(
        /FAILED before its streams: E_WAREHOUSE_BUSY: held by another run\. Fix: another run holds/,
      ),
    ]);
  });
});

describe('monitoring HTTP: bounded, one retry, never throws, only the origin in its messages', () => {
  it('a silent endpoint costs the timeout and no more; a 500 is tried twice; a closed port fails fast', async () => {
    // Timeouts far above what a loaded machine adds to a local answer, so only the endpoint decides.
    const http = new MonitorHttp(1000);
    try {
      const never = await startReceiver('never');
      const silent = await http.send({ method: 'POST', url: `${never.url}/ping/secret-uuid`, body: 'x' });
      expect(silent.ok).toBe(false);
      // Not retried: a second try would take another second.
      expect(silent.ms).toBeLessThan(1000 + 900);
      expect(silent.problem).toBe(`${never.url} did not answer within 1000 ms`);
      expect(never.received).toHaveLength(1);

      const failing = await startReceiver('500');
      const five = await http.send({ method: 'POST', url: `${failing.url}/hook/T0/B0/secret`, body: '{}' });
      expect(five).toMatchObject({ ok: false, status: 500, problem: `${failing.url} answered HTTP 500` });
      expect(failing.received.map((r) => r.url)).toEqual(['/hook/T0/B0/secret', '/hook/T0/B0/secret']);

      const down = await downUrl();
      const refused = await http.send({ method: 'PUT', url: `${down}/metrics/job/x`, body: '' });
      expect(refused.ok).toBe(false);
      expect(refused.problem?.startsWith(`${down}:`)).toBe(true);
      expect(refused.problem).not.toContain('/metrics/job');

      const ok = await startReceiver('ok');
      expect(await http.send({ method: 'GET', url: `${ok.url}/x`, readBody: true })).toMatchObject({
        ok: true,
        status: 200,
        text: 'OK',
      });
    } finally {
      await http.close();
    }
  });
});

describe('the monitoring settings', () => {
  it('absent unless a mechanism is asked for; the instance defaults to the warehouse name; env and config file as every option', () => {
    expect(resolveSyncConfig({}, ENV).monitor).toBeUndefined();
    const c = resolveSyncConfig(
      { duckdbPath: '/data/prod.duckdb', pushgateway: 'http://pg:9091/', pingUrl: 'https://hc-ping.com/u' },
      ENV,
    ).monitor;
    expect(c).toEqual({
      name: 'prod',
      pushgateway: { url: 'http://pg:9091', job: 'query-sync', instance: 'prod' },
      ping: { url: 'https://hc-ping.com/u', exitCode: false },
      timeoutMs: 5000,
    });
    const fromEnv = resolveSyncConfig(
      {},
      {
        ...ENV,
        QUERY_SYNC_NOTIFY_URL: 'https://hooks.slack.com/services/T/B/X',
        QUERY_SYNC_NOTIFY_ON: 'failure,schema-change',
        QUERY_SYNC_MONITOR_TIMEOUT: '2s',
      },
    ).monitor;
    expect(fromEnv?.notify).toEqual({
      url: 'https://hooks.slack.com/services/T/B/X',
      on: ['failure', 'schema-change'],
    });
    expect(fromEnv?.timeoutMs).toBe(2000);
    const d = dir();
    const file = join(d, 'q.yaml');
    writeFileSync(file, 'metrics-file: metrics/q.prom\nmax-lag: 2h\nnotify-url: https://example.com/hook\n');
    const fromFile = resolveSyncConfig({ config: file }, ENV).monitor;
    expect(fromFile).toMatchObject({ metricsFile: join(d, 'metrics/q.prom'), maxLagMs: 7_200_000 });
    expect(fromFile?.notify?.on).toEqual(['failure', 'difference', 'stale']);
  });

  it('refuses a URL that is not http(s) without repeating it, and an unknown --notify-on', () => {
    expect(() => resolveSyncConfig({ notifyUrl: 'hooks.slack.com/T/B/secret' }, ENV)).toThrow(ConfigError);
    try {
      resolveSyncConfig({ notifyUrl: 'hooks.slack.com/T/B/secret' }, ENV);
    } catch (error) {
      expect((error as Error).message).not.toContain('secret');
    }
    expect(() => resolveSyncConfig({ pingUrl: 'ftp://x/y' }, ENV)).toThrow(/expected http or https/);
    expect(() => resolveSyncConfig({ notifyUrl: 'https://x/y', notifyOn: 'failure,oops' }, ENV)).toThrow(
      /--notify-on: expected a comma-separated list of failure, difference, schema-change, stale, got "oops"/,
    );
  });
});

describe('a run monitor', () => {
  it('publishes at every --publish-every while the run goes on (running, rows so far), and the end over it', async () => {
    const d = dir();
    const metricsFile = join(d, 'q.prom');
    const budget: RequestBudget = {
      schedule: (_e, task) => task(() => undefined),
      onRateLimited: () => undefined,
      stats: () => ({
        requests: 3,
        rateLimited: 1,
        maxPerSecond: 1,
        endpoints: { '/v1/events': { requests: 3, rateLimited: 1, waitedMs: 2000, currentRpm: 240 } },
      }),
    };
    const monitor = startRunMonitor({
      command: 'sync',
      runId: 'r1',
      settings: { name: 'w', metricsFile, timeoutMs: 1000 },
      everyMs: 20,
      resources: [events],
      limits: DEFAULT_RATE_LIMITS,
      secrets: [],
      clock: systemClock,
      logger: silentLogger(),
    });
    const mark = new Date(Date.now() - 60_000).toISOString();
    monitor.attach({
      state: { document: { version: 1, streams: { 'events:alpha': { mark } }, projects: [], sections: {} } },
      budget,
    });
    const hooks = monitor.observe({});
    hooks.onPage?.('events', 'alpha', { records: 50, rowsStored: 50 });
    hooks.onPage?.('events', 'alpha', { records: 20, rowsStored: 20 });
    await vi.waitFor(() => expect(existsSync(metricsFile)).toBe(true), { timeout: 10_000 });
    const during = readFileSync(metricsFile, 'utf8');
    expect(sampleValue(during, 'query_sync_last_run_outcome', { status: 'running' })).toBe(1);
    expect(sampleValue(during, 'query_sync_rows_total', { resource: 'events', project: 'alpha' })).toBe(70);
    expect(sampleValue(during, 'query_sync_endpoint_rate_limited_total', { endpoint: '/v1/events' })).toBe(1);
    expect(sampleValue(during, 'query_sync_endpoint_allowed_requests_per_second', { endpoint: '/v1/events' })).toBe(4);
    expect(sampleValue(during, 'query_sync_stream_mark_timestamp_seconds', { resource: 'events' })).toBe(
      Date.parse(mark) / 1000,
    );
    expect(during).not.toMatch(/^query_sync_last_run_exit_code /m);

    // The stream ends: its result replaces what was counted page by page.
    hooks.onStreamDone?.({
      resource: 'events',
      scope: 'alpha',
      outcome: 'ok',
      rows: 70,
      pages: 2,
      windows: 1,
      stats: { ...newCallStats(), requests: 3, retries: 1 },
      seconds: 1,
    });
    await monitor.finish({ code: 0, output: ['sync ok in 1.0 s'] });
    const end = readFileSync(metricsFile, 'utf8');
    expect(promtoolCheckMetrics(end)).toEqual({ code: 0, output: '' });
    expect(sampleValue(end, 'query_sync_last_run_outcome', { status: 'ok' })).toBe(1);
    expect(sampleValue(end, 'query_sync_rows_total', { resource: 'events', project: 'alpha' })).toBe(70);
    expect(sampleValue(end, 'query_sync_retries_total', { resource: 'events', project: 'alpha' })).toBe(1);
    expect(sampleValue(end, 'query_sync_last_success_timestamp_seconds')).toBe(
      sampleValue(end, 'query_sync_last_run_end_timestamp_seconds'),
    );
  });
});
