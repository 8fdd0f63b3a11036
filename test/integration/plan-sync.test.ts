import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { Plan } from '../../src/reports/plan.js';
import { runCli } from '../fakes/cli.js';
import { dbPathOf, statePathOf } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

/** `plan` for the next sync: the units the sync's producer gives, counted, against what the sync then sends. */

const iso = (ms: number): string => new Date(ms).toISOString();

describe('plan (next sync)', () => {
  it('its request estimate equals what the sync then sends to /v1/events, first sync and incremental', async () => {
    const emu = await emulator({ seed: 71, eventsPerProject: 200, projects: ['default', 'alpha'] });
    const d = dir();
    const common = [
      '--project',
      '*',
      '--project-ids',
      'alpha,default',
      '--resources',
      'events',
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
    ];
    const first = JSON.parse((await runCli(emu, ['plan', ...common, '--json'])).stdout) as Plan;
    expect(first.kind).toBe('sync');
    const row = first.rows.find((r) => r.resource === 'events');
    expect(row?.rows).toBe(emu.snapshot('events').length);
    expect(row?.windows.map((w) => w.status)).toEqual(['todo']);

    emu.resetStats();
    const sync = await runCli(emu, ['sync', ...common, '--quiet']);
    expect(sync.code, sync.stdout + sync.stderr).toBe(0);
    expect(emu.stats().byEndpoint['/v1/events']).toBe(first.requestsByEndpoint['/v1/events']);

    // Caught up: the next sync re-reads only its lookback window.
    const next = JSON.parse((await runCli(emu, ['plan', ...common, '--json'])).stdout) as Plan;
    emu.resetStats();
    expect((await runCli(emu, ['sync', ...common, '--quiet'])).code).toBe(0);
    expect(emu.stats().byEndpoint['/v1/events']).toBe(next.requestsByEndpoint['/v1/events']);
    expect(next.requestsByEndpoint['/v1/events']).toBeLessThan(first.requestsByEndpoint['/v1/events'] ?? 0);
  });

  it('--search and --aggregates: the aggregates requests equal what the sync sends; a search is listed with its range, its pages unknown', async () => {
    const emu = await emulator({ seed: 73, eventsPerProject: 120, projects: ['default', 'alpha'] });
    const d = dir();
    const common = [
      '--project',
      '*',
      '--project-ids',
      'alpha,default',
      '--resources',
      'events',
      '--search',
      'err=error',
      '--aggregates',
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
    ];
    const plan = JSON.parse((await runCli(emu, ['plan', ...common, '--json'])).stdout) as Plan;
    expect(plan.rows.map((r) => `${r.resource} ${r.scope}`)).toEqual([
      'events *[alpha,default]',
      'search_results err@alpha',
      'search_results err@default',
      'event_counts alpha',
      'event_facets alpha',
      'event_counts default',
      'event_facets default',
    ]);
    const search = plan.rows.find((r) => r.resource === 'search_results');
    expect(search?.unknown).toMatch(/search has no count endpoint/);
    // A search never read covers its whole 14-day range.
    const range = search?.windows[0];
    expect(Date.parse(range?.to ?? '') - Date.parse(range?.from ?? '')).toBe(14 * 86_400_000 - 60_000);

    const first = await runCli(emu, ['sync', ...common, '--quiet']);
    expect(first.code, first.stdout + first.stderr).toBe(0);
    expect(emu.stats().byEndpoint['/v1/events/facets']).toBe(plan.requestsByEndpoint['/v1/events/facets']);

    // Read once: the next plan's search range starts at the last run less the lookback, and the next
    // sync sends what it planned (a first sync also asks the timeseries to plan its split walks).
    const next = JSON.parse((await runCli(emu, ['plan', ...common, '--json'])).stdout) as Plan;
    const nextRange = next.rows.find((r) => r.resource === 'search_results')?.windows[0];
    expect(Date.parse(nextRange?.to ?? '') - Date.parse(nextRange?.from ?? '')).toBeLessThan(86_400_000);
    emu.resetStats();
    const sync = await runCli(emu, ['sync', ...common, '--quiet']);
    expect(sync.code, sync.stdout + sync.stderr).toBe(0);
    for (const endpoint of ['/v1/events', '/v1/events/timeseries', '/v1/events/facets']) {
      expect(emu.stats().byEndpoint[endpoint], endpoint).toBe(next.requestsByEndpoint[endpoint]);
    }
    // Aggregates: one per project; the reconcile step: one hourly series per project.
    expect(next.requestsByEndpoint['/v1/events/timeseries']).toBe(4);
    expect(next.reconcile?.requestsPerRun).toBe(2);
    expect(next.requestsByEndpoint['/v1/events/search']).toBeUndefined();
    expect(emu.stats().byEndpoint['/v1/events/search']).toBeGreaterThanOrEqual(2);
  });

  it('a split a killed run left is planned first, as the sync resumes it, then the window after it', async () => {
    const emu = await emulator({ seed: 72, eventsPerProject: 200, projects: ['default'] });
    const d = dir();
    const now = Date.now();
    const from = iso(now - 10 * 86_400_000);
    const mid = iso(now - 5 * 86_400_000);
    const to = iso(now - 2 * 86_400_000);
    writeFileSync(
      statePathOf(d),
      JSON.stringify({
        version: 1,
        projects: ['default'],
        sections: {},
        streams: {
          'events:*': {
            mark: from,
            split: {
              from,
              to,
              parts: [
                { from, to: mid },
                { from: mid, to },
              ],
            },
          },
        },
      }),
    );
    const common = ['--project', '*', '--resources', 'events', '--duckdb-path', dbPathOf(d), '--state', statePathOf(d)];
    const plan = JSON.parse((await runCli(emu, ['plan', ...common, '--json'])).stdout) as Plan;
    const planned = plan.rows.find((r) => r.resource === 'events')?.windows ?? [];
    // (Events settle: a settle re-read of what was read fresh comes last; not the point here.)
    const windows = planned.filter((w) => w.status !== 'settle');
    expect(windows[0]).toMatchObject({ from, to: mid });
    expect(windows[1]).toMatchObject({ from: mid, to });
    // Then the window after the split: from its end (less the lookback) to now.
    expect(Date.parse(windows[2]?.from ?? '')).toBeLessThanOrEqual(Date.parse(to));
    expect(Date.parse(windows[2]?.to ?? '')).toBeGreaterThanOrEqual(now);
    expect(windows, JSON.stringify(planned)).toHaveLength(3);
  });
});
