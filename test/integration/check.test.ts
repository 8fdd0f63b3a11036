import { describe, expect, it } from 'vitest';
import type { CheckReport } from '../../src/reports/check.js';
import { runCli } from '../fakes/cli.js';
import { statePathOf } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

/** `query-sync check`: the real CLI against the emulator. */
describe('check (the real CLI against the emulator)', () => {
  it('with "*": the key, the endpoints that take "*", one request per project for the others, the shape learned', async () => {
    const emu = await emulator({ seed: 5, eventsPerProject: 30 });
    const state = ['--state', statePathOf(dir())];
    const run = await runCli(emu, ['check', '--project', '*', ...state]);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines).toContain('key: accepted');
    expect(lines).toContain(
      'accept "*": /v1/events, /v1/users, /v1/conversations; refuse "*" (read one project at a time): /v1/traces, /v1/signals, /v1/signal-groups',
    );
    expect(lines).toContain('projects: alpha, beta, default');
    expect(lines.find((l) => l.startsWith('/v1/events ') && l.includes(' * '))).toMatch(
      /ok {2}90 records; .*timestamp:timestamp/,
    );
    expect(lines.find((l) => l.startsWith('/v1/events/count'))).toMatch(/ok {2}total 90$/);
    for (const p of ['alpha', 'beta', 'default']) {
      expect(lines.find((l) => l.startsWith('/v1/traces') && l.includes(` ${p} `))).toMatch(/ok .*start_time_ns:int64/);
    }
    // 6 `*` reads, 1 count, 3 × 3 per-project reads (traces, signals, signal groups): one request each (the emulator counts them);
    // then what the server offers: the timeseries at its 5 intervals, facets and search (7).
    expect(lines).toContain('  yes GET /v1/events/timeseries interval=month');
    expect(lines).toContain('  yes GET /v1/events/facets');
    expect(lines.at(-1)).toBe('check ok (23 requests)');
    expect(emu.stats().requests).toBe(23);
  });

  it('a bad key: exit 3 after one request; a refused project: exit 3 naming it; --json for scripts', async () => {
    const emu = await emulator({ seed: 5, eventsPerProject: 10 });
    const state = ['--state', statePathOf(dir())];
    const bad = await runCli({ url: emu.url, apiKey: 'not-the-key-4321' }, ['check', '--project', '*', ...state]);
    expect(bad.code).toBe(3);
    expect(bad.stdout).toMatch(/^key: REJECTED \(401\)/m);
    expect(bad.stdout.trimEnd().split('\n').at(-1)).toBe('check FAILED (1 request)');
    expect(bad.stdout).not.toContain('not-the-key-4321');

    const refused = await runCli(emu, ['check', '--project', 'nosuch', '--resources', 'signals', ...state]);
    expect(refused.code).toBe(3);
    expect(refused.stdout).toMatch(/^\/v1\/signals +nosuch +PROJECT REFUSED: .*project "nosuch" was refused \(403\)/m);

    const json = await runCli(emu, ['check', '--project', 'alpha', '--resources', 'events,traces', '--json', ...state]);
    expect(json.code).toBe(0);
    const report = JSON.parse(json.stdout) as CheckReport & { exitCode: number };
    // 3, and 7 for what the server offers (the timeseries at 5 intervals, facets, search).
    expect(report).toMatchObject({ ok: true, exitCode: 0, keyAccepted: true, requests: 10 });
    expect(report.results.map((r) => `${r.endpoint} ${r.scope} ${r.outcome}`)).toEqual([
      '/v1/events alpha ok',
      '/v1/events/count alpha ok',
      '/v1/traces alpha ok',
    ]);
    expect(report.results[0]?.fields).toMatchObject({ id: 'string', timestamp: 'timestamp' });
  });

  it('--search and --aggregates: each search, the timeseries and the facets endpoint asked once, in the first known project under "*"', async () => {
    const emu = await emulator({ seed: 5, eventsPerProject: 300 });
    const state = ['--state', statePathOf(dir())];
    const run = await runCli(emu, [
      'check',
      '--project',
      '*',
      '--resources',
      'events',
      '--search',
      'err=error',
      '--search',
      'slow=timeout,mode=regex',
      '--aggregates',
      ...state,
    ]);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines.find((l) => l.startsWith('/v1/events/search') && l.includes(' err@alpha '))).toMatch(
      /ok {2}\d+ records?; .*relevance_score:float64/,
    );
    expect(lines.find((l) => l.startsWith('/v1/events/search') && l.includes(' slow@alpha '))).toMatch(/ok /);
    expect(lines.find((l) => l.startsWith('/v1/events/timeseries'))).toMatch(/alpha +ok {2}total \d+$/);
    expect(lines.find((l) => l.startsWith('/v1/events/facets'))).toMatch(
      /alpha +ok {2}\d+ records?; 2 fields value:string count:int64$/,
    );
    // 1 `*` read, 1 count, 2 searches, 1 timeseries, 1 facets; 7 for what the server offers.
    expect(lines.at(-1)).toBe('check ok (13 requests)');
    expect(emu.stats().requests).toBe(13);
  });

  it('--search under "*" with no project known: says so (exit 1) instead of guessing one', async () => {
    const emu = await emulator({ seed: 6, eventsPerProject: 0 });
    const run = await runCli(emu, [
      'check',
      '--project',
      '*',
      '--resources',
      'events',
      '--search',
      'err=error',
      '--state',
      statePathOf(dir()),
    ]);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(
      /^\/v1\/events\/search +\* +FAILED: \/v1\/events\/search is read one project at a time and no project slug is known .*--project-ids/m,
    );
  });

  it('lists what a server that differs offers (no signal groups, no month interval, no facets): exit 0, with what sync recorded', async () => {
    const emu = await emulator({
      seed: 7,
      eventsPerProject: 30,
      lacks: ['signal-groups', 'facets'],
      timeseriesIntervals: ['minute', 'hour', 'day', 'week'],
    });
    const run = await runCli(emu, ['check', '--state', statePathOf(dir())]);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines.find((l) => l.startsWith('/v1/signal-groups'))).toMatch(
      /not offered: this server does not offer \/v1\/signal-groups \(sync skips signal_groups\)/,
    );
    expect(lines).toContain('  yes GET /v1/events/timeseries');
    expect(lines).toContain('  yes GET /v1/events/timeseries interval=week');
    expect(lines.find((l) => l.includes('interval=month'))).toMatch(
      /^ {2}NO {2}GET \/v1\/events\/timeseries interval=month: HTTP 400/,
    );
    expect(lines.find((l) => l.includes('GET /v1/events/facets'))).toMatch(
      /^ {2}NO {2}GET \/v1\/events\/facets: HTTP 404/,
    );
    expect(lines).toContain('  yes GET /v1/events/search');
  });
});
