import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { traces } from '../../connectors/traces.js';
import { createRuntime } from '../../src/run/runtime.js';
import { resolveStatusConfig, resolveSyncConfig } from '../../src/config/index.js';
import { systemClock } from '../../src/core/clock.js';
import type { Clock } from '../../src/core/types.js';
import { silentLogger } from '../../src/core/log.js';
import { DEFAULT_RATE_LIMITS } from '../../src/http/scheduler/budget.js';
import { ApiClient, newCallStats } from '../../src/http/client.js';
import { minimumSeconds } from '../../src/http/scheduler/floor.js';
import { createScheduler } from '../../src/http/scheduler/scheduler.js';
import type { Plan } from '../../src/reports/plan.js';
import { planSplit, type SplitLimits } from '../../src/sync/split/plan.js';
import { buildStatus } from '../../src/reports/status.js';
import type { StateDocument } from '../../src/state/document.js';
import { runCli } from '../fakes/cli.js';
import { dbPathOf, statePathOf } from '../fakes/harness.js';
import { dir, emulator, onCleanup } from '../fakes/lifecycle.js';

/**
 * `--max-rpm 200` reaches every heuristic that assumes a request rate, not only the scheduler: the
 * plan's least time, the split's sizing, the progress ETA of a backlog and status's drain time
 * (issue 22: they used the compiled-in 400 a minute).
 */

const ENV = { QUERY_API_BASE_URL: 'https://query.example.com', QUERY_API_KEY: 'k' };

