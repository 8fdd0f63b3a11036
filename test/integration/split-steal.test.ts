import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { createLogger } from '../../src/core/log.js';
import { StateStore } from '../../src/state/store.js';
import { recordsOverTime } from '../../src/extract/timeseries.js';
import { singleProjectScope } from '../../src/sync/scopes.js';
import { streamCallContext } from '../../src/sync/frame.js';
import {
  expectTableMatches,
  readTable,
  statePathOf,
  syncOnce,
  withPipeline,
  writeSplitLeft,
} from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

/**
 * Tail work-stealing (`stream.ts` `steal`, `walk.ts` `WalkBounds`): when a split has no part left
 * to start, a running sub-window with many pages left is cut, its far side read by another walk.
 * Correctness only (never speed): every row once, rows at each cut's instant on one side, the mark
 * only after every side. The kill -9 case is in split-walk.test.ts (slow group).
 */

const DAY = 86_400_000;
const iso = (ms: number): string => new Date(ms).toISOString();

/** A logger keeping its JSON lines, to read which cuts a run made. */
function capturingLogger(): { logger: ReturnType<typeof createLogger>; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n'))
        if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: createLogger({ level: 'debug', destination }), lines };
}

describe('cutting running sub-windows', () => {
  for (const order of ['desc', 'asc'] as const) {
    it(`the far side of a long running walk is read by another: every row once, rows at each cut on one side (${order === 'desc' ? 'newest' : 'oldest'} first)`, async () => {
      const emu = await emulator({ seed: 41, eventsPerProject: 40, projects: ['default'], order, latencyMs: 5 });
      const d = dir();
      const now = Date.now();
      const edge = now - 10 * DAY;
      const from = now - 40 * DAY; // before every seeded event
      const to = edge + 60;
      // A split a killed run left: a sub-window of a few pages, and one holding 12 pages in 60 ms with
      // 20 events at every ms, so any cut falls on an instant that rows share, often across pages.
      emu.addEvents('default', 3, { timestamp: edge - 5_000 });
      for (let ms = 0; ms < 60; ms += 1) emu.addEvents('default', 20, { timestamp: edge + ms });
      emu.addEvents('default', 2, { timestamp: to });
      writeSplitLeft(d, 'events:default', from, edge, to);
      const { logger, lines } = capturingLogger();
      const summary = await syncOnce({
        baseUrl: emu.url,
        apiKey: emu.apiKey,
        dir: d,
        resources: [events],
        batchRows: 200,
        concurrency: 4,
        client: { logger },
      });
      expect(summary.ok, JSON.stringify(summary.streams.map((s) => s.error?.message))).toBe(true);

      const cuts = lines
        .filter((l) => String(l.msg).startsWith('running sub-window cut'))
        .map((l) => Date.parse(String(l.at)));
      expect(cuts.length, 'the long sub-window was cut while it ran').toBeGreaterThan(0);
      const rows = await readTable(d, 'events');
      expectTableMatches(rows, emu.snapshot('events', 'default'), 'id', 'events');
      for (const at of cuts) {
        expect(at).toBeGreaterThan(edge);
        expect(at).toBeLessThan(to);
        expect(
          rows.filter((r) => Date.parse(String(r.timestamp)) === at),
          `rows at the cut ${iso(at)}`,
        ).toHaveLength(20);
      }
      const after = (await StateStore.read(statePathOf(d))).streams['events:default'];
      expect(after?.split).toBeUndefined();
      expect(Date.parse(after?.mark ?? '')).toBeGreaterThan(to);
    });
  }

  it('a first sync learns where records lie in one round trip when all are in the last two months, else asks again, finer', async () => {
    const emu = await emulator({ seed: 42, eventsPerProject: 200, projects: ['default'] });
    const scope = singleProjectScope('default');
    const decl = events.split as NonNullable<typeof events.split>;
    await withPipeline({ baseUrl: emu.url, apiKey: emu.apiKey, dir: dir() }, 'sync', async ({ client }) => {
      const ask = () =>
        recordsOverTime(
          client,
          decl,
          scope,
          { fromMs: 0, toMs: Date.now() },
          streamCallContext(events, scope, undefined),
        );
      const sum = (lie: Awaited<ReturnType<typeof ask>>): number => lie.buckets.reduce((n, b) => n + b.count, 0);
      const young = await ask();
      expect(young).toMatchObject({
        requests: 2,
        rounds: 1,
        interval: 'hour',
        total: emu.snapshot('events', 'default').length,
      });
      expect(sum(young)).toBe(young.total);
      // A record older than the hours asked at once: the coarse answer says so, and the finer ask follows it.
      emu.addEvents('default', 5, { timestamp: Date.now() - 100 * DAY });
      const old = await ask();
      expect(old).toMatchObject({
        requests: 3,
        rounds: 2,
        interval: 'day',
        total: emu.snapshot('events', 'default').length,
      });
      expect(sum(old)).toBe(old.total);
    });
  });
});
