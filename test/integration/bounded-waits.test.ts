import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { users } from '../../connectors/users.js';
import { DEFAULT_RATE_LIMITS } from '../../src/http/scheduler/budget.js';
import { ApiClient, newCallStats } from '../../src/http/client.js';
import { createScheduler } from '../../src/http/scheduler/scheduler.js';
import { systemClock } from '../../src/core/clock.js';
import { StateStore } from '../../src/state/store.js';
import { json, startServer } from '../fakes/bad-server.js';
import { readTable, statePathOf, syncOnce } from '../fakes/harness.js';
import { dir, onCleanup } from '../fakes/lifecycle.js';

const ts = (i: number): string => new Date(Date.parse('2026-11-01T00:00:00Z') + i * 1000).toISOString();
const usersPage = { data: [{ id: 'u1', last_seen: ts(5) }], meta: { cursor: null, has_more: false } };

/** A pino logger whose JSON lines land in `lines`. */
function capturingLogger(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n'))
        if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

describe('every wait is bounded', () => {
  it('a body that trickles a byte at a time is cut off by the request deadline, retried, and fails only its stream', async () => {
    const timers: NodeJS.Timeout[] = [];
    const server = await startServer({
      '/v1/events': (_req, _url, res) => {
        // Headers at once, then a byte every 20 ms: undici's idle body timeout never trips.
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"data": [');
        const t = setInterval(() => res.write(' '), 20);
        timers.push(t);
        res.on('close', () => clearInterval(t));
      },
      '/v1/users': (_req, _url, res) => json(res, 200, usersPage),
    });
    onCleanup(() => {
      for (const t of timers) clearInterval(t);
      return server.close();
    });
    const d = dir();
    const summary = await syncOnce({
      baseUrl: server.url,
      apiKey: 'k-trickle',
      dir: d,
      resources: [events, users],
      retry: { maxAttempts: 2, backoff: { baseMs: 5, maxDelayMs: 10 } },
      client: { timeouts: { connectMs: 5_000, headersMs: 5_000, bodyMs: 5_000, requestMs: 400 } },
    });
    const ev = summary.streams.find((s) => s.resource === 'events');
    expect(ev?.outcome).toBe('failed');
    expect(ev?.error?.message).toMatch(
      /\[resource events, project default\] GET \/v1\/events failed 2 times.*no complete response within 400ms \(request deadline/,
    );
    expect(server.hits.get('/v1/events')).toBe(2);
    expect(summary.streams.find((s) => s.resource === 'users')?.outcome).toBe('ok');
    const doc = await StateStore.read(statePathOf(d));
    expect(doc.streams['events:default']?.mark).toBeUndefined();
    expect(doc.streams['events:default']?.lastRun?.error).toMatch(/request deadline/);
  });

  for (const status of [429, 503]) {
    it(`HTTP ${status} with Retry-After: 3600 fails the stream at once, naming the wait, instead of sleeping an hour`, async () => {
      const server = await startServer({
        '/v1/events': (_req, _url, res) => {
          res.writeHead(status, { 'retry-after': '3600', 'content-type': 'application/json' });
          res.end('{"error":{"code":"unavailable","message":"come back in an hour"}}');
        },
        '/v1/users': (_req, _url, res) => json(res, 200, usersPage),
      });
      onCleanup(server.close);
      const d = dir();
      const summary = await syncOnce({ baseUrl: server.url, apiKey: 'k', dir: d, resources: [events, users] });
      const ev = summary.streams.find((s) => s.resource === 'events');
      expect(ev?.outcome).toBe('failed');
      expect(ev?.error?.message).toMatch(
        new RegExp(
          `GET /v1/events got HTTP ${status} asking to wait 3600 s \\(Retry-After: 3600\\), longer than --max-retry-after \\(300 s\\)`,
        ),
      );
      expect(server.hits.get('/v1/events')).toBe(1);
      expect(summary.streams.find((s) => s.resource === 'users')?.outcome).toBe('ok');
      expect((await StateStore.read(statePathOf(d))).streams['events:default']?.mark).toBeUndefined();
    });
  }

  it('a Retry-After within --max-retry-after is honoured, and a long wait is logged at info with its reason', async () => {
    let calls = 0;
    const server = await startServer({
      '/v1/events': (_req, _url, res) => {
        calls += 1;
        if (calls === 1) {
          res.writeHead(503, { 'retry-after': '1', 'content-type': 'application/json' });
          return res.end('{"error":{"code":"unavailable","message":"busy"}}');
        }
        json(res, 200, { data: [{ id: 'e1', timestamp: ts(1) }], meta: { cursor: null, has_more: false } });
      },
    });
    onCleanup(server.close);
    const d = dir();
    const { logger, lines } = capturingLogger();
    const summary = await syncOnce({
      baseUrl: server.url,
      apiKey: 'k',
      dir: d,
      resources: [events],
      client: { logger, longWaitMs: 500, maxRetryAfterMs: 2_000 },
    });
    expect(summary.streams[0]?.outcome).toBe('ok');
    expect((await readTable(d, 'events')).length).toBe(1);
    const waits = lines.filter(
      (l) => typeof l.msg === 'string' && /^waiting \d+ s before retrying GET \/v1\/events: HTTP 503/.test(l.msg),
    );
    expect(waits).toHaveLength(1);
    expect(waits[0]).toMatchObject({ level: 30, resource: 'events', project: 'default', reason: 'HTTP 503' });
    expect(waits[0]?.delayMs as number).toBeGreaterThanOrEqual(1000);
  });

  it('many requests waiting on one endpoint at once give one long-wait line, not one each', async () => {
    const server = await startServer({
      '/v1/events': (_req, _url, res) => json(res, 200, { data: [], meta: { cursor: null, has_more: false } }),
    });
    onCleanup(server.close);
    const { logger, lines } = capturingLogger();
    // 4 requests a second: of 12 sent at once, 8 wait for the budget, most of them over 200 ms.
    const budget = createScheduler({
      limits: { ...DEFAULT_RATE_LIMITS, maxRps: 4 },
      safetyMarginMs: { minuteMs: 0, secondMs: 0 },
    });
    const client = new ApiClient({
      baseUrl: server.url,
      apiKey: 'k',
      projectHeader: 'X-Project',
      budget,
      clock: systemClock,
      logger,
      longWaitMs: 200,
    });
    onCleanup(() => client.close());
    const stats = Array.from({ length: 12 }, () => newCallStats());
    await Promise.all(
      stats.map((s, i) =>
        client.getJson(
          { endpoint: '/v1/events', path: '/v1/events', query: { n: String(i) }, project: undefined },
          { resource: 'events', project: `p${i}`, lane: `events|p${i}`, stats: s },
        ),
      ),
    );
    const longWaits = stats.filter((s) => s.waitedMs >= 200).length;
    expect(longWaits).toBeGreaterThanOrEqual(4);
    const logged = lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('waited '));
    expect(logged).toHaveLength(1);
    expect(logged[0]?.msg).toMatch(/for the request budget of \/v1\/events .*logged at most every 30 s/);
    expect(server.hits.get('/v1/events')).toBe(12);
  });
});
