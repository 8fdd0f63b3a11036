import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator, type ApiRecord, type Emulator, type EmulatorOptions } from '../../emulator/index.js';
import { get, iso, keyOf, manualClock, walkAll, type ErrorBody } from './helpers.js';

const DAY = 86_400_000;
const ENRICHED = ['signals', 'topics', 'input_attachments', 'error_spans', 'tool_calls'] as const;
let open: Emulator[] = [];
afterEach(async () => {
  await Promise.all(open.map((e) => e.close()));
  open = [];
});
async function start(options: EmulatorOptions): Promise<Emulator> {
  const em = await startEmulator(options);
  open.push(em);
  return em;
}
const ms = (value: unknown): number => Date.parse(String(value));
const ids = (rows: readonly Record<string, unknown>[], project?: string): Set<string> =>
  new Set(rows.map((r) => keyOf(r, project)));

describe('real flavor: project header', () => {
  it('reads X-Raindrop-Project-Id, and ignores the spec header (the read goes to default)', async () => {
    const em = await start({ flavor: 'real', eventsPerProject: 60 });
    expect(em.projectHeader).toBe('X-Raindrop-Project-Id');
    const alpha = await walkAll(em, '/v1/events?limit=100', { project: 'alpha' });
    expect(ids(alpha.rows, 'alpha')).toEqual(ids(em.snapshot('events', 'alpha')));
    const viaSpecHeader = await get(em, '/v1/events?limit=100', { headers: { 'X-Service-Project-Id': 'alpha' } });
    expect(viaSpecHeader.status).toBe(200);
    const rows = (viaSpecHeader.json as { data: Record<string, unknown>[] }).data;
    expect(ids(rows, 'default')).toEqual(ids(em.snapshot('events', 'default')));
  });

  it('on the spec flavor, the real header is the ignored one', async () => {
    const em = await start({ eventsPerProject: 30 });
    const reply = await get(em, '/v1/events?limit=100', { headers: { 'X-Raindrop-Project-Id': 'beta' } });
    expect(ids((reply.json as { data: Record<string, unknown>[] }).data, 'default')).toEqual(
      ids(em.snapshot('events', 'default')),
    );
  });
});

describe('real flavor: traces by event', () => {
  it('answers 400 naming event_id without it, and the spans of one event (no meta) with it', async () => {
    const em = await start({ flavor: 'real', eventsPerProject: 80 });
    const missing = await get(em, '/v1/traces?timestamp[gte]=2026-01-01T00:00:00Z');
    expect(missing.status).toBe(400);
    expect((missing.json as ErrorBody).error.details?.field).toBe('event_id');
    const spans = em.snapshot('traces', 'default');
    expect(spans.every((s) => !('event_id' in s))).toBe(true);
    const owned = em.snapshot('traces', 'default', { spanEventId: true });
    const events = em.snapshot('events', 'default');
    let withSpans = 0;
    let total = 0;
    for (const event of events) {
      const reply = await get(em, `/v1/traces?event_id=${encodeURIComponent(String(event['id']))}`);
      expect(reply.status).toBe(200);
      const body = reply.json as { data: Record<string, unknown>[]; meta?: unknown };
      expect(body.meta).toBeUndefined();
      expect(ids(body.data, 'default')).toEqual(ids(owned.filter((s) => s['event_id'] === event['id'])));
      if (body.data.length > 0) withSpans++;
      total += body.data.length;
    }
    expect(withSpans).toBeGreaterThan(0);
    expect(total).toBe(spans.length);
  });

  it('cuts input and output to trunc_len and honours limit', async () => {
    const em = await start({ flavor: 'real', eventsPerProject: 40 });
    const event = em.snapshot('events', 'default').find((e) => (e['error_spans'] as unknown[]).length > 0)!;
    const full = (await get(em, `/v1/traces?event_id=${encodeURIComponent(String(event['id']))}`)).json as {
      data: Record<string, unknown>[];
    };
    const cut = (await get(em, `/v1/traces?event_id=${encodeURIComponent(String(event['id']))}&trunc_len=3&limit=1`))
      .json as { data: Record<string, unknown>[] };
    expect(cut.data.length).toBe(Math.min(1, full.data.length));
    if (full.data[0]) {
      expect(cut.data[0]!['input']).toBe(String(full.data[0]['input']).slice(0, 3));
      expect(cut.data[0]!['output']).toBe(String(full.data[0]['output']).slice(0, 3));
    }
  });
});

