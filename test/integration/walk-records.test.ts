import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { traces } from '../../connectors/traces.js';
import type { JsonValue } from '../../src/core/types.js';
import {
  expectTableMatches,
  readTable,
  runOptionsOf,
  runSyncWith,
  SYNC_DEFAULTS,
  withPipeline,
} from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

describe('a walk and its pages', () => {
  it('lets each record of a list page go once its row is made, and stores every row', async () => {
    // 1,500 events and their spans: many pages of each.
    const emu = await emulator({ seed: 34, eventsPerProject: 1500 });
    const d = dir();
    const target = { baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [events, traces] };
    const lists: { readonly path: string; readonly data: readonly unknown[] }[] = [];
    const summary = await withPipeline(target, 'sync', (deps) => {
      // The real client, its answers kept as they were handed over: what the walk leaves in them.
      const getJson = deps.client.getJson.bind(deps.client);
      deps.client.getJson = async (req, ctx): Promise<JsonValue> => {
        const body = await getJson(req, ctx);
        const data = (body as { readonly data?: unknown } | null)?.data;
        // Not the traces probe's page of one record (`sync/traces/probe.ts`): no walk reads it.
        const probe = req.query.limit === '1';
        if ((req.path === '/v1/events' || req.path === '/v1/traces') && !probe && Array.isArray(data))
          lists.push({ path: req.path, data });
        return body;
      };
      return runSyncWith({ ...SYNC_DEFAULTS, ...runOptionsOf(target), lookbackMs: 15 * 60_000 }, deps);
    });
    expect(summary.ok, JSON.stringify(summary.streams.map((s) => s.error?.message))).toBe(true);
    for (const path of ['/v1/events', '/v1/traces']) {
      const pages = lists.filter((l) => l.path === path);
      expect(pages.length, path).toBeGreaterThan(1);
      const records = pages.reduce((n, p) => n + p.data.length, 0);
      expect(records, path).toBeGreaterThan(0);
      // Every record was taken by a walk and let go: none is held by the page any more.
      expect(
        pages.flatMap((p) => p.data.filter((r) => r !== undefined)),
        path,
      ).toEqual([]);
    }
    expectTableMatches(await readTable(d, 'events'), emu.snapshot('events', 'default'), 'id', 'events');
    expectTableMatches(await readTable(d, 'traces'), emu.snapshot('traces', 'default'), 'span_id', 'traces');
  });
});
