import { describe, expect, it } from 'vitest';

// The built file: its workers are the built worker files next to it (`npx tsc -p tsconfig.json` first).
const built: string = '../../dist/emulator/thread.js';
const { startEmulatorThread } = (await import(built)) as typeof import('../../emulator/thread.js');
import { onCleanup } from '../fakes/lifecycle.js';

/**
 * The emulator on its threads (demo, benchmarks): with limits, a gate on a thread of its own stamps
 * arrivals and answers 429s; every other answer (errors, faults, pages) is the emulator's, byte for byte.
 */
describe('emulator thread with a rate-limit gate', () => {
  it("refuses the request over the per-second limit with 429 and Retry-After, passes the others and the emulator's own errors", async () => {
    const emu = await startEmulatorThread({
      seed: 5,
      projects: ['default'],
      eventsPerProject: 50,
      limits: { maxRpm: 400, searchRpm: 50, maxRps: 3, searchGateRps: 2 },
    });
    onCleanup(() => emu.close());
    const get = (path: string, key = emu.apiKey): Promise<Response> =>
      fetch(`${emu.url}${path}`, { headers: { authorization: `Bearer ${key}`, 'x-service-project-id': 'default' } });
    const answers = await Promise.all([1, 2, 3, 4].map(() => get('/v1/events?limit=2')));
    const statuses = answers.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 429]);
    const refused = answers.find((r) => r.status === 429) as Response;
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
    const page = answers.find((r) => r.status === 200) as Response;
    expect(((await page.json()) as { data: unknown[] }).data).toHaveLength(2);
    // A wrong key is not counted by the gate; the emulator answers it.
    const wrong = await get('/v1/events?limit=2', 'nope');
    expect(wrong.status).toBe(401);
    const stats = await emu.stats();
    expect(stats.requests).toBe(5);
    expect(stats.rateLimited).toBe(1);
    expect(stats.maxPerSecond).toBe(3);
    const delay = await emu.loopDelay();
    expect(delay.gate).toBeDefined();
    // The emulator's own thread answers its other requests: new events, and counts before an instant.
    const before = await emu.counts(Date.now() + 60_000);
    expect(await emu.addEvents('default', 7)).toBe(7);
    const after = await emu.counts(Date.now() + 60_000);
    expect(after.events).toBe((before.events ?? 0) + 7);
    await emu.resetStats();
    expect((await emu.stats()).requests).toBe(0);
  });
});