describe('filters of the real service (both flavors)', () => {
  for (const flavor of ['spec', 'real'] as const) {
    it(`${flavor}: users by first_seen[...] and last_seen[...], conversations by started_at[...]`, async () => {
      const clock = manualClock();
      const em = await start({ flavor, eventsPerProject: 2000, now: clock.now });
      const users = em.snapshot('users', 'default');
      // A window holding some users' last_seen and not others'.
      const seen = users.map((u) => ms(u['last_seen'])).sort((a, b) => a - b);
      const since = seen[Math.floor(seen.length / 4)]!;
      const until = seen[Math.floor(seen.length / 2)]!;
      const lastSeen = await walkAll(
        em,
        `/v1/users?limit=100&last_seen[gte]=${iso(since)}&last_seen[lt]=${iso(until)}`,
      );
      const expectLast = users.filter((u) => ms(u['last_seen']) >= since && ms(u['last_seen']) < until);
      expect(ids(lastSeen.rows, 'default')).toEqual(ids(expectLast));
      expect(expectLast.length).toBeGreaterThan(0);
      const firsts = users.map((u) => ms(u['first_seen'])).sort((a, b) => a - b);
      const firstSince = firsts[Math.floor(firsts.length / 2)]!;
      const firstSeen = await walkAll(em, `/v1/users?limit=100&first_seen[gt]=${iso(firstSince)}`);
      const expectFirst = users.filter((u) => ms(u['first_seen']) > firstSince);
      expect(ids(firstSeen.rows, 'default')).toEqual(ids(expectFirst));
      expect(expectFirst.length).toBeLessThan(users.length);
      expect(expectFirst.length).toBeGreaterThan(0);

      const convos = em.snapshot('conversations', 'default');
      const started = await walkAll(
        em,
        `/v1/conversations?limit=100&started_at[gte]=${iso(since)}&started_at[lte]=${iso(until)}`,
      );
      const expectStarted = convos.filter((c) => ms(c['started_at']) >= since && ms(c['started_at']) <= until);
      expect(ids(started.rows, 'default')).toEqual(ids(expectStarted));
      expect(expectStarted.length).toBeGreaterThan(0);
      // Most recent message first by default, and with the SDK's default order_by=-timestamp.
      for (const query of ['', '&order_by=-timestamp', '&order_by=-last_message_at']) {
        const walked = (await walkAll(em, `/v1/conversations?limit=100${query}`)).rows.map((c) =>
          ms(c['last_message_at']),
        );
        expect(walked.length).toBe(convos.length);
        for (let i = 1; i < walked.length; i++) expect(walked[i]!).toBeLessThanOrEqual(walked[i - 1]!);
      }

      // timestamp[...]: a window on last_seen / last_message_at on the spec flavor, ignored on the real one.
      const byTimestamp = await walkAll(em, `/v1/users?limit=100&timestamp[gte]=${iso(since)}`);
      const convosByTimestamp = await walkAll(em, `/v1/conversations?limit=100&timestamp[gte]=${iso(since)}`);
      if (flavor === 'real') {
        expect(byTimestamp.rows.length).toBe(users.length);
        expect(convosByTimestamp.rows.length).toBe(convos.length);
      } else {
        expect(ids(byTimestamp.rows, 'default')).toEqual(ids(users.filter((u) => ms(u['last_seen']) >= since)));
        expect(ids(convosByTimestamp.rows, 'default')).toEqual(
          ids(convos.filter((c) => ms(c['last_message_at']) >= since)),
        );
        expect(byTimestamp.rows.length).toBeLessThan(users.length);
      }
    });
  }

  it('facets take timestamp.gte and timestamp.lt', async () => {
    const clock = manualClock();
    const em = await start({ flavor: 'real', eventsPerProject: 300, now: clock.now });
    const since = clock.now() - 7 * DAY;
    const until = clock.now() - DAY;
    const reply = await get(
      em,
      `/v1/events/facets?field=event_name&timestamp.gte=${iso(since)}&timestamp.lt=${iso(until)}`,
    );
    const facets = (reply.json as { data: { value: string; count: number }[] }).data;
    const events = em
      .snapshot('events', 'default')
      .filter((e) => ms(e['timestamp']) >= since && ms(e['timestamp']) < until);
    expect(facets.reduce((n, f) => n + f.count, 0)).toBe(events.length);
    for (const { value, count } of facets) expect(count).toBe(events.filter((e) => e['event_name'] === value).length);
    const all = (await get(em, '/v1/events/facets?field=event_name')).json as { data: { count: number }[] };
    expect(all.data.reduce((n, f) => n + f.count, 0)).toBeGreaterThan(events.length);
  });

  it('count_by counts distinct users and conversations', async () => {
    const em = await start({ flavor: 'real', eventsPerProject: 200 });
    const events = em.snapshot('events', 'default');
    const total = async (q: string): Promise<number> =>
      ((await get(em, `/v1/events/count${q}`)).json as { data: { total: number } }).data.total;
    expect(await total('')).toBe(events.length);
    expect(await total('?count_by=user_id')).toBe(new Set(events.map((e) => e['user_id'])).size);
    expect(await total('?count_by=convo_id')).toBe(new Set(events.map((e) => e['convo_id'])).size);
    const bad = await get(em, '/v1/events/count?count_by=model');
    expect(bad.status).toBe(400);
    expect((bad.json as ErrorBody).error.details).toEqual({
      field: 'count_by',
      allowed_fields: ['event_id', 'user_id', 'convo_id'],
    });
  });
});

