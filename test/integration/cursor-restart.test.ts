import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { MAX_WINDOW_RESTARTS } from '../../src/sync/walk.js';
import { StateStore } from '../../src/state/store.js';
import { json, startServer } from '../fakes/bad-server.js';
import { readTable, statePathOf, syncOnce } from '../fakes/harness.js';
import { dir, onCleanup } from '../fakes/lifecycle.js';

const ts = (i: number): string => new Date(Date.parse('2026-11-01T00:00:00Z') + i * 1000).toISOString();
const PAGES = 4;
const PER_PAGE = 3;

type Refusal = (res: ServerResponse) => void;
const refusals: Record<string, Refusal> = {
  '410 Gone': (res) => json(res, 410, { error: { code: 'gone', message: 'expired' } }),
  '404 Not Found': (res) => json(res, 404, { error: { code: 'not_found', message: 'no such page' } }),
  '400 invalid_cursor': (res) => json(res, 400, { error: { code: 'invalid_cursor', message: 'cursor is malformed' } }),
  '422 whose body names the cursor': (res) =>
    json(res, 422, { error: { code: 'unprocessable', message: 'Cursor has expired' } }),
};

/**
 * A list of PAGES pages whose cursors belong to one walk (`w<walk>-p<page>`). The cursor of page
 * `refuseAt` is refused the first `refuseTimes` times it is used, as a server that expired it
 * while we read would: a fresh walk (a first page without a cursor) gets new cursors.
 */
async function expiringServer(
  refuse: Refusal,
  refuseAt: number,
  refuseTimes: number,
): Promise<{ url: string; firstPages: () => number }> {
  let walk = 0;
  let refused = 0;
  const server = await startServer({
    '/v1/events': (_req, url, res) => {
      const cursor = url.searchParams.get('cursor');
      let page = 1;
      if (cursor === null) walk += 1;
      else {
        const m = /^w(\d+)-p(\d+)$/.exec(cursor);
        if (m === null) return json(res, 400, { error: { code: 'invalid_cursor', message: 'unknown cursor' } });
        page = Number(m[2]);
        if (page === refuseAt && refused < refuseTimes) {
          refused += 1;
          return refuse(res);
        }
      }
      const data = Array.from({ length: PER_PAGE }, (_, i) => {
        const n = (page - 1) * PER_PAGE + i;
        return { id: `e${n}`, timestamp: ts(n), event_name: 'x' };
      });
      json(res, 200, { data, meta: { cursor: page < PAGES ? `w${walk}-p${page + 1}` : null, has_more: page < PAGES } });
    },
  });
  onCleanup(server.close);
  return { url: server.url, firstPages: () => walk };
}

describe('a cursor refused in the middle of a walk restarts that window; the stream completes', () => {
  for (const [name, refuse] of Object.entries(refusals)) {
    it(`${name} on page 3 of 4, after two pages were stored and checkpointed`, async () => {
      const server = await expiringServer(refuse, 3, 1);
      const d = dir();
      const summary = await syncOnce({ baseUrl: server.url, apiKey: 'k', dir: d, resources: [events], batchRows: 1 });
      expect(summary.streams[0]?.error?.message).toBeUndefined();
      expect(summary.streams[0]?.outcome).toBe('ok');
      expect(server.firstPages()).toBe(2); // the window was read again from its first page, once
      const rows = await readTable(d, 'events');
      expect(rows.map((r) => r.id).sort()).toEqual(Array.from({ length: PAGES * PER_PAGE }, (_, n) => `e${n}`).sort());
      const doc = await StateStore.read(statePathOf(d));
      expect(doc.streams['events:default']?.mark).toBeDefined();
      expect(doc.streams['events:default']?.pending).toBeUndefined();
    });
  }

  it('a server refusing every cursor fails the stream after a bounded number of restarts, state unmoved', async () => {
    const server = await expiringServer(refusals['410 Gone'] as Refusal, 2, Number.POSITIVE_INFINITY);
    const d = dir();
    const summary = await syncOnce({ baseUrl: server.url, apiKey: 'k', dir: d, resources: [events], batchRows: 1 });
    expect(summary.streams[0]?.outcome).toBe('failed');
    expect(summary.streams[0]?.error?.message).toMatch(
      new RegExp(
        `\\[resource events, project default\\] the server refused our cursor ${MAX_WINDOW_RESTARTS + 1} times while reading window .*HTTP 410`,
      ),
    );
    expect(server.firstPages()).toBe(MAX_WINDOW_RESTARTS + 1);
    expect((await StateStore.read(statePathOf(d))).streams['events:default']?.mark).toBeUndefined();
  });
});
