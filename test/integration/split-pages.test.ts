import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { systemClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/log.js';
import { ApiClient, newCallStats } from '../../src/http/client.js';
import { createScheduler } from '../../src/http/scheduler/scheduler.js';
import { planSplit } from '../../src/sync/split/plan.js';
import { emulator, onCleanup } from '../fakes/lifecycle.js';
import { DEFAULT_RATE_LIMITS } from '../../src/http/scheduler/budget.js';

/**
 * A split of a walk that is a whole number of pages costs no page more than one walk: 40,000 events
 * are 400 pages, a minute's budget of `/v1/events`; page 401 would cost a second minute window. The
 * emulator's hour buckets (~55 events each) rarely end on a whole page, so the cuts need the finer
 * timeseries `planSplit` asks around them.
 */
/**
 * The emulator places its events relative to its clock at start, so with `Date.now()` the minute
 * edges fell differently each run and the split differed too. This start is one where the cuts
 * once missed whole pages in 1 run in 3: around 22,500 records every multiple of 100 within
 * ± 1/8 of a sub-window (an eighth of 2,500) was hidden inside a minute (records sharing a
 * minute or a timestamp), so 16 parts read page 401; whole pages lay a little further. Fixed,
 * so the case is the same every run; the clock still moves (the emulator's limits count time).
 */
const START_MS = Date.parse('2026-11-26T11:34:08.857Z');

function startedClock(): () => number {
  let anchor: number | undefined;
  return () => {
    anchor ??= Date.now();
    return START_MS + (Date.now() - anchor);
  };
}

describe('planSplit cuts on whole pages', () => {
  // Two parts: one cut with ± 5,000 records of slack, more than a day of hour buckets (what one
  // finer request can cover); sixteen: many cuts, each with a narrower stretch (± 625 records, about eleven hours).
  it.each([2, 16])(
    'sub-windows of an exact count hold whole pages, cover the window, and the timeseries were asked at most once per cut more (at most %i parts)',
    async (maxParts) => {
      const now = startedClock();
      const emu = await emulator({ seed: 101, projects: ['default'], eventsPerProject: 40_000, latencyMs: 100, now });
      const client = new ApiClient({
        baseUrl: emu.url,
        apiKey: emu.apiKey,
        projectHeader: 'X-Service-Project-Id',
        budget: createScheduler({ limits: { maxRpm: 10_000, searchRpm: 1_000, maxRps: 1_000, searchGateRps: 1_000 } }),
        clock: systemClock,
        logger: silentLogger(),
      });
      onCleanup(() => client.close());
      const ctx = { resource: 'events', project: 'default', lane: 'events|default', stats: newCallStats() };
      // The parts a split may use also follow the timeseries' answer time (`partsForLatency`): a
      // per-second budget that never binds makes them `maxParts` on a loaded machine or not, so the
      // layout above is cut in the same number of parts every run. The minute's budget is the default
      // (a 400-page walk is the one whole pages matter for).
      const limits = { ...DEFAULT_RATE_LIMITS, maxRps: 1_000 };
      const window = { fromMs: 0, toMs: now() };
      const before = ctx.stats.requests;
      const plan = await planSplit(
        events,
        { key: 'default', header: 'default', fallbackProjectId: 'default' },
        window,
        undefined,
        maxParts,
        { client, logger: silentLogger(), clock: systemClock, limits },
        ctx,
      );
      expect(plan, 'a 400-page window is split').toBeDefined();
      const parts = plan?.parts ?? [];
      expect(parts.length).toBeGreaterThanOrEqual(maxParts === 2 ? 2 : 4);
      expect(parts.length, 'as many parts as asked (the per-second budget does not bind)').toBe(maxParts);
      expect(parts[0]?.fromMs).toBe(window.fromMs);
      expect(parts.at(-1)?.toMs).toBe(window.toMs);
      for (let i = 1; i < parts.length; i += 1) expect(parts[i]?.fromMs).toBe(parts[i - 1]?.toMs);
      // Timeseries requests: the coarse answer (one or two) and one per cut at most.
      expect(ctx.stats.requests - before).toBeLessThanOrEqual(3 + parts.length - 1);
      const counts: number[] = [];
      for (const p of parts) {
        const body = (await client.getJson(
          {
            endpoint: '/v1/events/count',
            path: '/v1/events/count',
            query: {
              'timestamp[gte]': new Date(p.fromMs).toISOString(),
              'timestamp[lt]': new Date(p.toMs).toISOString(),
            },
            project: 'default',
          },
          ctx,
        )) as { data: { total: number } };
        counts.push(body.data.total);
      }
      expect(counts.reduce((n, c) => n + c, 0)).toBe(40_000);
      expect(
        counts.map((c) => c % 100),
        `records per sub-window: ${counts.join(', ')}`,
      ).toEqual(counts.map(() => 0));
    },
  );
});
