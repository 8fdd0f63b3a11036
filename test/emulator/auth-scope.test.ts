import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type Emulator } from '../../emulator/index.js';
import { get, type ErrorBody, type ListBody } from './helpers.js';

const ALL_ENDPOINTS = [
  '/v1/events',
  '/v1/events/search?query=a&timestamp[gte]=2026-01-01T00:00:00Z',
  '/v1/events/count',
  '/v1/events/timeseries',
  '/v1/events/facets?field=event_name',
  '/v1/events/some-id',
  '/v1/traces',
  '/v1/signals',
  '/v1/signals/some-id',
  '/v1/signal-groups',
  '/v1/signal-groups/some-id',
  '/v1/signal-groups/some-id/signals',
  '/v1/users',
  '/v1/users/some-id',
  '/v1/conversations',
  '/v1/conversations/some-id',
];

describe('authentication', () => {
  let em: Emulator;
  beforeAll(async () => {
    em = await startEmulator({ eventsPerProject: 50 });
  });
  afterAll(() => em.close());

  it('accepts the org key', async () => {
    const reply = await get(em, '/v1/events');
    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toMatch(/application\/json/);
  });

  it('refuses the write key with 401 naming the write key', async () => {
    const reply = await get(em, '/v1/events', { key: em.writeKey });
    expect(reply.status).toBe(401);
    expect(reply.json).toEqual({
      error: {
        code: 'invalid_api_key',
        message: 'The write key is not accepted by the Query API; use the Organization API Key',
      },
    });
  });

  it('refuses a missing, unknown or non-bearer key with 401 on every endpoint', async () => {
    for (const path of ALL_ENDPOINTS) {
      const missing = await get(em, path, { key: null });
      expect(missing.status, path).toBe(401);
      expect((missing.json as ErrorBody).error.code).toBe('missing_api_key');
      const unknown = await get(em, path, { key: 'qs_org_wrong' });
      expect(unknown.status, path).toBe(401);
      expect((unknown.json as ErrorBody).error.code).toBe('invalid_api_key');
    }
    const basic = await get(em, '/v1/events', { key: null, headers: { authorization: `Basic ${em.apiKey}` } });
    expect(basic.status).toBe(401);
  });

  it('answers only GET: other methods get 405', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      const reply = await get(em, '/v1/events', { method });
      expect(reply.status, method).toBe(405);
      expect(reply.headers['allow']).toBe('GET');
      expect((reply.json as ErrorBody).error.code).toBe('method_not_allowed');
    }
  });

  it('answers 404 with a JSON error for unknown paths and missing ids', async () => {
    const path = await get(em, '/v2/events');
    expect(path.status).toBe(404);
    expect((path.json as ErrorBody).error.code).toBe('not_found');
    for (const p of ['/v1/events/nope', '/v1/signals/nope', '/v1/users/nope', '/v1/conversations/nope']) {
      const reply = await get(em, p);
      expect(reply.status, p).toBe(404);
      expect((reply.json as ErrorBody).error.code).toBe('not_found');
    }
  });
});