describe('late enrichment (real flavor)', () => {
  it('serves new events without signals/topics/attachments/error_spans/tool_calls until enrichAfterMs, then with them', async () => {
    const clock = manualClock();
    const em = await start({ flavor: 'real', eventsPerProject: 50, now: clock.now, enrichAfterMs: 60_000 });
    const added = em.addEvents('default', 40);
    const byId = new Map(added.map((e) => [String(e['id']), e]));
    // What addEvents returns is the enriched record.
    expect(added.some((e) => (e['signals'] as unknown[]).length > 0)).toBe(true);
    expect(added.some((e) => 'tool_calls' in e && 'topics' in e)).toBe(true);
    const served = async (): Promise<Record<string, unknown>[]> =>
      (await walkAll(em, '/v1/events?limit=100')).rows.filter((r) => byId.has(String(r['id'])));

    const early = await served();
    expect(early.length).toBe(40);
    for (const row of early) {
      for (const field of ENRICHED) expect(row, field).not.toHaveProperty(field);
      expect(row['received_at']).toBe(row['timestamp']);
      const single = (await get(em, `/v1/events/${encodeURIComponent(String(row['id']))}`)).json as {
        data: Record<string, unknown>;
      };
      expect(single.data).not.toHaveProperty('signals');
    }
    const matched = added.find((e) => (e['signals'] as { id: string }[]).length > 0)!;
    const signalId = (matched['signals'] as { id: string }[])[0]!.id;
    const bySignal = async (): Promise<Set<string>> =>
      new Set((await walkAll(em, `/v1/events?limit=100&signal=${signalId}`)).rows.map((r) => String(r['id'])));
    expect((await bySignal()).has(String(matched['id']))).toBe(false);

    clock.advance(59_999);
    expect((await served()).every((r) => !('signals' in r))).toBe(true);
    clock.advance(1);
    const late = await served();
    for (const row of late) {
      const { project_id: _project, ...truth } = byId.get(String(row['id']))!;
      expect(row).toEqual(truth);
      expect(row['timestamp']).toBe(truth['timestamp']);
    }
    expect(late.some((r) => (r['error_spans'] as unknown[]).length > 0 || 'input_attachments' in r)).toBe(true);
    expect((await bySignal()).has(String(matched['id']))).toBe(true);
  });

  it('is off on the spec flavor and with enrichAfterMs 0', async () => {
    for (const options of [{}, { flavor: 'real' as const, enrichAfterMs: 0 }]) {
      const em = await start({ ...options, eventsPerProject: 20 });
      const added = em.addEvents('default', 5);
      const rows = (await walkAll(em, '/v1/events?limit=100')).rows.filter((r) =>
        added.some((a) => a['id'] === r['id']),
      );
      expect(rows.length).toBe(5);
      for (const row of rows) expect(row).toHaveProperty('signals');
    }
  });
});

