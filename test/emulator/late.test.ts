import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../emulator/index.js';
import { get, list, manualClock } from './helpers.js';

const DAY = 86_400_000;
let em: Emulator | undefined;
afterEach(async () => {
  await em?.close();
  em = undefined;
});
const ms = (value: unknown): number => Date.parse(String(value));

async function total(emulator: Emulator): Promise<number> {
  return ((await get(emulator, '/v1/events/count')).json as { data: { total: number } }).data.total;
}

describe('late visibility', () => {
  it('hides late events, their spans and their effect on users and conversations until their time', async () => {
    const clock = manualClock();
    em = await startEmulator({ eventsPerProject: 100, now: clock.now });
    const baseCount = await total(em);
    const baseSpans = em.snapshot('traces', 'default').length;
    const baseUsers = em.snapshot('users', 'default');
    const added = em.addEvents('default', 6, { lateByMs: 5000 });
    const ids = added.map((e) => String(e['id']));

    const hidden = async (): Promise<void> => {
      expect(await total(em!)).toBe(baseCount);
      expect(em!.snapshot('events', 'default').some((e) => ids.includes(String(e['id'])))).toBe(false);
      expect(em!.snapshot('traces', 'default').length).toBe(baseSpans);
      expect(em!.snapshot('users', 'default')).toEqual(baseUsers);
      for (const id of ids) expect((await get(em!, `/v1/events/${id}`)).status).toBe(404);
      for (const id of ids) expect((await list(em!, `/v1/traces?event_id=${id}`)).data).toEqual([]);
      const newest = await list(em!, '/v1/events?limit=10');
      for (const row of newest.data) expect(ids).not.toContain(row['id']);
    };
    await hidden();
    clock.advance(4999);
    await hidden();
    clock.advance(1);

    expect(await total(em)).toBe(baseCount + 6);
    for (const id of ids) expect((await get(em, `/v1/events/${id}`)).status).toBe(200);
    const newest = await list(em, '/v1/events?limit=6');
    expect(new Set(newest.data.map((r) => r['id']))).toEqual(new Set(ids));
    for (const row of newest.data) expect(ms(row['timestamp'])).toBe(clock.now() - 5000);
    const users = em.snapshot('users', 'default');
    expect(users.reduce((n, u) => n + (u['event_count'] as number), 0)).toBe(baseCount + 6);
  });

  it('applies faults.lateRate to added events', async () => {
    const clock = manualClock();
    em = await startEmulator({ eventsPerProject: 50, now: clock.now, faults: { rate: 0, lateRate: 1, lateMs: 3000 } });
    const base = await total(em);
    em.addEvents('alpha', 4);
    em.addEvents('default', 4);
    expect(await total(em)).toBe(base);
    clock.advance(3000);
    expect(await total(em)).toBe(base + 4);
    em.configure({ faults: { rate: 0, lateRate: 0 } });
    em.addEvents('default', 2);
    expect(await total(em)).toBe(base + 6);
  });

  it('applies lateRate to seeded events of the last lateMs window', async () => {
    const clock = manualClock();
    const start = clock.now();
    const options = { eventsPerProject: 2000, now: clock.now, historyDays: 30 };
    const reference = await startEmulator(options);
    const all = reference.snapshot('events', 'default');
    await reference.close();

    em = await startEmulator({ ...options, faults: { rate: 0, lateRate: 1, lateMs: 10 * DAY } });
    const visible = em.snapshot('events', 'default');
    // Same data whatever lateRate is: only visibility differs.
    expect(new Set(visible.map((e) => e['id']))).toEqual(
      new Set(all.filter((e) => ms(e['timestamp']) <= start - 10 * DAY).map((e) => e['id'])),
    );
    clock.advance(5 * DAY);
    expect(em.snapshot('events', 'default').length).toBe(
      all.filter((e) => ms(e['timestamp']) <= start - 5 * DAY).length,
    );
    clock.advance(5 * DAY);
    expect(em.snapshot('events', 'default').length).toBe(all.length);
  });
});
