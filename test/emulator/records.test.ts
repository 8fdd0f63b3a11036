import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../emulator/index.js';
import { get, list, manualClock, walkAll } from './helpers.js';

const DAY = 86_400_000;
let open: Emulator[] = [];
afterEach(async () => {
  await Promise.all(open.map((e) => e.close()));
  open = [];
});
async function start(...args: Parameters<typeof startEmulator>): Promise<Emulator> {
  const em = await startEmulator(...args);
  open.push(em);
  return em;
}
const ms = (value: unknown): number => Date.parse(String(value));

describe('records', () => {
  it('events carry the documented fields, ISO ms timestamps and nested properties', async () => {
    const em = await start({ eventsPerProject: 400 });
    const { rows } = await walkAll(em, '/v1/events?limit=100');
    for (const row of rows) {
      for (const field of [
        'id',
        'event_name',
        'user_id',
        'convo_id',
        'timestamp',
        'user_input',
        'assistant_output',
        'signals',
        'properties',
        'model',
      ]) {
        expect(row, field).toHaveProperty(field);
      }
      expect(row['timestamp']).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(Array.isArray(row['signals'])).toBe(true);
      expect(typeof row['properties']).toBe('object');
    }
    const withSignal = rows.find((r) => (r['signals'] as unknown[]).length > 0)!;
    expect((withSignal['signals'] as Record<string, unknown>[])[0]).toEqual({
      id: expect.any(String),
      name: expect.any(String),
      score: expect.any(Number),
    });
    const texts = rows.map((r) => `${String(r['user_input'])}${String(r['assistant_output'])}`).join('');
    for (const tricky of ['\n', '\t', '"', '\\', '👋', '你好', '\u2028'])
      expect(texts, JSON.stringify(tricky)).toContain(tricky);
  });

  it('has client-supplied ids that repeat across projects', async () => {
    const em = await start({ eventsPerProject: 300 });
    const ids = (project: string): Set<string> => new Set(em.snapshot('events', project).map((e) => String(e['id'])));
    const [inDefault, inAlpha] = [ids('default'), ids('alpha')];
    const shared = [...inDefault].filter((id) => inAlpha.has(id));
    expect(shared.length).toBeGreaterThan(0);
    for (const id of shared) expect(id).toMatch(/^evt-\d{6}$/);
    const uuids = [...inDefault].filter((id) =>
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id),
    );
    expect(uuids.length / inDefault.size).toBeGreaterThan(0.8);
    const one = await get(em, `/v1/events/${shared[0]!}`, { project: 'alpha' });
    expect(one.status).toBe(200);
  });

  it('clusters timestamps: about a fifth of events share theirs with another event', async () => {
    const em = await start({ eventsPerProject: 5000 });
    const counts = new Map<string, number>();
    for (const e of em.snapshot('events', 'default'))
      counts.set(String(e['timestamp']), (counts.get(String(e['timestamp'])) ?? 0) + 1);
    const sharing = [...counts.values()].filter((n) => n > 1).reduce((a, b) => a + b, 0) / 5000;
    expect(sharing).toBeGreaterThan(0.12);
    expect(sharing).toBeLessThan(0.3);
  });

  it('adds feature_flags and topics only in the newest 30 % of time, and tool_calls on the newest', async () => {
    const clock = manualClock();
    const em = await start({ eventsPerProject: 2000, now: clock.now, historyDays: 30 });
    const events = em.snapshot('events', 'default');
    const cutoff = clock.now() - 0.3 * 30 * DAY;
    for (const e of events) {
      expect('feature_flags' in e, String(e['timestamp'])).toBe(ms(e['timestamp']) >= cutoff);
      expect('topics' in e).toBe(ms(e['timestamp']) >= cutoff);
    }
    const withTools = events.filter((e) => 'tool_calls' in e);
    expect(withTools.length).toBeGreaterThan(0);
    const oldestWithTools = Math.min(...withTools.map((e) => ms(e['timestamp'])));
    expect(events.filter((e) => ms(e['timestamp']) > oldestWithTools).every((e) => 'tool_calls' in e)).toBe(true);
    const added = em.addEvents('default', 3);
    for (const e of added) {
      expect(e).toHaveProperty('tool_calls');
      expect(e['project_id']).toBe('default');
      expect(ms(e['timestamp'])).toBe(clock.now());
    }
  });

  it('serializes nanosecond epochs as exact integers with non-zero sub-millisecond digits', async () => {
    const em = await start({ eventsPerProject: 200 });
    const truth = em.snapshot('traces', 'default');
    const reply = await get(em, '/v1/traces?limit=1000');
    expect(reply.status).toBe(200);
    const fields = [...reply.text.matchAll(/"(start_time_ns|end_time_ns|duration_ns)":(-?\d+)/g)];
    expect(fields.length).toBe(truth.length * 3);
    const byId = new Map(truth.map((s) => [String(s['span_id']), s]));
    const spanIds = [...reply.text.matchAll(/"span_id":"([0-9a-f]+)"/g)].map((m) => m[1]!);
    for (const [i, spanId] of spanIds.entries()) {
      const span = byId.get(spanId)!;
      const start = reply.text.match(
        new RegExp(`"span_id":"${spanId}"[^}]*?"start_time_ns":(\\d+),"end_time_ns":(\\d+),"duration_ns":(\\d+)`),
      )!;
      expect(BigInt(start[1]!), `span ${i}`).toBe(span['start_time_ns']);
      expect(BigInt(start[2]!)).toBe(span['end_time_ns']);
      expect(BigInt(start[2]!) - BigInt(start[1]!)).toBe(BigInt(start[3]!));
      expect(start[1]!.length).toBe(19);
      expect(BigInt(start[1]!) > 2n ** 53n).toBe(true);
      expect(start[1]!.slice(-6)).not.toBe('000000');
      expect(start[1]!.endsWith('0')).toBe(false);
      // JSON.parse would round it: the test would catch a server that sent a float.
      expect(BigInt(Math.round(Number(start[1])))).not.toBe(BigInt(start[1]!));
    }
  });

  it('spans carry the documented fields; span_id is unique per project and roots have no parent', async () => {
    const em = await start({ eventsPerProject: 300 });
    const spans = em.snapshot('traces', 'default');
    const events = em.snapshot('events', 'default');
    expect(spans.length).toBeGreaterThan(events.length * 0.3);
    expect(new Set(spans.map((s) => s['span_id'])).size).toBe(spans.length);
    const eventIds = new Set(events.map((e) => e['id']));
    for (const s of spans) {
      for (const f of [
        'trace_id',
        'span_id',
        'parent_span_id',
        'span_name',
        'span_type',
        'status',
        'start_time_ns',
        'end_time_ns',
        'duration_ns',
        'input',
        'output',
        'input_tokens',
        'output_tokens',
        'total_tokens',
        'model',
        'provider',
        'attributes',
        'event_id',
      ]) {
        expect(s, f).toHaveProperty(f);
      }
      expect(eventIds.has(s['event_id'])).toBe(true);
      expect(s['total_tokens']).toBe((s['input_tokens'] as number) + (s['output_tokens'] as number));
    }
    const perTrace = new Map<unknown, number>();
    for (const s of spans)
      if (s['parent_span_id'] === null) perTrace.set(s['trace_id'], (perTrace.get(s['trace_id']) ?? 0) + 1);
    for (const n of perTrace.values()) expect(n).toBe(1);
  });

  it('signals: about eight per project with the documented fields', async () => {
    const em = await start({ eventsPerProject: 50 });
    const body = await list(em, '/v1/signals');
    expect(body.data.length).toBe(8);
    for (const s of body.data) {
      expect(['topic', 'regex', 'instrumented', 'metric', 'code']).toContain(s['type']);
      for (const f of ['id', 'name', 'description', 'created_at']) expect(s).toHaveProperty(f);
    }
    const one = await get(em, `/v1/signals/${String(body.data[0]!['id'])}`);
    expect((one.json as { data: unknown }).data).toEqual(body.data[0]);
  });

  it('derives users and conversations from events and updates them when events are added', async () => {
    const clock = manualClock();
    const em = await start({ eventsPerProject: 500, now: clock.now });
    const events = em.snapshot('events', 'default');
    const users = em.snapshot('users', 'default');
    const convos = em.snapshot('conversations', 'default');
    expect(users.reduce((n, u) => n + (u['event_count'] as number), 0)).toBe(events.length);
    expect(convos.reduce((n, c) => n + (c['message_count'] as number), 0)).toBe(events.length);
    for (const u of users) {
      const mine = events.filter((e) => e['user_id'] === u['id']).map((e) => ms(e['timestamp']));
      expect(ms(u['first_seen'])).toBe(Math.min(...mine));
      expect(ms(u['last_seen'])).toBe(Math.max(...mine));
      expect(u['traits']).toEqual(expect.objectContaining({ name: expect.any(String) }));
    }

    clock.advance(60_000);
    const [added] = em.addEvents('default', 1);
    const userId = String(added!['user_id']);
    const user = (await get(em, `/v1/users/${encodeURIComponent(userId)}`)).json as { data: Record<string, unknown> };
    expect(ms(user.data['last_seen'])).toBe(clock.now());
    const before = users.find((u) => u['id'] === userId);
    expect(user.data['event_count']).toBe(((before?.['event_count'] as number | undefined) ?? 0) + 1);
    const convo = (await get(em, `/v1/conversations/${String(added!['convo_id'])}`)).json as {
      data: Record<string, unknown>;
    };
    expect(ms(convo.data['last_message_at'])).toBe(clock.now());
    const newest = await list(em, '/v1/users?limit=1');
    expect(newest.data[0]!['id']).toBe(userId);
  });

  it('returns copies: mutating snapshot or addEvents results changes nothing', async () => {
    const em = await start({ eventsPerProject: 50 });
    const first = em.snapshot('events', 'default');
    const target = first[0]!;
    (target['properties'] as Record<string, unknown>)['plan'] = 'mutated';
    (target as Record<string, unknown>)['user_input'] = 'mutated';
    const again = em.snapshot('events', 'default')[0]!;
    expect(again['user_input']).not.toBe('mutated');
    expect((again['properties'] as Record<string, unknown>)['plan']).not.toBe('mutated');
    const [added] = em.addEvents('default', 1);
    (added as Record<string, unknown>)['event_name'] = 'mutated';
    const served = (await get(em, `/v1/events/${String(added!['id'])}`)).json as { data: Record<string, unknown> };
    expect(served.data['event_name']).not.toBe('mutated');
  });

  it('is deterministic for a seed and clock, and differs for another seed', async () => {
    const clock = manualClock();
    const a = await start({ seed: 7, eventsPerProject: 300, now: clock.now });
    const b = await start({ seed: 7, eventsPerProject: 300, now: clock.now });
    const c = await start({ seed: 8, eventsPerProject: 300, now: clock.now });
    for (const resource of ['events', 'traces', 'signals', 'users', 'conversations']) {
      expect(a.snapshot(resource), resource).toEqual(b.snapshot(resource));
    }
    expect((await get(a, '/v1/traces?limit=1000')).text).toBe((await get(b, '/v1/traces?limit=1000')).text);
    expect(a.addEvents('alpha', 5)).toEqual(b.addEvents('alpha', 5));
    expect(a.snapshot('events')).not.toEqual(c.snapshot('events'));
  });
});
