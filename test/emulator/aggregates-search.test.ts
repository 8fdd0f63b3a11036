import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../emulator/index.js';
import { get, iso, keyOf, list, manualClock, walkAll, type ErrorBody } from './helpers.js';

const DAY = 86_400_000;
const clock = manualClock(Date.parse('2026-11-20T10:00:00.000Z'));
let em: Emulator;

beforeAll(async () => {
  em = await startEmulator({ eventsPerProject: 1500, now: clock.now });
});
afterAll(() => em.close());

const ms = (value: unknown): number => Date.parse(String(value));

describe('count', () => {
  it('returns {data:{total}} matching the filters, per project and across projects', async () => {
    const events = em.snapshot('events', 'default');
    expect((await get(em, '/v1/events/count')).json).toEqual({ data: { total: events.length } });
    const since = clock.now() - 7 * DAY;
    const reply = await get(em, `/v1/events/count?timestamp[gte]=${iso(since)}&event_name=chat_message`);
    const expected = events.filter((e) => ms(e['timestamp']) >= since && e['event_name'] === 'chat_message').length;
    expect(reply.json).toEqual({ data: { total: expected } });
    expect(expected).toBeGreaterThan(0);
    expect((await get(em, '/v1/events/count', { project: '*' })).json).toEqual({
      data: { total: em.snapshot('events').length },
    });
  });
});

describe('timeseries', () => {
  it("returns ascending {timestamp,count} buckets that sum to the count, and the interval (the SDK's shape)", async () => {
    const since = clock.now() - 10 * DAY;
    for (const interval of ['minute', 'hour', 'day', 'week', 'month']) {
      const body = (await get(em, `/v1/events/timeseries?interval=${interval}&timestamp[gte]=${iso(since)}`)).json as {
        data: { buckets: { timestamp: string; count: number }[]; total: number };
        meta: { interval: string };
      };
      const buckets = body.data.buckets;
      const total = buckets.reduce((sum, b) => sum + b.count, 0);
      const expected = em.snapshot('events', 'default').filter((e) => ms(e['timestamp']) >= since).length;
      expect(total, interval).toBe(expected);
      expect(body.data.total, interval).toBe(expected);
      expect(body.meta.interval).toBe(interval);
      for (let i = 1; i < buckets.length; i++)
        expect(ms(buckets[i]!.timestamp)).toBeGreaterThan(ms(buckets[i - 1]!.timestamp));
      for (const bucket of buckets) {
        expect(bucket.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:00\.000Z$/);
        expect(bucket.count).toBeGreaterThan(0);
      }
    }
  });

  it('aligns day buckets to UTC midnight, weeks to Monday and months to the 1st', async () => {
    type Series = { data: { buckets: { timestamp: string }[] } };
    const day = (await get(em, '/v1/events/timeseries?interval=day')).json as Series;
    for (const b of day.data.buckets) expect(b.timestamp.endsWith('T00:00:00.000Z')).toBe(true);
    const week = (await get(em, '/v1/events/timeseries?interval=week')).json as Series;
    for (const b of week.data.buckets) expect(new Date(b.timestamp).getUTCDay()).toBe(1);
    const month = (await get(em, '/v1/events/timeseries?interval=month')).json as Series;
    for (const b of month.data.buckets) expect(new Date(b.timestamp).getUTCDate()).toBe(1);
    expect(day.data.buckets.length).toBeGreaterThan(0);
  });

  it('refuses an unknown interval with 400', async () => {
    expect((await get(em, '/v1/events/timeseries?interval=year')).status).toBe(400);
  });
});

