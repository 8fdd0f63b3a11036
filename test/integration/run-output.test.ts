import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { RunJson } from '../../src/reports/run-json.js';
import { resolveSyncConfig } from '../../src/config/index.js';
import { jsonLines, runCli } from '../fakes/cli.js';
import { dbPathOf, readTable, statePathOf, syncOnce } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

/** What a run prints: the real CLI against the emulator, stdout and stderr as pipes. */

const BAD_KEY = 'not-the-org-key-1234';

describe('run output (the real CLI against the emulator)', () => {
  it('a bad key: one 401 log line and one line counting the repeats, one error note in the summary, exit 3', async () => {
    const emu = await emulator({ seed: 3, eventsPerProject: 50 });
    const d = dir();
    const files = ['--duckdb-path', dbPathOf(d), '--state', statePathOf(d)];
    const run = await runCli({ url: emu.url, apiKey: BAD_KEY }, [
      'sync',
      '--project',
      '*',
      '--project-ids',
      'alpha,beta,default',
      ...files,
    ]);
    expect(run.code, run.stderr).toBe(3);
    const streams = 12; // events, users, conversations: one * walk each; traces, signals and signal groups: one per project
    const errors = jsonLines(run.stderr).filter((l) => (l.level as number) >= 50);
    expect(errors.map((l) => l.msg)).toEqual([
      expect.stringMatching(/the API key was rejected \(401\)/),
      expect.stringMatching(
        new RegExp(
          `^the same error came ${streams - 1} more times \\(.+ and 5 more\\): the API key was rejected \\(401\\)`,
        ),
      ),
    ]);
    expect(errors[1]?.repeated).toBe(streams - 1);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines.at(-1)).toMatch(/^sync FAILED in /);
    expect(lines.at(-2)).toMatch(/^\[E1\] AuthError in 12 streams: the API key was rejected \(401\)/);
    expect(lines.filter((l) => l.includes('FAILED: [E1] (below)'))).toHaveLength(streams);
    expect(run.stdout.match(/rejected \(401\)/g)).toHaveLength(1);
    expect(run.stdout + run.stderr).not.toContain(BAD_KEY);
  });

  it('sync --json: the run summary as one JSON object on stdout, exit code inside', async () => {
    const emu = await emulator({ seed: 4, eventsPerProject: 120 });
    const d = dir();
    const files = ['--duckdb-path', dbPathOf(d), '--state', statePathOf(d)];
    const ok = await runCli(emu, ['sync', '--project', '*', '--resources', 'events,users', '--json', ...files]);
    expect(ok.code, ok.stderr).toBe(0);
    const summary = JSON.parse(ok.stdout) as RunJson;
    expect(ok.stdout.trim().split('\n')).toHaveLength(1);
    expect(summary).toMatchObject({ command: 'sync', ok: true, exitCode: 0, errors: [] });
    expect(summary.streams.map((s) => `${s.resource} ${s.scope} ${s.outcome}`).sort()).toEqual([
      'events * ok',
      'users * ok',
    ]);
    const events = await readTable(d, 'events');
    expect(summary.streams.find((s) => s.resource === 'events')?.rows).toBe(events.length);
    expect(summary.totals?.rows).toBe(summary.streams.reduce((n, s) => n + s.rows, 0));
    expect(summary.totals?.requests).toBeGreaterThan(0);

    const bad = await runCli({ url: emu.url, apiKey: BAD_KEY }, [
      'sync',
      '--project',
      '*',
      '--resources',
      'events,users',
      '--json',
      ...files,
    ]);
    expect(bad.code).toBe(3);
    const failed = JSON.parse(bad.stdout) as RunJson;
    expect(failed).toMatchObject({ ok: false, exitCode: 3 });
    expect(failed.errors).toEqual([
      {
        code: 'E_AUTH',
        name: 'AuthError',
        message: expect.stringMatching(/^the API key was rejected \(401\)/),
        streams: ['events *', 'users *'],
      },
    ]);
    expect(bad.stdout).not.toContain(BAD_KEY);
  });

  it('stdout closed by its reader (| head): the run finishes, every row stored, exit 0, no stack trace', async () => {
    const emu = await emulator({ seed: 7, eventsPerProject: 40 });
    const d = dir();
    const run = await runCli(
      emu,
      ['sync', '--project', 'alpha', '--resources', 'events', '--duckdb-path', dbPathOf(d), '--state', statePathOf(d)],
      { closeStdout: true },
    );
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).not.toMatch(/EPIPE|Unhandled/);
    expect((await readTable(d, 'events')).length).toBe(
      emu.snapshot('events').filter((e) => e.project_id === 'alpha').length,
    );
  });
});

describe('privacy columns (config → pipeline → a real DuckDB file)', () => {
  it('excluded fields never reach the warehouse; hashed ones arrive as HMAC-SHA256 of the value; without a salt the CLI refuses with exit 2', async () => {
    const emu = await emulator({ seed: 6, eventsPerProject: 60 });
    const d = dir();
    const salt = 'salt-for-the-privacy-test';
    const config = resolveSyncConfig(
      {
        baseUrl: emu.url,
        apiKey: emu.apiKey,
        project: 'alpha',
        resources: 'events,traces',
        excludeColumns: 'events.user_input,traces.input',
        hashColumns: 'events.user_id,traces.output',
      },
      { QUERY_SYNC_HASH_SALT: salt },
    );
    const summary = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      project: 'alpha',
      resources: config.resources,
    });
    expect(summary.ok).toBe(true);
    const hash = (v: string): string => createHmac('sha256', salt).update(v).digest('hex');
    const source = new Map(
      emu
        .snapshot('events')
        .filter((e) => e.project_id === 'alpha')
        .map((e) => [String(e.id), e]),
    );
    const rows = await readTable(d, 'events');
    expect(rows.length).toBe(source.size);
    for (const row of rows) {
      expect(row).not.toHaveProperty('user_input');
      const original = source.get(String(row.id));
      expect(row.user_id).toBe(typeof original?.user_id === 'string' ? hash(original.user_id) : null);
    }
    const spans = await readTable(d, 'traces');
    expect(spans.length).toBeGreaterThan(0);
    expect(spans.every((s) => !('input' in s) && (s.output === null || /^[0-9a-f]{64}$/.test(String(s.output))))).toBe(
      true,
    );
    const texts = new Set(emu.snapshot('events').map((e) => String(e.user_input)));
    expect(JSON.stringify(rows, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))).not.toMatch(
      new RegExp(
        [...texts]
          .slice(0, 5)
          .map((t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
          .join('|'),
      ),
    );

    const refused = await runCli(emu, [
      'sync',
      '--hash-columns',
      'events.user_id',
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
    ]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--hash-columns needs a salt: set QUERY_SYNC_HASH_SALT/);
  });
});
