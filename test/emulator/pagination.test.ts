import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../emulator/index.js';
import { get, keyOf, list, manualClock, walkAll, type ErrorBody } from './helpers.js';

const RESOURCES = [
  { resource: 'events', path: '/v1/events', time: 'timestamp' },
  { resource: 'traces', path: '/v1/traces', time: 'start_time_ns' },
  { resource: 'signals', path: '/v1/signals', time: 'created_at' },
  { resource: 'users', path: '/v1/users', time: 'last_seen' },
  { resource: 'conversations', path: '/v1/conversations', time: 'last_message_at' },
] as const;

let em: Emulator | undefined;
afterEach(async () => {
  await em?.close();
  em = undefined;
});

/** The row's sort value in ms; JSON.parse rounds ns values, so traces compare at ms precision. */
function sortValue(row: Record<string, unknown>, field: string): bigint {
  const value = row[field];
  if (field === 'start_time_ns') return BigInt(Math.floor(Number(value) / 1e6));
  return BigInt(Date.parse(String(value)));
}

describe('pagination', () => {
  it('walks every list endpoint, returning every record exactly once', async () => {
    em = await startEmulator({ eventsPerProject: 300 });
    for (const { resource, path } of RESOURCES) {
      for (const project of ['default', 'beta']) {
        const { rows, pages } = await walkAll(em, `${path}?limit=7`, { project });
        const truth = em.snapshot(resource, project).map((r) => keyOf(r));
        const seen = rows.map((r) => keyOf(r, project));
        expect(new Set(seen).size, `${resource} duplicates`).toBe(seen.length);
        expect(new Set(seen), resource).toEqual(new Set(truth));
        expect(pages, resource).toBe(Math.max(1, Math.ceil(truth.length / 7)));
      }
    }
  });

  it('walks the all-projects view of events, users and conversations across projects', async () => {
    em = await startEmulator({ eventsPerProject: 200 });
    for (const resource of ['events', 'users', 'conversations']) {
      const { rows } = await walkAll(em, `/v1/${resource}?limit=50`, { project: '*' });
      const truth = em.snapshot(resource).map((r) => keyOf(r));
      const seen = rows.map((r) => keyOf(r));
      expect(seen.length, resource).toBe(truth.length);
      expect(new Set(seen), resource).toEqual(new Set(truth));
    }
  });

  it('sorts by time then id, newest first by default, and ascending when configured', async () => {
    em = await startEmulator({ eventsPerProject: 300 });
    for (const order of ['desc', 'asc'] as const) {
      em.configure({ order });
      for (const { path, time } of RESOURCES) {
        const { rows } = await walkAll(em, `${path}?limit=13`);
        for (let i = 1; i < rows.length; i++) {
          const a = rows[i - 1]!;
          const b = rows[i]!;
          const ta = sortValue(a, time);
          const tb = sortValue(b, time);
          if (order === 'desc') expect(ta >= tb, `${path} ${order} at ${i}`).toBe(true);
          else expect(ta <= tb, `${path} ${order} at ${i}`).toBe(true);
          if (ta === tb && time !== 'start_time_ns') {
            const ia = String(a['id']);
            const ib = String(b['id']);
            expect(order === 'desc' ? ia > ib : ia < ib, `${path} tie order`).toBe(true);
          }
        }
      }
    }
  });

  it('accepts order_by on events and order_direction on users; a cursor keeps its walk direction', async () => {
    em = await startEmulator({ eventsPerProject: 100 });
    const asc = await list(em, '/v1/events?order_by=timestamp&limit=100');
    const desc = await list(em, '/v1/events?order_by=-timestamp&limit=100');
    expect(asc.data.map((r) => r['id'])).toEqual([...desc.data.map((r) => r['id'])].reverse());
    const usersAsc = await list(em, '/v1/users?order_direction=asc&limit=100');
    const usersDesc = await list(em, '/v1/users?order_direction=desc&limit=100');
    expect(usersAsc.data.map((r) => r['id'])).toEqual([...usersDesc.data.map((r) => r['id'])].reverse());
    expect((await get(em, '/v1/events?order_by=user_id')).status).toBe(400);
    expect((await get(em, '/v1/users?order_direction=up')).status).toBe(400);

    const { rows } = await walkAll(em, '/v1/events?order_by=timestamp&limit=9', {
      between: () => em!.configure({ order: 'desc' }),
    });
    expect(rows.map((r) => r['id'])).toEqual(asc.data.map((r) => r['id']));
  });

  it('stays stable while addEvents inserts during the walk (desc and asc)', async () => {
    const clock = manualClock();
    em = await startEmulator({ eventsPerProject: 400, now: clock.now });
    for (const order of ['desc', 'asc'] as const) {
      const before = new Set(em.snapshot('events', 'default').map((r) => keyOf(r)));
      const { rows } = await walkAll(
        em,
        `/v1/events?limit=10&order_by=${order === 'asc' ? 'timestamp' : '-timestamp'}`,
        {
          between: (page) => {
            clock.advance(1000);
            em!.addEvents('default', 3);
            // Also insert into the past, inside the part already walked and the part still ahead.
            em!.addEvents('default', 1, { timestamp: clock.now() - (page % 2 === 0 ? 20 : 2) * 86_400_000 });
          },
        },
      );
      const seen = rows.map((r) => keyOf(r, 'default'));
      expect(new Set(seen).size, 'no repeats').toBe(seen.length);
      for (const key of before) expect(seen.includes(key), `missing ${key}`).toBe(true);
    }
  });

  it('traces and conversations walks stay stable while events are added', async () => {
    const clock = manualClock();
    em = await startEmulator({ eventsPerProject: 300, now: clock.now });
    for (const resource of ['traces', 'users', 'conversations', 'signals']) {
      const before = new Set(em.snapshot(resource, 'default').map((r) => keyOf(r)));
      const { rows } = await walkAll(em, `/v1/${resource}?limit=11`, {
        between: () => {
          clock.advance(500);
          em!.addEvents('default', 2);
        },
      });
      const seen = rows.map((r) => keyOf(r, 'default'));
      expect(new Set(seen).size, `${resource} repeats`).toBe(seen.length);
      if (resource === 'traces' || resource === 'signals') {
        for (const key of before) expect(seen.includes(key), `${resource} missing ${key}`).toBe(true);
      }
    }
  });

  it('has_more is false and cursor null exactly on the last page', async () => {
    em = await startEmulator({ eventsPerProject: 20 });
    const total = em.snapshot('events', 'default').length;
    const full = await list(em, `/v1/events?limit=${total}`);
    expect(full.data.length).toBe(total);
    expect(full.meta).toEqual({ cursor: null, has_more: false });
    const short = await list(em, `/v1/events?limit=${total - 1}`);
    expect(short.meta.has_more).toBe(true);
    expect(typeof short.meta.cursor).toBe('string');
    const last = await list(em, `/v1/events?limit=${total - 1}&cursor=${short.meta.cursor}`);
    expect(last.data.length).toBe(1);
    expect(last.meta).toEqual({ cursor: null, has_more: false });
  });

  it('refuses malformed cursors and cursors of another list with 400', async () => {
    em = await startEmulator({ eventsPerProject: 50 });
    const page = await list(em, '/v1/users?limit=2');
    for (const cursor of [
      'not a cursor',
      '%%%',
      'eyJmb28iOjF9',
      Buffer.from('[1,2]').toString('base64url'),
      page.meta.cursor!,
    ]) {
      const reply = await get(em, `/v1/events?cursor=${encodeURIComponent(cursor)}`);
      expect(reply.status, cursor).toBe(400);
      expect((reply.json as ErrorBody).error.code).toBe('invalid_cursor');
    }
  });

  it('applies default page sizes, clamps large limits, and refuses invalid ones', async () => {
    em = await startEmulator({ eventsPerProject: 1500 });
    expect((await list(em, '/v1/events')).data.length).toBe(25);
    expect((await list(em, '/v1/events?limit=100')).data.length).toBe(100);
    expect((await list(em, '/v1/events?limit=5000')).data.length).toBe(100);
    expect((await list(em, '/v1/conversations?limit=101')).data.length).toBe(100);
    expect((await list(em, '/v1/traces')).data.length).toBe(100);
    expect((await list(em, '/v1/traces?limit=1000')).data.length).toBe(1000);
    expect((await list(em, '/v1/traces?limit=99999')).data.length).toBe(1000);
    for (const limit of ['0', '-1', 'abc', '1.5', '']) {
      const reply = await get(em, `/v1/events?limit=${limit}`);
      expect(reply.status, `limit=${limit}`).toBe(400);
    }
  });
});
