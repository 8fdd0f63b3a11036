import { describe, expect, it } from 'vitest';
import { deriveSeed, Random } from '../../emulator/random.js';
import { emulator } from '../fakes/lifecycle.js';

/**
 * The emulator decides a rate limit when a request arrives, in arrival order, as a real server's
 * limiter does; only the answer waits for the (jittered) latency. Deciding after the latency let a
 * later arrival that drew a shorter latency be counted first, and the earlier one was then refused
 * for a second it had found empty.
 */
describe('emulator rate limits at arrival', () => {
  it('the first request into an empty second is admitted even when a later one, a second after, is answered first', async () => {
    const latencyMs = 300;
    const jitterMs = 250;
    // A seed whose first latency draw (request A) is longer than its second (request B) by 150 ms or more.
    const seed = Array.from({ length: 200 }, (_, i) => i + 1).find((s) => {
      const rng = new Random(deriveSeed(s, 'latency'));
      const a = latencyMs + (rng.next() * 2 - 1) * jitterMs;
      const b = latencyMs + (rng.next() * 2 - 1) * jitterMs;
      return a > b + 150;
    }) as number;
    expect(seed).toBeDefined();
    let fake = Date.parse('2026-11-20T00:00:00Z');
    const arrived: string[] = [];
    const emu = await emulator({
      seed,
      projects: ['default'],
      eventsPerProject: 10,
      latencyMs,
      latencyJitterMs: jitterMs,
      now: () => fake,
      onRequest: (info) => arrived.push(info.query.get('tag') ?? ''),
      limits: { maxRpm: 400, searchRpm: 50, maxRps: 1, searchGateRps: 1 },
    });
    const get = (tag: string): Promise<number> =>
      fetch(`${emu.url}/v1/events?limit=1&tag=${tag}`, {
        headers: { authorization: `Bearer ${emu.apiKey}`, 'x-service-project-id': 'default' },
      }).then(async (r) => {
        await r.arrayBuffer();
        return r.status;
      });
    const a = get('a');
    while (!arrived.includes('a')) await new Promise((r) => setTimeout(r, 5));
    // B arrives a full second (emulator clock) after A: A has left the one-second window.
    fake += 1000;
    const b = get('b');
    expect(await Promise.all([a, b])).toEqual([200, 200]);
    expect(arrived).toEqual(['a', 'b']);
  });
});