describe('project scope', () => {
  let em: Emulator;
  beforeAll(async () => {
    em = await startEmulator({ eventsPerProject: 60 });
  });
  afterAll(() => em.close());

  const ids = (body: ListBody): string[] => body.data.map((r) => String(r['id']));

  it('reads `default` when the header is absent, and the named project otherwise', async () => {
    const absent = (await get(em, '/v1/events?limit=100')).json as ListBody;
    const explicit = (await get(em, '/v1/events?limit=100', { project: 'default' })).json as ListBody;
    const alpha = (await get(em, '/v1/events?limit=100', { project: 'alpha' })).json as ListBody;
    const truthDefault = em.snapshot('events', 'default').map((r) => String(r['id']));
    const truthAlpha = em.snapshot('events', 'alpha').map((r) => String(r['id']));
    expect(new Set(ids(absent))).toEqual(new Set(truthDefault));
    expect(ids(explicit)).toEqual(ids(absent));
    expect(new Set(ids(alpha))).toEqual(new Set(truthAlpha));
    expect(ids(alpha)).not.toEqual(ids(absent));
  });

  it('rows of single-project reads carry no project_id; rows of `*` reads all do', async () => {
    const single = (await get(em, '/v1/events', { project: 'alpha' })).json as ListBody;
    expect(single.data.length).toBeGreaterThan(0);
    for (const row of single.data) expect(row).not.toHaveProperty('project_id');

    for (const path of [
      '/v1/events?limit=100',
      '/v1/users?limit=100',
      '/v1/conversations?limit=100',
      `/v1/events/search?query=e&timestamp[gte]=${new Date(Date.now() - 13 * 86_400_000).toISOString()}&limit=100`,
    ]) {
      const all = (await get(em, path, { project: '*' })).json as ListBody;
      expect(all.data.length, path).toBeGreaterThan(0);
      const projects = new Set(all.data.map((r) => r['project_id']));
      for (const row of all.data) expect(['default', 'alpha', 'beta'], path).toContain(row['project_id']);
      expect(projects.size, path).toBeGreaterThan(1);
    }
  });

  it('narrows `*` with project_ids, and refuses an unknown or archived slug there with 403', async () => {
    const narrowed = (await get(em, '/v1/events?limit=100&project_ids=alpha,beta', { project: '*' })).json as ListBody;
    expect(new Set(narrowed.data.map((r) => r['project_id']))).toEqual(new Set(['alpha', 'beta']));
    const count = (await get(em, '/v1/events/count?project_ids=alpha', { project: '*' })).json as {
      data: { total: number };
    };
    expect(count.data.total).toBe(em.snapshot('events', 'alpha').length);
    for (const bad of ['alpha,legacy', 'nosuch']) {
      const reply = await get(em, `/v1/events?project_ids=${bad}`, { project: '*' });
      expect(reply.status, bad).toBe(403);
    }
    expect((await get(em, '/v1/events?project_ids=Bad!', { project: '*' })).status).toBe(400);
  });

  it('answers 403 for archived and unknown projects, 400 for malformed slugs', async () => {
    const archived = await get(em, '/v1/events', { project: 'legacy' });
    expect(archived.status).toBe(403);
    expect((archived.json as ErrorBody).error.code).toBe('project_archived');
    const unknown = await get(em, '/v1/events', { project: 'no-such-project' });
    expect(unknown.status).toBe(403);
    for (const malformed of ['Alpha', '-alpha', 'a b', 'a'.repeat(64), 'ä', '']) {
      const reply = await get(em, '/v1/events', { project: malformed });
      expect(reply.status, JSON.stringify(malformed)).toBe(400);
      expect((reply.json as ErrorBody).error).toHaveProperty('code');
    }
  });

  it('accepts `*` on list events, search, count, timeseries, facets, users and conversations', async () => {
    const gte = new Date(Date.now() - 10 * 86_400_000).toISOString();
    for (const path of [
      '/v1/events',
      `/v1/events/search?query=a&timestamp[gte]=${gte}`,
      '/v1/events/count',
      '/v1/events/timeseries?interval=day',
      '/v1/events/facets?field=user_id',
      '/v1/users',
      '/v1/conversations',
    ]) {
      expect((await get(em, path, { project: '*' })).status, path).toBe(200);
    }
  });

  it('rejects `*` with 400 on single-record gets, traces and signals', async () => {
    const event = em.snapshot('events', 'default')[0]!;
    for (const path of [
      `/v1/events/${String(event['id'])}`,
      '/v1/traces',
      '/v1/signals',
      '/v1/signals/x',
      '/v1/signal-groups',
      '/v1/signal-groups/x',
      '/v1/signal-groups/x/signals',
      '/v1/users/x',
      '/v1/conversations/x',
    ]) {
      const reply = await get(em, path, { project: '*' });
      expect(reply.status, path).toBe(400);
      expect((reply.json as ErrorBody).error.code).toBe('all_projects_not_supported');
    }
  });

  it('single-record gets read the project of the header', async () => {
    const event = em.snapshot('events', 'beta')[0]!;
    const id = encodeURIComponent(String(event['id']));
    const inBeta = await get(em, `/v1/events/${id}`, { project: 'beta' });
    expect(inBeta.status).toBe(200);
    const { project_id: _ignored, ...expected } = event;
    expect((inBeta.json as { data: unknown }).data).toEqual(JSON.parse(JSON.stringify(expected)));
  });

  it('matches the project header name case-insensitively and honours a custom name', async () => {
    const lower = await get(em, '/v1/events', { headers: { 'x-service-project-id': 'legacy' } });
    expect(lower.status).toBe(403);
    const raindrop = await startEmulator({ eventsPerProject: 5, projectHeader: 'X-Raindrop-Project-Id' });
    try {
      expect((await get(raindrop, '/v1/events', { headers: { 'X-RAINDROP-PROJECT-ID': 'legacy' } })).status).toBe(403);
      // The default header name means nothing to this instance: absent header, so `default`.
      expect((await get(raindrop, '/v1/events', { headers: { [`X-Service-Project-Id`]: 'legacy' } })).status).toBe(200);
    } finally {
      await raindrop.close();
    }
  });
});
