import { afterEach, describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { traces } from '../../connectors/traces.js';
import { users } from '../../connectors/users.js';
import { readsByParent } from '../../src/sync/traces/probe.js';
import { StateStore } from '../../src/state/store.js';
import { json, startServer } from '../fakes/bad-server.js';
import { readTable, statePathOf, syncOnce } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

describe('differences between the spec and the real service, found from the answers', () => {
  it('a 400 naming a parameter we sent says which resource, which parameter, the value sent and what the server allows', async () => {
    const server = await startServer({
      '/v1/users': (_req, _url, res) =>
        json(res, 400, {
          error: {
            code: 'invalid_parameter',
            message: 'Unknown filter',
            details: { field: 'last_seen[gte]', allowed_fields: ['first_seen[gte]', 'user_id'] },
          },
        }),
    });
    closers.push(server.close);
    const summary = await syncOnce({ baseUrl: server.url, apiKey: 'k', dir: dir(), resources: [users] });
    const message = summary.streams[0]?.error?.message ?? '';
    expect(summary.ok).toBe(false);
    expect(message).toContain('resource users');
    expect(message).toContain('"last_seen[gte]"=1970-01-01T00:00:00.000Z');
    expect(message).toContain('the server allows: first_seen[gte], user_id');
  });

  it('a server whose traces need event_id is recognised once (kept in state), with both project headers sent', async () => {
    const headers: string[] = [];
    const span = {
      span_id: 's1',
      trace_id: 't1',
      start_time_ns: 1_767_225_600_000_000_001n.toString(),
      end_time_ns: null,
      duration_ns: null,
    };
    const server = await startServer({
      '/v1/events': (req, _url, res) => {
        headers.push(`${String(req.headers['x-raindrop-project-id'])}|${String(req.headers['x-service-project-id'])}`);
        json(res, 200, {
          data: [{ id: 'e1', timestamp: '2026-01-01T00:00:00Z', model: 'm' }],
          meta: { cursor: null, has_more: false },
        });
      },
      '/v1/traces': (_req, url, res) => {
        const id = url.searchParams.get('event_id');
        if (id === null)
          return json(res, 400, {
            error: { code: 'missing_parameter', message: 'event_id is required', details: { field: 'event_id' } },
          });
        return json(res, 200, { data: id === 'e1' ? [span] : [] });
      },
    });
    closers.push(server.close);
    const d = dir();
    const first = await syncOnce({
      baseUrl: server.url,
      apiKey: 'k',
      dir: d,
      project: 'alpha',
      resources: [events, traces],
    });
    expect(first.ok, JSON.stringify(first.streams.map((s) => s.error?.message))).toBe(true);
    expect(headers[0]).toBe('alpha|alpha');
    expect(readsByParent(await StateStore.read(statePathOf(d)), traces)).toBe(true);
    const rows = await readTable(d, 'traces');
    expect(rows.map((r) => [r.span_id, r.event_id, r.project_id])).toEqual([['s1', 'e1', 'alpha']]);
    expect(server.hits.get('/v1/traces')).toBe(2); // the probe, then e1

    await syncOnce({ baseUrl: server.url, apiKey: 'k', dir: d, project: 'alpha', resources: [events, traces] });
    expect(server.hits.get('/v1/traces')).toBe(2); // no second probe; e1 is done
  });

  it('a server that lists traces by time is recorded as such and walked by window', async () => {
    const emu = await emulator({ seed: 25, eventsPerProject: 50 });
    const d = dir();
    const summary = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [events, traces] });
    expect(summary.ok).toBe(true);
    expect(readsByParent(await StateStore.read(statePathOf(d)), traces)).toBe(false);
    expect((await readTable(d, 'traces')).length).toBe(emu.snapshot('traces', 'default').length);
  });
});
