import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import type { Emulator } from '../../emulator/index.js';
import { StateStore } from '../../src/state/store.js';
import type { StateDocument } from '../../src/state/document.js';
import { dbPathOf, expectTableMatches, readTable, statePathOf, syncOnce, writeSplitLeft } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';
import { CLI } from '../fakes/cli.js';

/**
 * Split walks (`src/sync/split/plan.ts`): a large window read as sub-windows at once, each with its
 * own checkpoint; the mark moves only when all are stored. Correctness only, not speed.
 */

const DAY = 86_400_000;

/** Sub-windows with a stored checkpoint cursor, in a state document. */
function partsWithCursor(doc: StateDocument): number {
  return Object.values(doc.streams).reduce(
    (n, s) => n + (s.split?.parts.filter((p) => p.cursor !== undefined).length ?? 0),
    0,
  );
}

/**
 * Run `sync` of events in a child process; SIGKILL it once the state shows `parts` sub-windows
 * mid-walk (plus `thenMs`), or `when` says so. A run to be killed writes 200-row batches, so its
 * sub-windows checkpoint every page or two; a run that finishes writes at the default size (the
 * size of a resumed run's batches is not what these tests are about).
 */
function syncInChild(
  emu: Emulator,
  d: string,
  kill?: { readonly parts: number; readonly thenMs: number; readonly when?: (doc: StateDocument) => boolean },
  extra: readonly string[] = [],
): Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string }> {
  const statePath = statePathOf(d);
  const child = spawn(
    process.execPath,
    [
      CLI,
      'sync',
      '--project',
      '*',
      '--resources',
      'events',
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePath,
      '--log-level',
      'warn',
      ...(kill === undefined ? [] : ['--batch-rows', '200']),
      ...extra,
    ],
    {
      env: { ...process.env, QUERY_API_BASE_URL: emu.url, QUERY_API_KEY: emu.apiKey },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const timers: NodeJS.Timeout[] = [];
  if (kill !== undefined) {
    const poll = setInterval(() => {
      if (!existsSync(statePath)) return;
      // The store renames a whole file into place: a read is never torn.
      const doc = JSON.parse(readFileSync(statePath, 'utf8')) as StateDocument;
      if (kill.when === undefined ? partsWithCursor(doc) < kill.parts : !kill.when(doc)) return;
      clearInterval(poll);
      timers.push(setTimeout(() => void child.kill('SIGKILL'), kill.thenMs));
    }, 5);
    timers.push(poll);
  }
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      for (const t of timers) clearTimeout(t);
      resolve({ code, signal, out });
    });
  });
}

