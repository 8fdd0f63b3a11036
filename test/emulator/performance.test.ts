import { afterAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { get, type ListBody } from './helpers.js';

/**
 * 100k events per project × 3 projects. Targets: seeding about 3 s, a page well under 5 ms. The
 * bounds asserted here are looser so a busy machine does not fail the suite; the figures are logged.
 */
const SEED_BOUND_MS = 10_000;
const PAGE_MEDIAN_BOUND_MS = 10;

let em: Emulator | undefined;
afterAll(() => em?.close());

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

describe('performance at 3 × 100k events', () => {
  it('seeds quickly and serves pages fast', async () => {
    const started = performance.now();
    em = await startEmulator({ eventsPerProject: 100_000 });
    const seedMs = performance.now() - started;
    expect(em.snapshot('events', 'alpha').length).toBe(100_000);
    expect(seedMs).toBeLessThan(SEED_BOUND_MS);

    const since = new Date(Date.now() - 5 * 86_400_000).toISOString();
    const paths: [string, string | undefined][] = [
      ['/v1/events?limit=100', undefined],
      [`/v1/events?limit=100&timestamp[gte]=${since}`, undefined],
      ['/v1/events?limit=100', '*'],
      ['/v1/traces?limit=100', undefined],
      ['/v1/users?limit=100', undefined],
      ['/v1/conversations?limit=100', '*'],
      ['/v1/events/count', '*'],
    ];
    for (let i = 0; i < 50; i++) await get(em, '/v1/events?limit=100');
    const figures: string[] = [`seed ${seedMs.toFixed(0)} ms`];
    for (const [path, project] of paths) {
      const times: number[] = [];
      for (let i = 0; i < 40; i++) {
        const t = performance.now();
        const reply = await get(em, path, { project });
        times.push(performance.now() - t);
        expect(reply.status).toBe(200);
      }
      figures.push(`${project ?? 'default'} ${path}: median ${median(times).toFixed(2)} ms`);
      expect(median(times), path).toBeLessThan(PAGE_MEDIAN_BOUND_MS);
    }

    // A cursor deep into the walk is as fast as the first page (keyset, not offset).
    let cursor: string | null = null;
    for (let page = 0; page < 300; page++) {
      const body: ListBody = (await get(em, `/v1/events?limit=100${cursor ? `&cursor=${cursor}` : ''}`)).json as ListBody;
      cursor = body.meta.cursor;
    }
    const deep: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t = performance.now();
      await get(em, `/v1/events?limit=100&cursor=${cursor!}`);
      deep.push(performance.now() - t);
    }
    figures.push(`deep cursor page: median ${median(deep).toFixed(2)} ms`);
    expect(median(deep)).toBeLessThan(PAGE_MEDIAN_BOUND_MS);
    console.log(figures.join('\n'));
  });
});
