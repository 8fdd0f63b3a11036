import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { conversations } from '../../connectors/conversations.js';
import { events } from '../../connectors/events.js';
import { cursorMillis } from '../../src/normalize/normalize.js';
import type { Emulator } from '../../emulator/index.js';
import type { ApiRecord, ResourceDefinition } from '../../src/core/types.js';
import { StateStore } from '../../src/state/store.js';
import type { StateDocument } from '../../src/state/document.js';
import { RESOURCES } from '../../connectors/index.js';
import { dbPathOf, expectTableMatches, readTable, statePathOf, syncOnce } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';
import { CLI } from '../fakes/cli.js';

/**
 * Split walks of the resources besides events (`src/sync/split/plan.ts`): users on `last_seen`,
 * traces listed by time on their start, conversations on `started_at` while their window is on
 * `last_message_at`. Correctness only: a kill -9 while sub-windows are mid-walk resumes each where
 * it was, records sharing the instant where two sub-windows meet are read once, in either order.
 */

const DAY = 86_400_000;

const byName = (name: string): ResourceDefinition => RESOURCES.find((r) => r.name === name) as ResourceDefinition;

/** Sub-windows with a stored checkpoint cursor. */
function partsWithCursor(doc: StateDocument): number {
  return Object.values(doc.streams).reduce(
    (n, s) => n + (s.split?.parts.filter((p) => p.cursor !== undefined).length ?? 0),
    0,
  );
}

/**
 * `sync` of one resource in a child process; SIGKILL once `killAtParts` sub-windows have a checkpoint
 * cursor. A run to be killed writes 20-row batches, so sub-windows checkpoint mid-walk at once; the
 * run that finishes writes at the default size (20-row batches of 20,000 records were most of the
 * file's time, and the size of a resumed run's batches is not what these tests are about).
 */
function syncInChild(
  emu: Emulator,
  d: string,
  resource: string,
  killAtParts?: number,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string }> {
  const statePath = statePathOf(d);
  const batches = killAtParts === undefined ? [] : ['--batch-rows', '20'];
  const child = spawn(
    process.execPath,
    [
      CLI,
      'sync',
      '--project',
      'default',
      '--resources',
      resource,
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePath,
      '--log-level',
      'warn',
      ...batches,
      '--settle',
      '0',
    ],
    {
      env: { ...process.env, QUERY_API_BASE_URL: emu.url, QUERY_API_KEY: emu.apiKey },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  let poll: NodeJS.Timeout | undefined;
  if (killAtParts !== undefined) {
    poll = setInterval(() => {
      if (!existsSync(statePath)) return;
      if (partsWithCursor(JSON.parse(readFileSync(statePath, 'utf8')) as StateDocument) < killAtParts) return;
      clearInterval(poll);
      child.kill('SIGKILL');
    }, 5);
  }
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      if (poll !== undefined) clearInterval(poll);
      resolve({ code, signal, out });
    });
  });
}

