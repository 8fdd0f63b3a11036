import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../emulator/index.js';
import { get, list, manualClock } from './helpers.js';

/** Issue 31's servers: counts that trail the list, and records deleted at the source. */

const DAY = 86_400_000;
let em: Emulator | undefined;
afterEach(async () => {
  await em?.close();
  em = undefined;
});

const total = async (e: Emulator): Promise<number> =>
  ((await get(e, '/v1/events/count')).json as { data: { total: number } }).data.total;
const seriesTotal = async (e: Emulator): Promise<number> =>
  ((await get(e, '/v1/events/timeseries?interval=day')).json as { data: { total: number } }).data.total;

describe('emulator: counts that lag, deletions at the source', () => {
  it('--count-lag: counts and timeseries leave out what was indexed within the lag; the list serves it', async () => {
    const clock = manualClock();
    em = await startEmulator({ projects: ['default'], eventsPerProject: 50, countLagMs: 60_000, now: clock.now });
    // Seeded events were indexed as the server started: listed at once, counted a minute later.
    expect(em.snapshot('events', 'default')).toHaveLength(50);
    expect(await total(em)).toBe(0);
    expect(await seriesTotal(em)).toBe(0);
    clock.advance(60_000);
    expect(await total(em)).toBe(50);
    // An event dated an hour back but indexed now is listed now and counted a minute later.
    const [added] = em.addEvents('default', 1, { timestamp: clock.now() - 3_600_000 });
    expect((await list(em, '/v1/events?limit=100')).data.map((r) => r['id'])).toContain(added?.['id']);
    expect(await total(em)).toBe(50);
    clock.advance(60_000);
    expect(await total(em)).toBe(51);
    expect(await seriesTotal(em)).toBe(51);
  });

  it('deleteEvents and retention remove events with their spans from lists, counts and lookups', async () => {
    const clock = manualClock();
    em = await startEmulator({ projects: ['default'], eventsPerProject: 60, historyDays: 6, now: clock.now });
    const all = em.snapshot('events', 'default');
    const victim = all.find((e) => em!.snapshot('traces', 'default').some((s) => s['event_id'] === e['id']));
    expect(victim).toBeDefined();
    const id = String(victim?.['id']);
    const deleted = em.deleteEvents('default', { ids: [id] });
    expect(deleted.map((e) => e['id'])).toEqual([id]);
    expect((await get(em, `/v1/events/${id}`)).status).toBe(404);
    expect((await list(em, `/v1/traces?event_id=${id}`)).data).toEqual([]);
    expect(em.snapshot('traces', 'default').some((s) => s['event_id'] === id)).toBe(false);
    expect(await total(em)).toBe(59);

    // Retention: whatever is older than it goes as the clock moves.
    await em.close();
    em = await startEmulator({
      projects: ['default'],
      eventsPerProject: 60,
      historyDays: 6,
      retentionMs: 3 * DAY,
      now: clock.now,
    });
    const kept = em.snapshot('events', 'default');
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.every((e) => Date.parse(String(e['timestamp'])) >= clock.now() - 3 * DAY)).toBe(true);
    clock.advance(DAY);
    const later = em.snapshot('events', 'default');
    expect(later.length).toBeLessThan(kept.length);
    expect(await total(em)).toBe(later.length);
  });
});
