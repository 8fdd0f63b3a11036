import { describe, expect, it } from 'vitest';
import type { RunJson } from '../../src/commands/sync.js';
import { jsonLines, runCli } from '../fakes/cli.js';
import { dbPathOf, readTable, statePathOf } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

/** What a run prints: the real CLI against the emulator, stdout and stderr as pipes. */

const BAD_KEY = 'not-the-org-key-1234';

describe('run output (the real CLI against the emulator)', () => {
  it('a bad key: one 401 log line and one line counting the repeats, one error note in the summary, exit 3', async () => {
    const emu = await emulator({ seed: 3, eventsPerProject: 50 });
    const d = dir();
    const files = ['--duckdb-path', dbPathOf(d), '--state', statePathOf(d)];
    const run = await runCli(emu, ['sync', '--project', '*', '--project-ids', 'alpha,beta,default', '--api-key', BAD_KEY, ...files]);
    expect(run.code, run.stderr).toBe(3);
    const streams = 9; // events, users, conversations: one * walk each; traces and signals: one per project
    const errors = jsonLines(run.stderr).filter((l) => (l.level as number) >= 50);
    expect(errors.map((l) => l.msg)).toEqual([
      expect.stringMatching(/the API key was rejected \(401\)/),
      expect.stringMatching(new RegExp(`^the same error came ${streams - 1} more times \\(.+ and 2 more\\): the API key was rejected \\(401\\)`)),
    ]);
    expect(errors[1]?.repeated).toBe(streams - 1);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines.at(-1)).toMatch(/^sync FAILED in /);
    expect(lines.at(-2)).toMatch(/^\[E1\] AuthError in 9 streams: the API key was rejected \(401\)/);
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
    expect(summary.streams.map((s) => `${s.resource} ${s.scope} ${s.outcome}`).sort()).toEqual(['events * ok', 'users * ok']);
    const events = await readTable(d, 'events');
    expect(summary.streams.find((s) => s.resource === 'events')?.rows).toBe(events.length);
    expect(summary.totals?.rows).toBe(summary.streams.reduce((n, s) => n + s.rows, 0));
    expect(summary.totals?.requests).toBeGreaterThan(0);

    const bad = await runCli(emu, ['sync', '--project', '*', '--resources', 'events,users', '--json', '--api-key', BAD_KEY, ...files]);
    expect(bad.code).toBe(3);
    const failed = JSON.parse(bad.stdout) as RunJson;
    expect(failed).toMatchObject({ ok: false, exitCode: 3 });
    expect(failed.errors).toEqual([
      { code: 'E_AUTH', name: 'AuthError', message: expect.stringMatching(/^the API key was rejected \(401\)/), streams: ['events *', 'users *'] },
    ]);
    expect(bad.stdout).not.toContain(BAD_KEY);
  });
});