/** The value a sub-window of `resource` is cut on: its cursor field, or conversations' `started_at`. */
function partValueMs(resource: ResourceDefinition, record: ApiRecord): number {
  if (resource.split?.partGte !== undefined) return Date.parse(String(record.started_at));
  return cursorMillis(resource, record) as number;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * Events per test, each enough for a sub-window of two pages or more (a checkpoint mid-walk, where
 * the kill lands): users are one per 40 events and mostly seen in the last day (20,000 events put
 * 178 in the newest sub-window, two pages of 100); 3,000 events give each sub-window 1,000-1,300
 * spans (pages of 1,000) and 800-950 conversations (pages of 100). More only cost reading time.
 */
const EVENTS = { users: 20_000, traces: 3000, conversations: 3000 } as const;

/** The latency the run to be killed is answered with (see the test). */
const KILLED_RUN_LATENCY_MS = { users: 400, traces: 100, conversations: 400 } as const;

describe('split walks of users, traces and conversations', () => {
  for (const name of ['users', 'traces', 'conversations'] as const) {
    for (const order of ['desc', 'asc'] as const) {
      it(`${name}: kill -9 mid-split resumes each sub-window; rows sharing the instant at an edge are read once (${order})`, async () => {
        expect(existsSync(CLI), `build first (npm test runs tsc): ${CLI}`).toBe(true);
        const resource = byName(name);
        const emu = await emulator({
          seed: 41,
          eventsPerProject: EVENTS[name],
          projects: ['default'],
          order,
          latencyMs: 15,
        });
        const d = dir();
        const now = Date.now();
        const edge = now - 10 * DAY;
        // Many records at the very instant where two sub-windows meet (new users' last_seen, new
        // conversations' started_at, spans starting in that millisecond), some just before it.
        emu.addEvents('default', 400, { timestamp: edge });
        emu.addEvents('default', 20, { timestamp: edge - 1 });
        const shared = emu.snapshot(name, 'default').filter((r) => partValueMs(resource, r) === edge);
        expect(shared.length, `records of ${name} at the edge instant`).toBeGreaterThanOrEqual(2);
        // The split a planning run writes before reading: three sub-windows, one edge at `edge`.
        const to = now - DAY;
        const parts = [
          { from: iso(0), to: iso(now - 20 * DAY) },
          { from: iso(now - 20 * DAY), to: iso(edge) },
          { from: iso(edge), to: iso(to) },
        ];
        const state: StateDocument = {
          version: 1,
          streams: { [`${name}:default`]: { split: { from: iso(0), to: iso(to), parts } } },
          projects: [],
          sections: {},
        };
        writeFileSync(statePathOf(d), JSON.stringify(state));

        // The run to be killed is answered slowly: a walk asks its next page as soon as one arrives, so
        // with 15 ms the last pages of the split were often stored within 30-100 ms of the first
        // sub-window checkpoint (users' sub-windows are two pages), and the kill could miss the split.
        // At 400 ms the split is open for about that long after the checkpoint the kill waits for.
        // Traces' pages are 1,000 spans, written in 50 batches each: a page's own writes keep the
        // split open, and 400 ms a request made the killed run 35 s long.
        emu.configure({ latencyMs: KILLED_RUN_LATENCY_MS[name] });
        const killed = await syncInChild(emu, d, name, 1);
        emu.configure({ latencyMs: 15 });
        const mid = await StateStore.read(statePathOf(d));
        // State never moves past data not stored: the mark waits for every sub-window.
        expect(mid.streams[`${name}:default`]?.split, killed.out).toBeDefined();
        expect(mid.streams[`${name}:default`]?.mark).toBeUndefined();
        expect(killed.signal, `expected the kill to land mid-split: ${killed.out}`).toBe('SIGKILL');

        const startedBefore = Date.now();
        const final = await syncInChild(emu, d, name);
        expect(final.code, final.out).toBe(0);
        const after = (await StateStore.read(statePathOf(d))).streams[`${name}:default`];
        expect(after?.split).toBeUndefined();
        expect(Date.parse(after?.mark ?? '')).toBeGreaterThan(to);
        // Records that changed after the final run started are the next run's.
        const stable = (r: Record<string, unknown>): boolean =>
          (cursorMillis(resource, r as ApiRecord) ?? 0) < startedBefore;
        const rows = (await readTable(d, name)).filter(stable);
        expectTableMatches(rows, emu.snapshot(name, 'default').filter(stable), resource.key, name);
        expect(rows.filter((r) => partValueMs(resource, r as ApiRecord) === edge)).toHaveLength(shared.length);
      });
    }
  }

  it('a first sync of conversations is planned from one count and the events timeseries, read split, exact; the next small sync asks neither', async () => {
    const emu = await emulator({ seed: 42, eventsPerProject: 4000, projects: ['default'], latencyMs: 5 });
    const d = dir();
    const first = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      resources: [conversations, events],
      settleMs: 0,
    });
    expect(first.ok, JSON.stringify(first.streams.map((s) => s.error?.message))).toBe(true);
    const stats = emu.stats().byEndpoint;
    expect(stats['/v1/events/timeseries'] ?? 0).toBeGreaterThan(0);
    // Conversations' size (count_by=convo_id), and the reconcile's count of the events older than its two recent days.
    expect(stats['/v1/events/count'] ?? 0).toBe(2);
    // Split: the conversations list was read by more walks than one (each sub-window ends with a last page).
    const pages = stats['/v1/conversations'] ?? 0;
    const convos = emu.snapshot('conversations', 'default').length;
    expect(pages).toBeGreaterThan(Math.ceil(convos / 100));
    expectTableMatches(
      await readTable(d, 'conversations'),
      emu.snapshot('conversations', 'default'),
      'id',
      'conversations',
    );
    expectTableMatches(await readTable(d, 'events'), emu.snapshot('events', 'default'), 'id', 'events');

    emu.addEvents('default', 30);
    emu.resetStats();
    const before = { ...emu.stats().byEndpoint };
    const second = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      resources: [conversations, events],
      settleMs: 0,
    });
    expect(second.ok).toBe(true);
    const after = emu.stats().byEndpoint;
    // The walks ask neither; the one timeseries is the reconcile's (the events of the recent two days, by the hour).
    expect((after['/v1/events/timeseries'] ?? 0) - (before['/v1/events/timeseries'] ?? 0)).toBe(1);
    expect((after['/v1/events/count'] ?? 0) - (before['/v1/events/count'] ?? 0)).toBe(0);
    expectTableMatches(
      await readTable(d, 'conversations'),
      emu.snapshot('conversations', 'default'),
      'id',
      'conversations',
    );
  });
});
