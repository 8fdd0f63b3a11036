import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator, type FaultKind } from '../../emulator/index.js';
import { get, type ErrorBody, type ListBody } from './helpers.js';

let em: Emulator | undefined;
afterEach(async () => {
  await em?.close();
  em = undefined;
});

async function withFault(kind: FaultKind, slowMs?: number): Promise<Emulator> {
  em = await startEmulator({ eventsPerProject: 100, faults: { rate: 1, kinds: [kind], slowMs } });
  return em;
}

describe('faults', () => {
  it('http500: a JSON 500', async () => {
    const e = await withFault('http500');
    const reply = await get(e, '/v1/events');
    expect(reply.status).toBe(500);
    expect((reply.json as ErrorBody).error.code).toBe('internal_error');
    expect(e.stats().faults).toEqual({ http500: 1 });
  });

  it('http503_html: a 503 with an HTML page', async () => {
    const e = await withFault('http503_html');
    const reply = await get(e, '/v1/users');
    expect(reply.status).toBe(503);
    expect(reply.headers['content-type']).toMatch(/text\/html/);
    expect(reply.text).toMatch(/<html>/);
    expect(reply.json).toBeUndefined();
    expect(e.stats().faults['http503_html']).toBe(1);
  });

  it('reset: the connection is dropped without an answer', async () => {
    const e = await withFault('reset');
    await expect(get(e, '/v1/events')).rejects.toThrow();
    expect(e.stats().faults['reset']).toBe(1);
  });

  it('slow: answers normally after slowMs', async () => {
    const e = await withFault('slow', 250);
    const started = performance.now();
    const reply = await get(e, '/v1/events?limit=3');
    expect(performance.now() - started).toBeGreaterThanOrEqual(240);
    expect(reply.status).toBe(200);
    expect((reply.json as ListBody).data.length).toBe(3);
  });

  it('duplicate_row: one row of a list page is repeated; non-list answers are untouched', async () => {
    const e = await withFault('duplicate_row');
    const page = (await get(e, '/v1/events?limit=10')).json as ListBody;
    expect(page.data.length).toBe(11);
    const ids = page.data.map((r) => r['id']);
    expect(new Set(ids).size).toBe(10);
    const traces = (await get(e, '/v1/traces?limit=5')).json as ListBody;
    expect(new Set(traces.data.map((r) => r['span_id'])).size).toBe(traces.data.length - 1);
    const count = await get(e, '/v1/events/count');
    expect(count.json).toEqual({ data: { total: 100 } });
    const empty = (await get(e, '/v1/events?user_id=nobody')).json as ListBody;
    expect(empty.data).toEqual([]);
    expect(e.stats().faults['duplicate_row']).toBe(2);
  });

  it('truncated: a 200 announcing the full length but carrying half the body', async () => {
    const e = await withFault('truncated');
    const response = await request(`${e.url}/v1/events?limit=50`, { headers: { authorization: `Bearer ${e.apiKey}` } });
    expect(response.statusCode).toBe(200);
    const announced = Number(response.headers['content-length']);
    expect(announced).toBeGreaterThan(1000);
    let received = 0;
    await expect(
      (async () => {
        for await (const chunk of response.body) received += (chunk as Buffer).length;
      })(),
    ).rejects.toThrow();
    expect(received).toBe(Math.floor(announced / 2));
    expect(e.stats().faults['truncated']).toBe(1);
  });

  it('draws after auth: a bad key is still a 401', async () => {
    const e = await withFault('http500');
    expect((await get(e, '/v1/events', { key: 'wrong' })).status).toBe(401);
    expect(e.stats().faults).toEqual({});
  });

  it('draws once per request from the seed: same seed, same fault sequence; configure turns them off', async () => {
    const statuses = async (seed: number): Promise<string[]> => {
      const e = await startEmulator({
        seed,
        eventsPerProject: 20,
        faults: { rate: 0.5, kinds: ['http500', 'http503_html', 'slow'], slowMs: 1 },
      });
      try {
        const out: string[] = [];
        for (let i = 0; i < 40; i++) out.push(String((await get(e, '/v1/events')).status));
        const faults = e.stats().faults;
        const injected = Object.values(faults).reduce((a, b) => a + b, 0);
        expect(injected).toBeGreaterThan(8);
        expect(injected).toBeLessThan(32);
        e.configure({ faults: undefined });
        for (let i = 0; i < 10; i++) expect((await get(e, '/v1/events')).status).toBe(200);
        return out;
      } finally {
        await e.close();
      }
    };
    const a = await statuses(3);
    expect(await statuses(3)).toEqual(a);
    expect(a).toContain('500');
    expect(a).toContain('503');
    expect(a).toContain('200');
  });
});