describe('signal groups', () => {
  it('lists groups, gets one, lists its signals; signals carry group_id, group_name and sentiment', async () => {
    const em = await start({ flavor: 'real', eventsPerProject: 20 });
    const groups = (await walkAll(em, '/v1/signal-groups?limit=2', { project: 'alpha' })).rows;
    expect(ids(groups, 'alpha')).toEqual(ids(em.snapshot('signal_groups', 'alpha')));
    expect(groups.length).toBeGreaterThan(2);
    const signals = em.snapshot('signals', 'alpha');
    for (const s of signals) {
      expect(['NEGATIVE', 'POSITIVE', 'NEUTRAL']).toContain(s['sentiment']);
      expect(s).toHaveProperty('group_id');
      expect(s).toHaveProperty('group_name');
    }
    for (const group of groups) {
      const one = await get(em, `/v1/signal-groups/${String(group['id'])}`, { project: 'alpha' });
      expect((one.json as { data: unknown }).data).toEqual(group);
      const members = (
        await walkAll(em, `/v1/signal-groups/${String(group['id'])}/signals?limit=2`, { project: 'alpha' })
      ).rows;
      const expected = signals.filter((s) => s['group_id'] === group['id']);
      expect(ids(members, 'alpha')).toEqual(ids(expected));
      expect(group['signal_count']).toBe(expected.length);
      for (const m of members) expect(m['group_name']).toBe(group['name']);
    }
    expect(signals.some((s) => s['group_id'] === null)).toBe(true);
    expect((await get(em, '/v1/signal-groups/nope', { project: 'alpha' })).status).toBe(404);
    expect((await get(em, '/v1/signal-groups/nope/signals', { project: 'alpha' })).status).toBe(404);
    const star = await get(em, '/v1/signal-groups', { project: '*' });
    expect(star.status).toBe(400);
    expect((star.json as ErrorBody).error.details?.field).toBe('X-Raindrop-Project-Id');
  });

  it('filters events by signal_group (events that matched a signal of the group)', async () => {
    const em = await start({ eventsPerProject: 300 });
    const group = em.snapshot('signal_groups', 'default').find((g) => (g['signal_count'] as number) > 0)!;
    const members = new Set(
      em
        .snapshot('signals', 'default')
        .filter((s) => s['group_id'] === group['id'])
        .map((s) => s['id']),
    );
    const got = (await walkAll(em, `/v1/events?limit=100&signal_group=${String(group['id'])}`)).rows;
    const expected = em
      .snapshot('events', 'default')
      .filter((e) => (e['signals'] as { id: string }[]).some((s) => members.has(s.id)));
    expect(ids(got, 'default')).toEqual(ids(expected));
    expect(expected.length).toBeGreaterThan(0);
  });
});

