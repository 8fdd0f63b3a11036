import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiRecord } from '../../src/core/types.js';
import { startEmulator, type Emulator } from '../../emulator/index.js';
import { get, iso, keyOf, manualClock, walkAll, type ErrorBody } from './helpers.js';

const DAY = 86_400_000;
const clock = manualClock();
let em: Emulator;

beforeAll(async () => {
  em = await startEmulator({ eventsPerProject: 2000, now: clock.now });
});
afterAll(() => em.close());

async function keys(path: string, project?: string): Promise<Set<string>> {
  const { rows } = await walkAll(em, path, { project });
  const seen = rows.map((r) => keyOf(r, project ?? 'default'));
  expect(new Set(seen).size).toBe(seen.length);
  return new Set(seen);
}

function truth(resource: string, keep: (r: ApiRecord) => boolean, project = 'default'): Set<string> {
  return new Set(
    em
      .snapshot(resource, project)
      .filter(keep)
      .map((r) => keyOf(r)),
  );
}

const ms = (value: unknown): number => Date.parse(String(value));

describe('time filters', () => {
  it('timestamp[gte] is inclusive and timestamp[lt] exclusive, splitting equal timestamps at the edge', async () => {
    const events = em.snapshot('events', 'default');
    const counts = new Map<number, number>();
    for (const e of events) counts.set(ms(e['timestamp']), (counts.get(ms(e['timestamp'])) ?? 0) + 1);
    // An edge that several events share exactly.
    const edge = [...counts.entries()].find(([, n]) => n >= 2)![0];
    const low = edge - 3 * DAY;
    const got = await keys(`/v1/events?limit=100&timestamp[gte]=${iso(low)}&timestamp[lt]=${iso(edge)}`);
    expect(got).toEqual(truth('events', (e) => ms(e['timestamp']) >= low && ms(e['timestamp']) < edge));
    const next = await keys(`/v1/events?limit=100&timestamp[gte]=${iso(edge)}&timestamp[lt]=${iso(edge + DAY)}`);
    expect(next).toEqual(truth('events', (e) => ms(e['timestamp']) >= edge && ms(e['timestamp']) < edge + DAY));
    const atEdge = [...next].filter((k) => events.some((e) => keyOf(e) === k && ms(e['timestamp']) === edge));
    expect(atEdge.length).toBe(counts.get(edge));
    for (const k of got) expect(next.has(k)).toBe(false);
  });

  it('supports timestamp[gt] and timestamp[lte]', async () => {
    const edge = ms(em.snapshot('events', 'default')[500]!['timestamp']);
    const got = await keys(`/v1/events?limit=100&timestamp[gt]=${iso(edge - DAY)}&timestamp[lte]=${iso(edge)}`);
    expect(got).toEqual(truth('events', (e) => ms(e['timestamp']) > edge - DAY && ms(e['timestamp']) <= edge));
    expect(got.size).toBeGreaterThan(0);
  });

  it('refuses unparseable times with 400', async () => {
    for (const value of ['yesterday', '2026-13-45', '1700000000', 'not-a-date']) {
      const reply = await get(em, `/v1/events?timestamp[gte]=${value}`);
      expect(reply.status, value).toBe(400);
      expect((reply.json as ErrorBody).error.code).toBe('invalid_parameter');
    }
    expect((await get(em, '/v1/users?timestamp[lt]=soon')).status).toBe(400);
  });

  it('filters traces on span start (ns converted to ms), users on last_seen, conversations on last_message_at', async () => {
    const spans = em.snapshot('traces', 'default');
    const mid = Number((spans[Math.floor(spans.length / 2)]!['start_time_ns'] as bigint) / 1_000_000n);
    const lower = mid - 5 * DAY;
    const startMs = (r: ApiRecord): number => Number((r['start_time_ns'] as bigint) / 1_000_000n);
    const traces = await keys(`/v1/traces?limit=1000&timestamp[gte]=${iso(lower)}&timestamp[lt]=${iso(mid)}`);
    expect(traces).toEqual(truth('traces', (s) => startMs(s) >= lower && startMs(s) < mid));
    expect(traces.size).toBeGreaterThan(0);

    const users = await keys(`/v1/users?limit=100&timestamp[gte]=${iso(clock.now() - 3 * DAY)}`);
    expect(users).toEqual(truth('users', (u) => ms(u['last_seen']) >= clock.now() - 3 * DAY));
    const convos = await keys(`/v1/conversations?limit=100&timestamp[lt]=${iso(clock.now() - 10 * DAY)}`);
    expect(convos).toEqual(truth('conversations', (c) => ms(c['last_message_at']) < clock.now() - 10 * DAY));
    expect(convos.size).toBeGreaterThan(0);
  });

  it('signals ignore time filters', async () => {
    const got = await keys(`/v1/signals?timestamp[gte]=${iso(clock.now() + DAY)}`);
    expect(got).toEqual(truth('signals', () => true));
  });
});

