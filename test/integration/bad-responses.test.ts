import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { users } from '../../connectors/users.js';
import { StateStore } from '../../src/state/store.js';
import { json, startServer } from '../fakes/bad-server.js';
import { readTable, statePathOf, syncOnce } from '../fakes/harness.js';
import { dir, onCleanup } from '../fakes/lifecycle.js';

const ts = (i: number): string => new Date(Date.parse('2026-11-01T00:00:00Z') + i * 1000).toISOString();
const userPage = { data: [{ id: 'u1', last_seen: ts(5) }], meta: { cursor: null, has_more: false } };

describe('bad responses stop only their resource, with a clear error and state unmoved', () => {
  it('a cursor that comes back unchanged', async () => {
    const server = await startServer({
      '/v1/events': (_req, url, res) => {
        const n = url.searchParams.get('cursor') === 'c1' ? 2 : 1;
        json(res, 200, { data: [{ id: `e${n}`, timestamp: ts(n) }], meta: { cursor: 'c1', has_more: true } });
      },
      '/v1/users': (_req, _url, res) => json(res, 200, userPage),
    });
    onCleanup(server.close);
    const d = dir();
    const summary = await syncOnce({
      baseUrl: server.url,
      apiKey: 'k',
      dir: d,
      resources: [events, users],
      batchRows: 1,
    });
    const ev = summary.streams.find((s) => s.resource === 'events');
    expect(ev?.outcome).toBe('failed');
    expect(ev?.error?.message).toMatch(/\[resource events, project default\].*cursor already followed/);
    expect(summary.streams.find((s) => s.resource === 'users')?.outcome).toBe('ok');
    expect(summary.ok).toBe(false);
    // The rows that were stored stay; the mark did not move past the failed walk.
    const doc = await StateStore.read(statePathOf(d));
    expect(doc.streams['events:default']?.mark).toBeUndefined();
    expect(doc.streams['users:default']?.mark).toBeDefined();
    expect((await readTable(d, 'users')).length).toBe(1);
  });

  it('has_more: true with no cursor', async () => {
    const server = await startServer({
      '/v1/events': (_req, _url, res) =>
        json(res, 200, { data: [{ id: 'e1', timestamp: ts(1) }], meta: { cursor: null, has_more: true } }),
    });
    onCleanup(server.close);
    const d = dir();
    const summary = await syncOnce({ baseUrl: server.url, apiKey: 'k', dir: d, resources: [events] });
    expect(summary.streams[0]?.error?.message).toMatch(
      /\[resource events, project default\] expected meta\.cursor with meta\.has_more = true/,
    );
    expect((await StateStore.read(statePathOf(d))).streams['events:default']?.mark).toBeUndefined();
  });

  it('a 200 whose body is HTML, not the documented JSON', async () => {
    const server = await startServer({
      '/v1/events': (_req, _url, res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<html><body>Maintenance</body></html>');
      },
    });
    onCleanup(server.close);
    const d = dir();
    const summary = await syncOnce({ baseUrl: server.url, apiKey: 'k', dir: d, resources: [events] });
    expect(summary.streams[0]?.outcome).toBe('failed');
    expect(summary.streams[0]?.error?.message).toMatch(
      /\[resource events, project default\] expected a JSON body.*got: <html><body>Maintenance/,
    );
    expect((await StateStore.read(statePathOf(d))).streams['events:default']?.mark).toBeUndefined();
  });

  it('a JSON 200 that is not the list envelope', async () => {
    const server = await startServer({ '/v1/events': (_req, _url, res) => json(res, 200, { items: [] }) });
    onCleanup(server.close);
    const summary = await syncOnce({ baseUrl: server.url, apiKey: 'k', dir: dir(), resources: [events] });
    expect(summary.streams[0]?.error?.message).toMatch(/expected the list envelope.*"data" is not an array/);
    expect(server.hits.get('/v1/events')).toBe(1); // not retried: it cannot succeed
  });

  it('a record without its key field', async () => {
    const server = await startServer({
      '/v1/events': (_req, _url, res) =>
        json(res, 200, { data: [{ timestamp: ts(1), event_name: 'x' }], meta: { cursor: null, has_more: false } }),
    });
    onCleanup(server.close);
    const summary = await syncOnce({ baseUrl: server.url, apiKey: 'k', dir: dir(), resources: [events] });
    expect(summary.streams[0]?.error?.message).toMatch(
      /\[resource events, project default\] expected every record to carry its key field "id"/,
    );
  });

  it('retries 5xx and resets, honours Retry-After on 429, and fails fast on a 404', async () => {
    let calls = 0;
    const server = await startServer({
      '/v1/events': (req, _url, res) => {
        calls += 1;
        if (calls === 1) return json(res, 503, { error: { code: 'unavailable', message: 'try later' } });
        if (calls === 2) return req.socket.destroy();
        if (calls === 3) {
          res.writeHead(429, { 'retry-after': '1', 'content-type': 'application/json' });
          return res.end('{"error":{"code":"rate_limited","message":"slow down"}}');
        }
        json(res, 200, { data: [{ id: 'e1', timestamp: ts(1) }], meta: { cursor: null, has_more: false } });
      },
      '/v1/users': (_req, _url, res) => json(res, 404, { error: { code: 'not_found', message: 'no such route' } }),
    });
    onCleanup(server.close);
    const d = dir();
    const started = Date.now();
    const summary = await syncOnce({ baseUrl: server.url, apiKey: 'k', dir: d, resources: [events, users] });
    const ev = summary.streams.find((s) => s.resource === 'events');
    expect(ev?.outcome).toBe('ok');
    expect(ev?.stats.retries).toBe(2);
    expect(ev?.stats.rateLimited).toBe(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000); // waited for Retry-After: 1
    expect((await readTable(d, 'events')).length).toBe(1);
    const us = summary.streams.find((s) => s.resource === 'users');
    expect(us?.outcome).toBe('failed');
    expect(us?.error?.message).toMatch(/HTTP 404 \(not retried\)/);
    expect(server.hits.get('/v1/users')).toBe(1);
  });
});
