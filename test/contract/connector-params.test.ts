import { describe, expect, it } from 'vitest';
import { RESOURCES } from '../../connectors/index.js';
import { syncCommand } from '../../src/cli/commands/sync.js';
import { resolveSyncConfig } from '../../src/config/index.js';
import { dbPathOf, statePathOf, syncOnce } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';
import { findSdkOperation, unknownSdkParams } from './sdk-params.js';

/**
 * Every request our connectors make to the real-service flavor (a first sync, an incremental one,
 * under one project and under `*`) uses only operations and query parameters the vendor's SDK knows.
 */
describe('our requests use only parameters the SDK knows for each operation', () => {
  it.each([
    ['one project (no header)', undefined],
    ['all projects', '*'],
  ])('%s', async (_label, project) => {
    const sent: { path: string; query: URLSearchParams }[] = [];
    const emu = await emulator({
      flavor: 'real',
      seed: 41,
      eventsPerProject: 60,
      enrichAfterMs: 0,
      onRequest: (info) => sent.push({ path: info.path, query: info.query }),
    });
    const d = dir();
    const first = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, project, resources: RESOURCES });
    expect(first.ok, JSON.stringify(first.streams.map((s) => s.error?.message))).toBe(true);
    emu.addEvents('default', 5);
    expect((await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, project, resources: RESOURCES })).ok).toBe(
      true,
    );

    const operations = new Set(sent.map((r) => findSdkOperation(r.path)?.path ?? r.path));
    for (const path of [
      '/v1/events',
      '/v1/traces',
      '/v1/signals',
      '/v1/signal-groups',
      '/v1/users',
      '/v1/conversations',
    ])
      expect(operations).toContain(path);
    // Besides the lists, only the count endpoint (plans and split walks), and nothing the SDK lacks.
    expect(
      [...operations].filter(
        (p) =>
          ![
            '/v1/events',
            '/v1/traces',
            '/v1/signals',
            '/v1/signal-groups',
            '/v1/users',
            '/v1/conversations',
            '/v1/events/count',
            '/v1/events/timeseries',
          ].includes(p),
      ),
    ).toEqual([]);
    const unknown = sent
      .map((r) => ({ path: r.path, unknown: unknownSdkParams(r.path, r.query) }))
      .filter((r) => r.unknown.length > 0);
    expect(unknown.slice(0, 5)).toEqual([]);
  });
});

describe('saved searches and aggregates use only what the SDK knows', () => {
  it('search, timeseries and facets requests name only SDK parameters (facets its dotted timestamp.gte/lt)', async () => {
    const sent: { path: string; query: URLSearchParams }[] = [];
    const emu = await emulator({
      flavor: 'real',
      seed: 42,
      eventsPerProject: 60,
      enrichAfterMs: 0,
      onRequest: (info) => sent.push({ path: info.path, query: info.query }),
    });
    const d = dir();
    // The CLI's config and sync command, in-process: the requests are under test, not the process.
    const config = resolveSyncConfig(
      {
        baseUrl: emu.url,
        apiKey: emu.apiKey,
        project: '*',
        resources: 'events',
        aggregates: true,
        search: [
          'refunds=refund',
          'denied=access denied,mode=semantic,search_in=user_input,assistant_output,threshold=0.2',
        ],
        duckdbPath: dbPathOf(d),
        state: statePathOf(d),
        quiet: true,
      },
      {},
    );
    const printed: string[] = [];
    expect(await syncCommand(config, { print: (line) => void printed.push(line) }), printed.join('\n')).toBe(0);
    const operations = new Set(sent.map((r) => findSdkOperation(r.path)?.path ?? r.path));
    for (const path of ['/v1/events/search', '/v1/events/timeseries', '/v1/events/facets'])
      expect(operations).toContain(path);
    const unknown = sent
      .map((r) => ({ path: r.path, unknown: unknownSdkParams(r.path, r.query) }))
      .filter((r) => r.unknown.length > 0);
    expect(unknown.slice(0, 5)).toEqual([]);
    const facets = sent.find((r) => r.path === '/v1/events/facets');
    expect([...(facets?.query.keys() ?? [])].sort()).toEqual(['field', 'limit', 'timestamp.gte', 'timestamp.lt']);
  });
});
