import { afterEach, describe, expect, it } from 'vitest';
import { SPEC_RATE_LIMITS, startEmulator, type Emulator } from '../../emulator/index.js';
import { get, iso, manualClock, type ErrorBody } from './helpers.js';

let em: Emulator | undefined;
afterEach(async () => {
  await em?.close();
  em = undefined;
});

const WIDE = { maxRpm: 10_000, searchRpm: 10_000, maxRps: 10_000, searchGateRps: 10_000 };

describe('rate limits', () => {
  it("the emulator's own copy of the spec's limits (query-api.md, Limits), not the client's defaults", () => {
    expect(SPEC_RATE_LIMITS).toEqual({ maxRpm: 400, searchRpm: 50, maxRps: 40, searchGateRps: 20 });
    expect(Object.isFrozen(SPEC_RATE_LIMITS)).toBe(true);
  });

  it('are off by default', async () => {
    em = await startEmulator({ eventsPerProject: 10 });
    for (let i = 0; i < 60; i++) expect((await get(em, '/v1/signals')).status).toBe(200);
    expect(em.stats().rateLimited).toBe(0);
  });

  it('limit each endpoint per sliding minute, with Retry-After until the oldest request leaves', async () => {
    const clock = manualClock();
    const t0 = clock.now();
    em = await startEmulator({ eventsPerProject: 10, now: clock.now, limits: { ...WIDE, maxRpm: 5 } });
    for (let i = 0; i < 5; i++) {
      expect((await get(em, '/v1/events')).status).toBe(200);
      clock.advance(1500);
    }
    const refused = await get(em, '/v1/events');
    expect(refused.status).toBe(429);
    expect((refused.json as ErrorBody).error.code).toBe('rate_limited');
    // Oldest at t0 leaves the window at t0 + 60 s; now is t0 + 7.5 s.
    expect(refused.headers['retry-after']).toBe(String(Math.ceil((t0 + 60_000 - clock.now()) / 1000)));
    // Another endpoint has its own budget.
    expect((await get(em, '/v1/users')).status).toBe(200);
    // Refusals do not consume budget: just after the oldest leaves, exactly one more fits.
    clock.set(t0 + 60_000);
    for (let i = 0; i < 3; i++) expect((await get(em, '/v1/events')).status).toBe(i === 0 ? 200 : 429);
    const stats = em.stats();
    expect(stats.rateLimited).toBe(3);
    expect(stats.maxPerMinuteByEndpoint['/v1/events']).toBe(5);
    expect(stats.byEndpoint['/v1/events']).toBe(9);
  });

  it('limit all endpoints together per sliding second', async () => {
    const clock = manualClock();
    em = await startEmulator({ eventsPerProject: 10, now: clock.now, limits: { ...WIDE, maxRps: 3 } });
    expect((await get(em, '/v1/events')).status).toBe(200);
    expect((await get(em, '/v1/users')).status).toBe(200);
    clock.advance(400);
    expect((await get(em, '/v1/signals')).status).toBe(200);
    const refused = await get(em, '/v1/conversations');
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe('1');
    clock.advance(599);
    expect((await get(em, '/v1/conversations')).status).toBe(429);
    clock.advance(1);
    expect((await get(em, '/v1/conversations')).status).toBe(200);
    expect(em.stats().maxPerSecond).toBe(3);
  });

  it('limit search per minute, and refuse search once combined usage reaches the gate', async () => {
    const clock = manualClock();
    em = await startEmulator({
      eventsPerProject: 10,
      now: clock.now,
      limits: { maxRpm: 100, searchRpm: 2, maxRps: 10, searchGateRps: 3 },
    });
    const search = `/v1/events/search?query=a&timestamp[gte]=${iso(clock.now() - 86_400_000)}`;
    expect((await get(em, search)).status).toBe(200);
    clock.advance(1000);
    expect((await get(em, search)).status).toBe(200);
    clock.advance(1000);
    const third = await get(em, search);
    expect(third.status).toBe(429);
    expect(third.headers['retry-after']).toBe('58');
    expect((await get(em, '/v1/events')).status).toBe(200);

    clock.advance(60_000);
    // Three requests in this second: search is gated, other endpoints still pass up to maxRps.
    for (const path of ['/v1/events', '/v1/users', '/v1/signals']) expect((await get(em, path)).status).toBe(200);
    const gated = await get(em, search);
    expect(gated.status).toBe(429);
    expect(gated.headers['retry-after']).toBe('1');
    expect((await get(em, '/v1/conversations')).status).toBe(200);
    clock.advance(1000);
    expect((await get(em, search)).status).toBe(200);
  });

  it('count single-record gets against their path template, whatever the id', async () => {
    em = await startEmulator({ eventsPerProject: 10, limits: { ...WIDE, maxRpm: 2 } });
    expect((await get(em, '/v1/users/a')).status).toBe(404);
    expect((await get(em, '/v1/users/b')).status).toBe(404);
    expect((await get(em, '/v1/users/c')).status).toBe(429);
    expect((await get(em, '/v1/users')).status).toBe(200);
  });

  it('can be switched at run time', async () => {
    const clock = manualClock();
    em = await startEmulator({ eventsPerProject: 10, now: clock.now });
    em.configure({ limits: { ...WIDE, maxRps: 1 } });
    expect((await get(em, '/v1/events')).status).toBe(200);
    expect((await get(em, '/v1/events')).status).toBe(429);
    em.configure({ limits: false });
    expect((await get(em, '/v1/events')).status).toBe(200);
  });
});

describe('stats', () => {
  it('counts requests by path template, arrival times, and the busiest second and minute', async () => {
    const clock = manualClock();
    em = await startEmulator({ eventsPerProject: 20, now: clock.now });
    const id = String(em.snapshot('events', 'default')[0]!['id']);
    for (let i = 0; i < 4; i++) await get(em, '/v1/events');
    clock.advance(300);
    await get(em, `/v1/events/${id}`);
    await get(em, '/v1/events/missing');
    clock.advance(2000);
    await get(em, '/v1/events');
    await get(em, '/v1/nothing');
    const stats = em.stats();
    expect(stats.requests).toBe(8);
    expect(stats.byEndpoint).toEqual({ '/v1/events': 5, '/v1/events/{id}': 2 });
    expect(stats.maxPerSecond).toBe(6);
    expect(stats.maxPerMinuteByEndpoint).toEqual({ '/v1/events': 5, '/v1/events/{id}': 2 });
    expect(stats.requestTimes.length).toBe(8);
    expect(stats.requestTimes[0]).toBe(clock.now() - 2300);
    expect(stats.requestPaths).toEqual([
      ...Array.from({ length: 4 }, () => '/v1/events'),
      `/v1/events/${id}`,
      '/v1/events/missing',
      '/v1/events',
      '/v1/nothing',
    ]);
    em.resetStats();
    expect(em.stats()).toEqual({
      requests: 0,
      byEndpoint: {},
      rateLimited: 0,
      faults: {},
      maxPerSecond: 0,
      maxPerMinuteByEndpoint: {},
      requestTimes: [],
      requestPaths: [],
      unauthorized: 0,
      afterUnauthorized: 0,
    });
  });
});