describe('field filters', () => {
  it('filters events by user_id, event_name, convo_id and signal', async () => {
    const sample = em.snapshot('events', 'default').find((e) => (e['signals'] as unknown[]).length > 0)!;
    const signalId = String((sample['signals'] as { id: string }[])[0]!.id);
    const cases: [string, (e: ApiRecord) => boolean][] = [
      [`user_id=${encodeURIComponent(String(sample['user_id']))}`, (e) => e['user_id'] === sample['user_id']],
      [`event_name=${String(sample['event_name'])}`, (e) => e['event_name'] === sample['event_name']],
      [`convo_id=${String(sample['convo_id'])}`, (e) => e['convo_id'] === sample['convo_id']],
      [`signal=${signalId}`, (e) => (e['signals'] as { id: string }[]).some((s) => s.id === signalId)],
    ];
    for (const [query, keep] of cases) {
      const got = await keys(`/v1/events?limit=100&${query}`);
      expect(got, query).toEqual(truth('events', keep));
      expect(got.size, query).toBeGreaterThan(0);
    }
  });

  it('filters events by properties[key]=value, including nested keys, booleans and numbers', async () => {
    const props = (e: ApiRecord): Record<string, unknown> => e['properties'] as Record<string, unknown>;
    const cases: [string, (e: ApiRecord) => boolean][] = [
      ['properties[plan]=pro', (e) => props(e)['plan'] === 'pro'],
      ['properties[cached]=true', (e) => props(e)['cached'] === true],
      ['properties[retries]=2', (e) => props(e)['retries'] === 2],
      ['properties[app.platform]=ios', (e) => (props(e)['app'] as Record<string, unknown>)['platform'] === 'ios'],
      [
        'properties[plan]=pro&properties[region]=eu-west-1',
        (e) => props(e)['plan'] === 'pro' && props(e)['region'] === 'eu-west-1',
      ],
    ];
    for (const [query, keep] of cases) {
      const got = await keys(`/v1/events?limit=100&${query}`);
      expect(got, query).toEqual(truth('events', keep));
      expect(got.size, query).toBeGreaterThan(0);
    }
    expect((await keys('/v1/events?properties[plan]=platinum')).size).toBe(0);
  });

  it('combines filters across the all-projects view', async () => {
    const got = await keys('/v1/events?limit=100&event_name=feedback&properties[plan]=free', '*');
    const expected = new Set(
      em
        .snapshot('events')
        .filter(
          (e) => e['event_name'] === 'feedback' && (e['properties'] as Record<string, unknown>)['plan'] === 'free',
        )
        .map((e) => keyOf(e)),
    );
    expect(got).toEqual(expected);
  });

  it('filters traces by event_id, trace_id, span_id, span_type and status', async () => {
    const spans = em.snapshot('traces', 'default');
    const child = spans.find((s) => s['parent_span_id'] !== null)!;
    const cases: [string, (s: ApiRecord) => boolean][] = [
      [`trace_id=${String(child['trace_id'])}`, (s) => s['trace_id'] === child['trace_id']],
      [`span_id=${String(child['span_id'])}`, (s) => s['span_id'] === child['span_id']],
      ['span_type=TOOL_CALL', (s) => s['span_type'] === 'TOOL_CALL'],
      ['status=ERROR', (s) => s['status'] === 'ERROR'],
      ['span_type=LLM_GENERATION&status=OK', (s) => s['span_type'] === 'LLM_GENERATION' && s['status'] === 'OK'],
    ];
    for (const [query, keep] of cases) {
      const got = await keys(`/v1/traces?limit=1000&${query}`);
      expect(got, query).toEqual(truth('traces', keep));
      expect(got.size, query).toBeGreaterThan(0);
    }
    // By event: the spans of that event in one answer, with no cursor (the SDK's shape).
    const byEvent = async (eventId: string): Promise<Set<string>> => {
      const reply = await get(em, `/v1/traces?event_id=${encodeURIComponent(eventId)}`);
      expect(reply.status).toBe(200);
      const body = reply.json as { data: ApiRecord[]; meta?: unknown };
      expect(body.meta).toBeUndefined();
      return new Set(body.data.map((s) => keyOf(s, 'default')));
    };
    const ofEvent = await byEvent(String(child['event_id']));
    expect(ofEvent).toEqual(truth('traces', (s) => s['event_id'] === child['event_id']));
    expect(ofEvent.size).toBeGreaterThan(1);
    expect((await byEvent('no-such-event')).size).toBe(0);
  });

  it('filters users and conversations by user_id', async () => {
    const convo = em.snapshot('conversations', 'alpha')[3]!;
    const userId = String(convo['user_id']);
    const users = await keys(`/v1/users?user_id=${encodeURIComponent(userId)}`, 'alpha');
    expect(users).toEqual(new Set([`alpha|${userId}`]));
    const convos = await keys(`/v1/conversations?limit=100&user_id=${encodeURIComponent(userId)}`, 'alpha');
    expect(convos).toEqual(truth('conversations', (c) => c['user_id'] === userId, 'alpha'));
    expect(convos.size).toBeGreaterThan(0);
  });
});
