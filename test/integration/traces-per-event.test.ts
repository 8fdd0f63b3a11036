import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { conversations } from '../../connectors/conversations.js';
import { events } from '../../connectors/events.js';
import { traces } from '../../connectors/traces.js';
import { DEFAULT_TRACE_CONCURRENCY } from '../../src/sync/traces/queue.js';
import { owedTraces } from '../fakes/owed.js';
import { runCli } from '../fakes/cli.js';
import {
  dbPathOf,
  expectTableMatches,
  readTable,
  statePathOf,
  SYNC_DEFAULTS,
  syncOnce,
  withPipeline,
  runSyncWith,
} from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';
import { DEFAULT_RATE_LIMITS } from '../../src/http/scheduler/budget.js';

/**
 * Per-event traces against the spec emulator, which also answers `event_id`: state says "this server
 * reads traces per event" (as a real server teaches the probe), so the drain is what runs.
 */
function seedPerEventState(d: string): void {
  const doc = {
    version: 1,
    streams: {},
    projects: [],
    sections: {
      server: {
        perParent: {
          traces: { byParent: true, learnedAt: '2026-01-01T00:00:00.000Z', evidence: 'seeded by the test' },
        },
      },
    },
  };
  writeFileSync(statePathOf(d), `${JSON.stringify(doc)}\n`);
}

describe('traces read per event (a durable backlog of work units)', () => {
  it("a * sync reads each event's spans once, per project, and a sync with no new events reads no trace", async () => {
    const emu = await emulator({ seed: 21, eventsPerProject: 150 });
    const d = dir();
    seedPerEventState(d);
    const first = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      project: '*',
      resources: [events, traces],
      traces: 'all',
    });
    expect(first.ok, JSON.stringify(first.streams.map((s) => [s.resource, s.scope, s.error?.message]))).toBe(true);
    const perEvent = emu.stats().byEndpoint['/v1/traces'] ?? 0;
    expect(perEvent).toBe(emu.snapshot('events').length); // one request per event, none twice
    expectTableMatches(await readTable(d, 'traces'), emu.snapshot('traces'), 'span_id', 'traces');
    expect(Object.values(await owedTraces(dbPathOf(d))).reduce((a, b) => a + b, 0)).toBe(0);

    emu.resetStats();
    const second = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      project: '*',
      resources: [events, traces],
      traces: 'all',
    });
    expect(second.ok).toBe(true);
    expect(emu.stats().byEndpoint['/v1/traces'] ?? 0).toBe(0); // the lookback re-read queues nothing already done
  });

  it('tells the progress how many events wait for their traces as the backlog grows and drains, down to none', async () => {
    const emu = await emulator({ seed: 24, eventsPerProject: 120, projects: ['default'] });
    const d = dir();
    seedPerEventState(d);
    const told: number[] = [];
    const summary = await withPipeline({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d }, 'sync', (deps) =>
      runSyncWith(
        {
          ...SYNC_DEFAULTS,
          resources: [events, traces],
          project: 'default',
          traces: 'all',
          lookbackMs: 15 * 60_000,
          limits: DEFAULT_RATE_LIMITS,
        },
        deps,
        {
          onBacklog: (resource, pending) => void (resource === 'traces' && told.push(pending)),
        },
      ),
    );
    expect(summary.ok).toBe(true);
    expect(Math.max(...told)).toBeGreaterThan(0);
    expect(Math.max(...told)).toBeLessThanOrEqual(emu.snapshot('events', 'default').length);
    expect(told.at(-1)).toBe(0);
  });

  it('killed mid-drain (SIGKILL) with chunks read at once, the next run reads the rest: every span stored, at most the chunks in flight read twice', async () => {
    // Latency keeps several chunks in flight at once (the drain grows its concurrency while reads wait on the network).
    const emu = await emulator({ seed: 22, eventsPerProject: 400, latencyMs: 20 });
    const d = dir();
    seedPerEventState(d);
    const total = emu.snapshot('events', 'default').length;
    const args = [
      'sync',
      '--resources',
      'events,traces',
      '--traces',
      'all',
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
      '--log-level',
      'warn',
      '--max-rpm',
      '200',
    ];
    const killed = await runCli(emu, args, {
      // Some events drained, not all (the owed set is the warehouse's, which the running CLI holds open).
      killWhen: async () => {
        const read = emu.stats().byEndpoint['/v1/traces'] ?? 0;
        return read > 60 && read < total - 100;
      },
    });
    expect(killed.signal).toBe('SIGKILL');
    const readBefore = emu.stats().byEndpoint['/v1/traces'] ?? 0;
    expect(readBefore).toBeLessThan(total);
    emu.resetStats();

    // The resumed run unpaced: the emulator enforces no limits and what is checked is what it reads,
    // not how fast (at the documented 40 a second its ~375 reads took ~9 s of waiting).
    const resumed = await runCli(emu, [
      ...args.filter((a) => a !== '200' && a !== '--max-rpm'),
      '--max-rpm',
      '100000',
      '--max-rps',
      '100000',
    ]);
    expect(resumed.code, resumed.stderr).toBe(0);
    expectTableMatches(await readTable(d, 'traces'), emu.snapshot('traces', 'default'), 'span_id', 'traces');
    const reads = (emu.stats().byEndpoint['/v1/traces'] ?? 0) + readBefore;
    expect(reads).toBeGreaterThanOrEqual(total);
    expect(reads).toBeLessThanOrEqual(total + 1 + 25 * DEFAULT_TRACE_CONCURRENCY); // the probe, and TRACE_CHUNK × the chunks in flight at the kill
  });
});

describe('conversations: newest-message-first walk with no last_message_at filter', () => {
  it('a sync with nothing new costs one conversations request; the table stays exact', async () => {
    const emu = await emulator({ seed: 23, eventsPerProject: 300 });
    const d = dir();
    const first = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [conversations] });
    expect(first.ok).toBe(true);
    expect(first.streams[0]?.pages).toBeGreaterThan(1);
    expectTableMatches(await readTable(d, 'conversations'), emu.snapshot('conversations', 'default'), 'id');
    emu.resetStats();
    const second = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [conversations] });
    expect(second.ok).toBe(true);
    expect(emu.stats().byEndpoint['/v1/conversations']).toBe(1);
    expectTableMatches(await readTable(d, 'conversations'), emu.snapshot('conversations', 'default'), 'id');
  });

  it('a server answering oldest first is noticed: the walk reads the whole list and the table is exact', async () => {
    const emu = await emulator({ seed: 24, eventsPerProject: 300, order: 'asc' });
    const d = dir();
    await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [conversations] });
    emu.addEvents('default', 20);
    const second = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [conversations] });
    expect(second.ok).toBe(true);
    expectTableMatches(await readTable(d, 'conversations'), emu.snapshot('conversations', 'default'), 'id');
  });
});
