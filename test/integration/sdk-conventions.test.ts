import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { resolveSyncConfig } from '../../src/config/index.js';
import type { RequestInfo } from '../../emulator/index.js';
import { json, startServer } from '../fakes/bad-server.js';
import { readTable, syncOnce } from '../fakes/harness.js';
import { dir, emulator, onCleanup } from '../fakes/lifecycle.js';

/** HTTP as the vendor SDK does it (node_modules/@raindrop-ai/query: lib/config.ts, lib/security.ts, lib/retries.ts). */
describe('HTTP follows the SDK conventions', () => {
  it('sends User-Agent query-sync/<version>; a base URL ending in /v1/ and a key pasted with "Bearer " work', async () => {
    const seen: RequestInfo[] = [];
    const emu = await emulator({ seed: 31, eventsPerProject: 40, onRequest: (r) => seen.push(r) });
    const d = dir();
    const summary = await syncOnce({
      baseUrl: `${emu.url}/v1/`,
      apiKey: `Bearer ${emu.apiKey}`,
      dir: d,
      resources: [events],
    });
    expect(summary.ok, JSON.stringify(summary.streams.map((s) => s.error?.message))).toBe(true);
    expect((await readTable(d, 'events')).length).toBe(emu.snapshot('events', 'default').length);
    const version = (JSON.parse(readFileSync(join(process.cwd(), 'package.json'), 'utf8')) as { version: string })
      .version;
    expect(seen.length).toBeGreaterThan(0);
    for (const r of seen) {
      expect(r.path.startsWith('/v1/v1')).toBe(false);
      expect(r.headers['user-agent']).toBe(`query-sync/${version}`);
      expect(r.headers.authorization).toBe(`Bearer ${emu.apiKey}`);
    }
  });

  it('honours retry-after-ms on a 429 (before Retry-After, as the SDK)', async () => {
    const at: number[] = [];
    const server = await startServer({
      '/v1/events': (_req, _url, res) => {
        at.push(Date.now());
        if (at.length === 1) {
          // Retry-After alone would ask for 30 s: the run would be far slower than the test's budget.
          res.writeHead(429, { 'content-type': 'application/json', 'retry-after-ms': '400', 'retry-after': '30' });
          return res.end(JSON.stringify({ error: { code: 'rate_limited', message: 'slow down' } }));
        }
        json(res, 200, {
          data: [{ id: 'e1', timestamp: '2026-01-01T00:00:00Z' }],
          meta: { cursor: null, has_more: false },
        });
      },
    });
    onCleanup(server.close);
    const summary = await syncOnce({ baseUrl: server.url, apiKey: 'k', dir: dir(), resources: [events] });
    expect(summary.ok, JSON.stringify(summary.streams.map((s) => s.error?.message))).toBe(true);
    expect(at.length).toBe(2);
    const waited = (at[1] as number) - (at[0] as number);
    expect(waited).toBeGreaterThanOrEqual(350);
    expect(waited).toBeLessThan(10_000);
  });

  it('the base URL defaults to the SDK server; a trailing /v1 and a Bearer prefix are taken off in config', () => {
    expect(resolveSyncConfig({}, { QUERY_API_KEY: 'k' }).baseUrl).toBe('https://query.raindrop.ai');
    const c = resolveSyncConfig(
      {},
      { QUERY_API_BASE_URL: 'https://query.example.com/v1/', QUERY_API_KEY: 'bearer  qs_key' },
    );
    expect(c.baseUrl).toBe('https://query.example.com');
    expect(c.apiKey).toBe('qs_key');
  });
});