describe('options', () => {
  it('allProjects: false refuses * everywhere with 400 naming the header', async () => {
    const em = await start({ flavor: 'real', eventsPerProject: 10, allProjects: false });
    for (const path of ['/v1/events', '/v1/users', '/v1/conversations', '/v1/events/count']) {
      const reply = await get(em, path, { project: '*' });
      expect(reply.status, path).toBe(400);
      expect((reply.json as ErrorBody).error.code).toBe('all_projects_not_supported');
      expect((reply.json as ErrorBody).error.details?.field).toBe('X-Raindrop-Project-Id');
    }
    em.configure({ allProjects: true });
    expect((await get(em, '/v1/events', { project: '*' })).status).toBe(200);
  });

  it('latencyMs delays every answer by at least latency − jitter', async () => {
    const em = await start({ eventsPerProject: 10, latencyMs: 150, latencyJitterMs: 0 });
    const t0 = performance.now();
    expect((await get(em, '/v1/events')).status).toBe(200);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(145);
    em.configure({ latencyMs: 0 });
    expect((await get(em, '/v1/events')).status).toBe(200);
  });

  it('error bodies carry details.field and allowed_fields', async () => {
    const em = await start({ eventsPerProject: 10 });
    const reply = await get(em, '/v1/events?order_by=name');
    expect(reply.status).toBe(400);
    expect(reply.json).toEqual({
      error: {
        code: 'invalid_parameter',
        message: 'order_by must be one of "timestamp", "-timestamp", got "name"',
        details: { field: 'order_by', allowed_fields: ['timestamp', '-timestamp'] },
      },
    });
  });

  it('every event carries received_at (its visibility time)', async () => {
    const clock = manualClock();
    const em = await start({ eventsPerProject: 10, now: clock.now });
    const [late] = em.addEvents('default', 1, { lateByMs: 5000 });
    clock.advance(5000);
    const row = (await get(em, `/v1/events/${encodeURIComponent(String(late!['id']))}`)).json as { data: ApiRecord };
    expect(ms(row.data['received_at']) - ms(row.data['timestamp'])).toBe(5000);
  });
});

describe("the SDK's operator filters (deep-object form)", () => {
  it('user_id/event_name/convo_id [eq|neq|startsWith|endsWith|contains], signal[neq], properties[k][gt…], traits[k]', async () => {
    const em = await start({ eventsPerProject: 400 });
    const events = em.snapshot('events', 'default');
    const users = new Map(
      em.snapshot('users', 'default').map((u) => [u['id'], u['traits'] as Record<string, unknown>]),
    );
    const props = (e: ApiRecord): Record<string, unknown> => e['properties'] as Record<string, unknown>;
    const signalId = String(
      (events.find((e) => (e['signals'] as unknown[]).length > 0)!['signals'] as { id: string }[])[0]!.id,
    );
    const cases: [string, (e: ApiRecord) => boolean][] = [
      ['user_id[startsWith]=user_000', (e) => String(e['user_id']).startsWith('user_000')],
      ['user_id[endsWith]=example.com', (e) => String(e['user_id']).endsWith('example.com')],
      ['user_id[contains]=%40', (e) => String(e['user_id']).includes('@')],
      ['event_name[neq]=feedback', (e) => e['event_name'] !== 'feedback'],
      ['event_name[eq]=completion', (e) => e['event_name'] === 'completion'],
      ['convo_id[startsWith]=conv_', () => true],
      [`signal[neq]=${signalId}`, (e) => !(e['signals'] as { id: string }[]).some((s) => s.id === signalId)],
      [`signal[eq]=${signalId}`, (e) => (e['signals'] as { id: string }[]).some((s) => s.id === signalId)],
      ['properties[latency_ms][gte]=2500', (e) => (props(e)['latency_ms'] as number) >= 2500],
      ['properties[retries][lt]=1', (e) => (props(e)['retries'] as number) < 1],
      ['properties[plan][neq]=free', (e) => props(e)['plan'] !== 'free'],
      ['traits[plan][eq]=pro', (e) => users.get(e['user_id'])?.['plan'] === 'pro'],
      ['traits[beta]=true', (e) => users.get(e['user_id'])?.['beta'] === true],
    ];
    for (const [query, keep] of cases) {
      const got = ids((await walkAll(em, `/v1/events?limit=100&${query}`)).rows, 'default');
      const expected = ids(events.filter(keep));
      expect(got, query).toEqual(expected);
      expect(expected.size, query).toBeGreaterThan(0);
      expect(expected.size, query).toBeLessThanOrEqual(events.length);
    }
    const bad = await get(em, '/v1/events?user_id[like]=x');
    expect(bad.status).toBe(400);
    expect((bad.json as ErrorBody).error.details).toEqual({
      field: 'user_id[like]',
      allowed_fields: ['eq', 'neq', 'startsWith', 'endsWith', 'contains'],
    });
  });
});