describe('facets', () => {
  it('returns {value,count} sorted by count, 20 by default, for event_name, user_id and signal_id', async () => {
    const events = em.snapshot('events', 'default');
    const users = (await get(em, '/v1/events/facets?field=user_id')).json as {
      data: { value: string; count: number }[];
    };
    expect(users.data.length).toBe(20);
    for (let i = 1; i < users.data.length; i++)
      expect(users.data[i]!.count).toBeLessThanOrEqual(users.data[i - 1]!.count);
    for (const { value, count } of users.data) expect(count).toBe(events.filter((e) => e['user_id'] === value).length);

    const names = (await get(em, '/v1/events/facets?field=event_name&limit=3')).json as {
      data: { value: string; count: number }[];
    };
    expect(names.data.length).toBe(3);

    const signals = (await get(em, '/v1/events/facets?field=signal&limit=100')).json as {
      data: { value: string; count: number }[];
    };
    // The field notes' name for the same field, accepted on the spec flavor.
    expect((await get(em, '/v1/events/facets?field=signal_id&limit=100')).json).toEqual(signals);
    const signalIds = new Set(em.snapshot('signals', 'default').map((s) => s['id']));
    for (const { value, count } of signals.data) {
      expect(signalIds.has(value)).toBe(true);
      expect(count).toBe(events.filter((e) => (e['signals'] as { id: string }[]).some((s) => s.id === value)).length);
    }
  });

  it('refuses other fields with 400', async () => {
    for (const field of ['model', '', 'properties']) {
      const reply = await get(em, `/v1/events/facets?field=${field}`);
      expect(reply.status, field).toBe(400);
    }
    expect((await get(em, '/v1/events/facets')).status).toBe(400);
  });
});

describe('search', () => {
  const since = iso(clock.now() - 13 * DAY);

  it('finds case-insensitive substrings in user_input and assistant_output and scores rows', async () => {
    const { rows } = await walkAll(em, `/v1/events/search?query=REFUND&limit=100&timestamp[gte]=${since}`);
    const expected = em
      .snapshot('events', 'default')
      .filter((e) => ms(e['timestamp']) >= ms(since))
      .filter((e) => `${String(e['user_input'])}\n${String(e['assistant_output'])}`.toLowerCase().includes('refund'));
    expect(new Set(rows.map((r) => keyOf(r, 'default')))).toEqual(new Set(expected.map((e) => keyOf(e))));
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) {
      expect(typeof row['relevance_score']).toBe('number');
      expect(row['relevance_score'] as number).toBeGreaterThan(0);
    }
  });

  it('restricts to search_in fields, and supports regex mode', async () => {
    const onlyOutput = await list(
      em,
      `/v1/events/search?query=refund&search_in=assistant_output&limit=100&timestamp[gte]=${since}`,
    );
    for (const row of onlyOutput.data) expect(String(row['assistant_output']).toLowerCase()).toContain('refund');
    const regex = await list(
      em,
      `/v1/events/search?query=${encodeURIComponent('#\\d{4}')}&mode=regex&limit=100&timestamp[gte]=${since}`,
    );
    expect(regex.data.length).toBeGreaterThan(0);
    for (const row of regex.data)
      expect(`${String(row['user_input'])} ${String(row['assistant_output'])}`).toMatch(/#\d{4}/);
    expect((await get(em, `/v1/events/search?query=(&mode=regex&timestamp[gte]=${since}`)).status).toBe(400);
    expect((await get(em, `/v1/events/search?query=a&mode=fuzzy&timestamp[gte]=${since}`)).status).toBe(400);
    expect((await get(em, `/v1/events/search?query=a&search_in=model&timestamp[gte]=${since}`)).status).toBe(400);
  });

  it('applies the list filters too', async () => {
    const rows = await list(em, `/v1/events/search?query=e&event_name=feedback&limit=100&timestamp[gte]=${since}`);
    expect(rows.data.length).toBeGreaterThan(0);
    for (const row of rows.data) expect(row['event_name']).toBe('feedback');
  });

  it('requires timestamp[gte] and a window of at most 14 days', async () => {
    const missing = await get(em, '/v1/events/search?query=a');
    expect(missing.status).toBe(400);
    const wide = await get(em, `/v1/events/search?query=a&timestamp[gte]=${iso(clock.now() - 15 * DAY)}`);
    expect(wide.status).toBe(400);
    expect((wide.json as ErrorBody).error.message).toMatch(/14 days/);
    const wideClosed = await get(
      em,
      `/v1/events/search?query=a&timestamp[gte]=${iso(clock.now() - 40 * DAY)}&timestamp[lt]=${iso(clock.now() - 20 * DAY)}`,
    );
    expect(wideClosed.status).toBe(400);
    const exact = await get(
      em,
      `/v1/events/search?query=a&timestamp[gte]=${iso(clock.now() - 30 * DAY)}&timestamp[lt]=${iso(clock.now() - 16 * DAY)}`,
    );
    expect(exact.status).toBe(200);
    expect((await get(em, `/v1/events/search?timestamp[gte]=${since}`)).status).toBe(400);
  });
});