describe('split walks', () => {
  for (const order of ['desc', 'asc'] as const) {
    it(`kill -9 while sub-windows are mid-walk, resumed each where it was: exact (${order === 'desc' ? 'newest' : 'oldest'} first)`, async () => {
      expect(existsSync(CLI), `build first (npm test runs tsc): ${CLI}`).toBe(true);
      // 3 × 1500 events: 45 pages under `*`, split into 4-6 sub-windows; each kill waits for
      // sub-windows with checkpoints, so it lands mid-split however slow the machine is (the second
      // run's split stays open 2 s or more after its second sub-window checkpoint).
      const emu = await emulator({ seed: 31, eventsPerProject: 1500, order });
      const d = dir();
      let killedMidSplit = 0;
      for (const kill of [
        { parts: 1, thenMs: 0 },
        { parts: 2, thenMs: 30 },
      ]) {
        for (const p of ['default', 'alpha', 'beta']) emu.addEvents(p, 7);
        // The runs to be killed are answered slowly: answered at once, a walk asks its next page as
        // soon as one arrives, and a fast run could store the split's last pages within the 30 ms
        // (plus a poll) between the checkpoint the kill waits for and the kill: the kill then missed
        // the split (once in CI-like runs, after the CLI's start got cheaper). At 100 ms a page the
        // split stays open for several pages after that checkpoint.
        emu.configure({ latencyMs: 100 });
        const run = await syncInChild(emu, d, kill);
        emu.configure({ latencyMs: 0 });
        const doc = await StateStore.read(statePathOf(d));
        if (run.signal === 'SIGKILL' && doc.streams['events:*']?.split !== undefined) {
          killedMidSplit += 1;
          // State never moves past data not stored: the mark waits for every sub-window.
          expect(doc.streams['events:*']?.mark).toBeUndefined();
        }
      }
      expect(killedMidSplit).toBe(2);
      const resumedFrom = (await StateStore.read(statePathOf(d))).streams['events:*']?.split;

      const finalStartedBefore = Date.now();
      const final = await syncInChild(emu, d);
      expect(final.code, final.out).toBe(0);
      const after = (await StateStore.read(statePathOf(d))).streams['events:*'];
      expect(after?.split).toBeUndefined();
      expect(Date.parse(after?.mark ?? '')).toBeGreaterThanOrEqual(
        resumedFrom === undefined ? 0 : Date.parse(resumedFrom.to),
      );
      const before = (r: Record<string, unknown>): boolean => Date.parse(String(r.timestamp)) < finalStartedBefore;
      const rows = (await readTable(d, 'events')).filter(before);
      expectTableMatches(rows, emu.snapshot('events').filter(before), 'id', 'events');
      // It did split: the timeseries was asked where events lie, and several sub-windows checkpointed.
      expect(emu.stats().byEndpoint['/v1/events/timeseries'] ?? 0).toBeGreaterThan(0);
    });

    it(`rows sharing one timestamp at a sub-window edge are read once, in one sub-window (${order})`, async () => {
      const emu = await emulator({ seed: 32, eventsPerProject: 300, projects: ['default'], order });
      const d = dir();
      const now = Date.now();
      const from = now - 40 * DAY;
      const edge = now - 10 * DAY;
      const to = now - DAY;
      // More than two pages at the very instant two sub-windows meet, some at each outer edge.
      emu.addEvents('default', 250, { timestamp: edge });
      emu.addEvents('default', 3, { timestamp: edge - 1 });
      emu.addEvents('default', 5, { timestamp: from });
      emu.addEvents('default', 4, { timestamp: to });
      emu.addEvents('default', 2, { timestamp: to - 1 });
      // A split a killed run left before any sub-window stored a page: the edge between its two
      // sub-windows is the instant 250 rows share.
      writeSplitLeft(d, 'events:default', from, edge, to);
      const summary = await syncOnce({
        baseUrl: emu.url,
        apiKey: emu.apiKey,
        dir: d,
        resources: [events],
        batchRows: 50,
      });
      expect(summary.ok, JSON.stringify(summary.streams.map((s) => s.error?.message))).toBe(true);
      const rows = await readTable(d, 'events');
      expectTableMatches(rows, emu.snapshot('events', 'default'), 'id', 'events');
      expect(rows.filter((r) => Date.parse(String(r.timestamp)) === edge)).toHaveLength(250);
      const after = (await StateStore.read(statePathOf(d))).streams['events:default'];
      expect(after?.split).toBeUndefined();
      expect(Date.parse(after?.mark ?? '')).toBeGreaterThan(to);
    });
  }

  for (const order of ['desc', 'asc'] as const) {
    it(`kill -9 after a running sub-window was cut: both sides resume, every row once (${order})`, async () => {
      expect(existsSync(CLI), `build first (npm test runs tsc): ${CLI}`).toBe(true);
      const emu = await emulator({ seed: 34, eventsPerProject: 40, projects: ['default'], order, latencyMs: 10 });
      const d = dir();
      const now = Date.now();
      const from = now - 40 * DAY;
      const edge = now - 10 * DAY;
      const to = edge + 150;
      // A split a killed run left: a sub-window of a few pages, and one of 30 pages with 20 events
      // at every ms; the kill lands once a cut of it is in state and its sides have cursors.
      emu.addEvents('default', 3, { timestamp: edge - 5_000 });
      for (let ms = 0; ms < 150; ms += 1) emu.addEvents('default', 20, { timestamp: edge + ms });
      writeSplitLeft(d, 'events:*', from, edge, to);
      const args = ['--concurrency', '4'];
      const cutAndWalking = (doc: StateDocument): boolean => {
        const parts = doc.streams['events:*']?.split?.parts ?? [];
        const inDense = parts.filter((p) => Date.parse(p.from) >= edge);
        return inDense.length >= 2 && inDense.filter((p) => p.cursor !== undefined).length >= 2;
      };
      const killed = await syncInChild(emu, d, { parts: 0, thenMs: 0, when: cutAndWalking }, args);
      expect(killed.signal, killed.out).toBe('SIGKILL');
      const left = (await StateStore.read(statePathOf(d))).streams['events:*'];
      // State never moves past data not stored: the split is open, the dense sub-window in two or more parts.
      expect(left?.split?.parts.filter((p) => Date.parse(p.from) >= edge).length ?? 0).toBeGreaterThanOrEqual(2);
      expect(left?.mark).toBeUndefined();

      const final = await syncInChild(emu, d, undefined, args);
      expect(final.code, final.out).toBe(0);
      const after = (await StateStore.read(statePathOf(d))).streams['events:*'];
      expect(after?.split).toBeUndefined();
      const rows = await readTable(d, 'events');
      expectTableMatches(rows, emu.snapshot('events', 'default'), 'id', 'events');
    });
  }

  it('a window with few pages is read in one walk: no count, a timeseries only on the first sync, no partial page spent', async () => {
    const emu = await emulator({ seed: 33, eventsPerProject: 150, projects: ['default'] });
    const d = dir();
    const summary = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [events] });
    expect(summary.ok).toBe(true);
    // The first sync's timeseries says the window is small: one walk, its two pages, no count. The
    // one count is the reconcile's after the walk (the history older than its two recent days).
    const stats = emu.stats().byEndpoint;
    expect(stats['/v1/events/count'] ?? 0).toBe(1);
    expect(stats['/v1/events/timeseries'] ?? 0).toBeGreaterThan(0);
    expect(stats['/v1/events']).toBe(2);
    expectTableMatches(await readTable(d, 'events'), emu.snapshot('events', 'default'), 'id', 'events');
    // An incremental sync of a small window: its first page shows it small; the walk asks nothing
    // else. The one timeseries is the reconcile's after it (the recent two days, by the hour).
    emu.addEvents('default', 5);
    emu.resetStats();
    expect((await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir: d, resources: [events] })).ok).toBe(true);
    expect(emu.stats().byEndpoint['/v1/events/timeseries'] ?? 0).toBe(1);
    expect(emu.stats().byEndpoint['/v1/events/count'] ?? 0).toBe(0);
    expect(emu.stats().byEndpoint['/v1/events']).toBe(1);
    expectTableMatches(await readTable(d, 'events'), emu.snapshot('events', 'default'), 'id', 'events');
  });
});