describe('--max-rpm 200 plans, splits and estimates with 200', () => {
  it('plan: the least time is the floor at 200 a minute, over twice the one at 400 for the same requests', async () => {
    // 30,000 events are 300 pages of /v1/events: within 400 a minute (per-second bound, under
    // 10 s), but past 200 (a second minute window).
    const emu = await emulator({ seed: 91, eventsPerProject: 30_000, projects: ['default'] });
    const d = dir();
    const common = [
      '--project',
      'default',
      '--resources',
      'events',
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
      '--json',
    ];
    const at400 = JSON.parse((await runCli(emu, ['plan', ...common])).stdout) as Plan;
    const at200 = JSON.parse((await runCli(emu, ['plan', ...common, '--max-rpm', '200'])).stdout) as Plan;
    expect(at200.requestsByEndpoint).toEqual(at400.requestsByEndpoint);
    expect(at400.requestsByEndpoint['/v1/events']).toBeGreaterThan(200);
    expect(at200.limits.maxRpm).toBe(200);
    expect(at400.limits.maxRpm).toBe(DEFAULT_RATE_LIMITS.maxRpm);
    expect(at200.minimumSeconds).toBe(
      minimumSeconds(at200.requestsByEndpoint, { ...DEFAULT_RATE_LIMITS, maxRpm: 200 }),
    );
    expect(at400.minimumSeconds).toBe(minimumSeconds(at400.requestsByEndpoint, DEFAULT_RATE_LIMITS));
    expect(at200.minimumSeconds).toBeGreaterThanOrEqual(60);
    expect(at200.minimumSeconds).toBeGreaterThan(2 * at400.minimumSeconds);
  });

  it('split: a split of 200 pages or more is cut on whole pages at 200 a minute (at 400 only from 400 pages)', async () => {
    const emu = await emulator({ seed: 92, projects: ['default'], eventsPerProject: 30_000, latencyMs: 20 });
    const client = new ApiClient({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      projectHeader: 'X-Service-Project-Id',
      budget: createScheduler({ limits: { maxRpm: 10_000, searchRpm: 1_000, maxRps: 1_000, searchGateRps: 1_000 } }),
      clock: systemClock,
      logger: silentLogger(),
    });
    onCleanup(() => client.close());
    const window = { fromMs: 0, toMs: Date.now() };
    const split = async (limits: SplitLimits): Promise<{ counts: number[]; requests: number }> => {
      const ctx = { resource: 'events', project: 'default', lane: 'events|default', stats: newCallStats() };
      const plan = await planSplit(
        events,
        { key: 'default', header: 'default', fallbackProjectId: 'default' },
        window,
        undefined,
        2,
        { client, logger: silentLogger(), clock: systemClock, limits },
        ctx,
      );
      const requests = ctx.stats.requests;
      const counts: number[] = [];
      for (const p of plan?.parts ?? []) {
        const query = {
          'timestamp[gte]': new Date(p.fromMs).toISOString(),
          'timestamp[lt]': new Date(p.toMs).toISOString(),
        };
        counts.push(
          (
            (await client.getJson(
              { endpoint: '/v1/events/count', path: '/v1/events/count', query, project: 'default' },
              ctx,
            )) as { data: { total: number } }
          ).data.total,
        );
      }
      return { counts, requests };
    };
    const at200 = await split({ maxRpm: 200, maxRps: DEFAULT_RATE_LIMITS.maxRps });
    const at400 = await split({ maxRpm: 400, maxRps: DEFAULT_RATE_LIMITS.maxRps });
    expect(at200.counts).toHaveLength(2);
    expect(at200.counts.reduce((n, c) => n + c, 0)).toBe(30_000);
    expect(
      at200.counts.map((c) => c % 100),
      `records per sub-window at 200/min: ${at200.counts.join(', ')}`,
    ).toEqual([0, 0]);
    // At 400 the 300 pages are no minute's budget: the finer timeseries are not asked, unless the
    // first cut already fell on a whole page (then neither limit needs them).
    const wholeAlready = at400.counts.every((c) => c % 100 === 0);
    expect(
      wholeAlready || at400.requests < at200.requests,
      `requests at 400: ${at400.requests}, at 200: ${at200.requests}`,
    ).toBe(true);
  });

  it('progress: a backlog drains at the configured minute limit', async () => {
    let now = 1_000_000;
    const clock: Clock = { now: () => now, sleep: async () => undefined };
    const eta = async (flags: { readonly maxRpm?: number }): Promise<number | undefined> => {
      const config = resolveSyncConfig({ ...flags, resources: 'events,traces' }, ENV);
      const runtime = createRuntime(config, { print: () => undefined, clock });
      try {
        runtime.tracker.addWindows('traces', 1);
        runtime.tracker.backlog('traces', 60);
        now += 1;
        return runtime.tracker.snapshot().resources.find((r) => r.resource === 'traces')?.etaSeconds;
      } finally {
        await runtime.close();
      }
    };
    // 60 requests: 9 s at 400 a minute, 18 s at 200.
    expect(await eta({})).toBeCloseTo(9, 5);
    expect(await eta({ maxRpm: 200 })).toBeCloseTo(18, 5);
  });

  it('status: the per-event backlog drains at the --max-rpm given', () => {
    const doc: StateDocument = {
      version: 1,
      projects: [],
      streams: {},
      sections: {
        server: { perParent: { traces: { byParent: true, learnedAt: '2026-01-01T00:00:00.000Z', evidence: 'x' } } },
        'children:traces': {
          default: { pending: Object.fromEntries(Array.from({ length: 800 }, (_, i) => [`e${i}`, i])), done: {} },
        },
      },
    };
    const warehouse = { destination: 'duckdb', location: 'w.duckdb', available: true, tables: {} };
    const backlog = (flags: { readonly maxRpm?: number }): unknown => {
      const config = resolveStatusConfig(flags, {});
      return buildStatus('state.json', doc, [events, traces], warehouse, config.limits).resources.find(
        (r) => r.resource === 'traces',
      )?.backlog;
    };
    expect(backlog({})).toMatchObject({ total: 800, etaSeconds: 120, ratePerMinute: 400 });
    expect(backlog({ maxRpm: 200 })).toMatchObject({ total: 800, etaSeconds: 240, ratePerMinute: 200 });
  });
});
