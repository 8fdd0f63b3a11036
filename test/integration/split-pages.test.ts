import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { systemClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/log.js';
import { ApiClient, newCallStats } from '../../src/http/client.js';
import { createScheduler } from '../../src/http/scheduler.js';
import { planSplit } from '../../src/pipeline/split.js';
import { emulator, onCleanup } from '../fakes/lifecycle.js';
import { DEFAULT_RATE_LIMITS } from '../../src/http/budget.js';

/**
 * A split of a walk that is a whole number of pages costs no page more than one walk: 40,000 events
 * are 400 pages, a minute's budget of `/v1/events`; page 401 would cost a second minute window. The
 * emulator's hour buckets (~55 events each) rarely end on a whole page, so the cuts need the finer
 * timeseries `planSplit` asks around them.
 */
describe('planSplit cuts on whole pages', () => {
  // Two parts: one cut with ± 2,500 records of slack, more than a day of hour buckets (what one
  // finer request can cover); sixteen: many cuts, each with a narrower stretch.
  it.each([2, 16])('sub-windows of an exact count hold whole pages, cover the window, and the timeseries were asked at most once per cut more (at most %i parts)', async (maxParts) => {
    const emu = await emulator({ seed: 101, projects: ['default'], eventsPerProject: 40_000, latencyMs: 100 });
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
    const window = { fromMs: 0, toMs: Date.now() };
    const before = ctx.stats.requests;
    const plan = await planSplit(events, { key: 'default', header: 'default', fallbackProjectId: 'default' }, window, undefined, maxParts, { client, logger: silentLogger(), clock: systemClock, limits: DEFAULT_RATE_LIMITS }, ctx);
    expect(plan, 'a 400-page window is split').toBeDefined();
    const parts = plan?.parts ?? [];
    expect(parts.length).toBeGreaterThanOrEqual(maxParts === 2 ? 2 : 4);
    expect(parts[0]?.fromMs).toBe(window.fromMs);
    expect(parts.at(-1)?.toMs).toBe(window.toMs);
    for (let i = 1; i < parts.length; i += 1) expect(parts[i]?.fromMs).toBe(parts[i - 1]?.toMs);
    // Timeseries requests: the coarse answer (one or two) and one per cut at most.
    expect(ctx.stats.requests - before).toBeLessThanOrEqual(3 + parts.length - 1);
    const counts: number[] = [];
    for (const p of parts) {
      const body = (await client.getJson(
        { endpoint: '/v1/events/count', path: '/v1/events/count', query: { 'timestamp[gte]': new Date(p.fromMs).toISOString(), 'timestamp[lt]': new Date(p.toMs).toISOString() }, project: 'default' },
        ctx,
      )) as { data: { total: number } };
      counts.push(body.data.total);
    }
    expect(counts.reduce((n, c) => n + c, 0)).toBe(40_000);
    expect(counts.map((c) => c % 100), `records per sub-window: ${counts.join(', ')}`).toEqual(counts.map(() => 0));
  });
});
