import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { systemClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/log.js';
import { PIPELINE_DEFAULTS } from '../../src/config/index.js';
import { DEFAULT_RATE_LIMITS, type RequestBudget } from '../../src/http/scheduler/budget.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { connectApi } from '../../src/run/runtime.js';
import { StateStore } from '../../src/state/store.js';
import { openSyncRun } from '../../src/sync/context.js';
import { runSync } from '../../src/sync/engine.js';
import { dir, emulator, onCleanup } from '../fakes/lifecycle.js';

/**
 * The walks of a split tell the budget how many pages each has left (`ScheduleOptions.left`), so the
 * scheduler serves the longest first and they end together (`scheduler.test.ts` has the order).
 * Here: the wiring, in a real first sync against the emulator.
 */
describe('a split walk says what it has left', () => {
  it('every page of a planned sub-window carries the pages its walk has left, from about its share down to none', async () => {
    const emu = await emulator({ seed: 7, projects: ['default'], eventsPerProject: 4_000, latencyMs: 20 });
    const d = dir();
    const asked: { lane: string | undefined; left: number | undefined }[] = [];
    const observe = (scheduler: RequestBudget): RequestBudget => ({
      schedule: (endpoint, task, options) => {
        if (endpoint === '/v1/events') asked.push({ lane: options?.lane, left: options?.left });
        return scheduler.schedule(endpoint, task, options);
      },
      stats: () => scheduler.stats(),
      onRateLimited: (endpoint, retryAfterMs) => scheduler.onRateLimited(endpoint, retryAfterMs),
    });
    const { client } = connectApi({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      projectHeader: 'X-Service-Project-Id',
      limits: DEFAULT_RATE_LIMITS,
      observe,
      clock: systemClock,
      logger: silentLogger(),
    });
    onCleanup(() => client.close());
    const destination = await DuckDbDestination.open(join(d, 'w.duckdb'));
    onCleanup(() => destination.close());
    const state = await StateStore.open(join(d, 'state.json'), { clock: systemClock, purpose: 'sync' });
    onCleanup(() => state.close());
    const summary = await runSync(
      { resources: [events], project: 'default' },
      openSyncRun(
        { client, destination, state, clock: systemClock, logger: silentLogger() },
        { ...PIPELINE_DEFAULTS.sync, lookbackMs: 15 * 60_000, concurrency: 4, limits: DEFAULT_RATE_LIMITS },
      ),
    );
    expect(summary.ok).toBe(true);
    expect(await destination.count('events')).toBe(emu.snapshot('events', 'default').length);
    // 40 pages in 4 sub-windows of about 10 (the per-second budget is far from binding at 20 ms:
    // as many parts as allowed), each page saying what its walk has left: about 10 down to none.
    const known = asked.filter((a) => a.left !== undefined).map((a) => a.left as number);
    expect(known.length, 'every page of the split said what its walk had left').toBe(asked.length);
    expect(known.length).toBeGreaterThanOrEqual(40);
    for (const left of known) {
      expect(left).toBeGreaterThanOrEqual(0);
      expect(
        left,
        'never the span of the first part (from 1970) at the density of its first pages',
      ).toBeLessThanOrEqual(15);
    }
    expect(Math.max(...known)).toBeGreaterThanOrEqual(8);
    expect(Math.min(...known)).toBeLessThan(1);
    expect(asked.every((a) => a.lane === 'events|default')).toBe(true);
  });
});
