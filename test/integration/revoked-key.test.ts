import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { AuthError } from '../../src/core/errors.js';
import { silentLogger } from '../../src/core/log.js';
import { DEFAULT_RATE_LIMITS } from '../../src/http/scheduler/budget.js';
import { ApiClient, newCallStats } from '../../src/http/client.js';
import { createScheduler } from '../../src/http/scheduler/scheduler.js';
import { DEFAULT_MAX_IN_FLIGHT } from '../../src/http/scheduler/options.js';
import { jsonLines, runCli } from '../fakes/cli.js';
import { dbPathOf, readTable, statePathOf } from '../fakes/harness.js';
import { dir, emulator, onCleanup } from '../fakes/lifecycle.js';

/**
 * A key revoked mid-run (issue 31, item 5): the emulator answers 401 once it has admitted a number
 * of requests, and counts what arrives after its first 401. The run must stop at once: only the
 * requests already in flight (at most the scheduler's `maxInFlight`) may still arrive.
 */
describe('a key revoked mid-run (the real CLI against the emulator)', () => {
  it('no new request leaves after the first 401; one clear line; exit 3; the runs row agrees', async () => {
    // Per-event traces on the real shape: hundreds of requests queued and up to 32 in flight when the key goes.
    const emu = await emulator({
      flavor: 'real',
      seed: 31,
      projects: ['default'],
      eventsPerProject: 200,
      enrichAfterMs: 0,
      latencyMs: 20,
      revokeKeyAfter: 40,
    });
    const d = dir();
    const run = await runCli(emu, [
      'sync',
      '--resources',
      'events,traces',
      '--max-rps',
      '1000',
      '--max-rpm',
      '100000',
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
    ]);
    const stats = emu.stats();
    expect(run.code, run.stdout + run.stderr).toBe(3);
    // The key went mid-run: per-event reads had started.
    expect(stats.byEndpoint['/v1/traces'] ?? 0).toBeGreaterThan(0);
    expect(stats.unauthorized).toBeGreaterThan(0);
    // What arrives once the first 401 is answered was already in flight (sent before the client read
    // it): at most the scheduler's concurrency (before the fix: 20 here, and the reconcile's after the walk).
    expect(stats.afterUnauthorized).toBeLessThanOrEqual(DEFAULT_MAX_IN_FLIGHT);
    expect(stats.unauthorized).toBeLessThanOrEqual(DEFAULT_MAX_IN_FLIGHT);
    // One error line for the 401 (the repeats counted in one more), one note in the summary; no
    // reconcile after it (it would only be refused).
    const errors = jsonLines(run.stderr).filter((l) => (l.level as number) >= 50);
    expect(errors.filter((l) => /rejected \(401\)/.test(String(l.msg))).length).toBeLessThanOrEqual(2);
    expect(run.stdout.match(/rejected \(401\)/g)).toHaveLength(1);
    expect(run.stdout).not.toMatch(/reconcile/);
    // The run's row: its outcome and exit code, and every request the server counted.
    const [row] = await readTable(d, '_query_sync_runs');
    expect(row).toMatchObject({ outcome: 'failed', exit_code: 3n, requests: BigInt(stats.requests) });
  });

  it('the client: once the first 401 is read, every request waiting for the budget is refused unsent', async () => {
    // Every request is refused; 4 a second leave, so of 40 asked at once 36 wait for the budget.
    const emu = await emulator({ seed: 31, projects: ['default'], eventsPerProject: 1, revokeKeyAfter: 0 });
    const budget = createScheduler({ limits: { ...DEFAULT_RATE_LIMITS, maxRps: 4 } });
    const client = new ApiClient({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      projectHeader: emu.projectHeader,
      budget,
      clock: systemClock,
      logger: silentLogger(),
    });
    onCleanup(() => client.close());
    const asked = Array.from({ length: 40 }, (_, i) =>
      client
        .getJson(
          { endpoint: '/v1/events', path: '/v1/events', query: { limit: '1' }, project: undefined },
          { resource: 'events', project: `p${i}`, lane: `events|p${i}`, stats: newCallStats() },
        )
        .then(
          () => 'answered',
          (error: unknown) => (error instanceof AuthError && error.status === 401 ? '401' : String(error)),
        ),
    );
    expect(new Set(await Promise.all(asked))).toEqual(new Set(['401']));
    const stats = emu.stats();
    // Only the first second's requests left (before the fix: all 40, over ten seconds).
    expect(stats.requests).toBeLessThanOrEqual(4);
    expect(stats.afterUnauthorized).toBeLessThanOrEqual(3);
    expect(client.requestsSent).toBe(stats.requests);
    expect(client.keyRejected).toMatch(/the API key was rejected \(401\)/);
  });
});
