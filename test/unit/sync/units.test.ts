import PQueue from 'p-queue';
import { describe, expect, it } from 'vitest';
import { newCallStats, type CallContext } from '../../../src/http/client.js';
import { runUnits, unitList, type UnitSource } from '../../../src/sync/units.js';
import { ledgerUnits, type StreamLedger } from '../../../src/state/books/ledger.js';
import {
  resumedSettleUnit,
  splitUnits,
  syncWindowUnit,
  withoutUnitCursor,
  withUnitCheckpoint,
} from '../../../src/state/books/sync.js';
import type { StreamState } from '../../../src/state/document.js';

const T = Date.parse('2026-03-01T00:00:00.000Z');
const H = 3_600_000;
const iso = (ms: number): string => new Date(ms).toISOString();
const ctx = (signal?: AbortSignal): CallContext => ({
  resource: 'events',
  project: '*',
  lane: 'events|*',
  stats: newCallStats(),
  signal,
});
const clock = { now: () => 0 };
const tick = (ms = 2): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('runUnits (the one runner)', () => {
  it('runs beyond the limit while the source says it has room, and back within it when it has none', async () => {
    let room = 3;
    let running = 0;
    const peaks: number[] = [];
    const todo = [1, 2, 3, 4, 5, 6, 7, 8];
    const source: UnitSource<number> = { take: () => todo.shift(), room: () => room };
    const run = runUnits(source, { limit: 1, ctx: ctx(), clock }, async (n) => {
      running += 1;
      peaks.push(running);
      if (n === 3) room = 0;
      await tick(5);
      running -= 1;
    });
    await expect(run).resolves.toBe('done');
    expect(peaks).toEqual([1, 2, 3, 1, 1, 1, 1, 1]);
  });

  it('waits on a source that says "wait" until it changes, and ends when it says "end"', async () => {
    const queue: number[] = [];
    let wake: () => void = () => undefined;
    let closed = false;
    const source: UnitSource<number> = {
      take: () => (queue.length > 0 ? (queue.shift() as number) : closed ? 'end' : 'wait'),
      changed: () => new Promise<void>((r) => (wake = r)),
    };
    const read: number[] = [];
    const run = runUnits(source, { limit: 2, ctx: ctx(), clock }, async (n) => {
      await tick();
      read.push(n);
    });
    await tick(5);
    expect(read, 'nothing to read yet: the runner waits').toEqual([]);
    queue.push(1, 2, 3);
    wake();
    // Awaited until all three are read: a fixed 30 ms fails when a loaded machine runs the third unit's timer late.
    for (let i = 0; i < 500 && read.length < 3; i++) await tick(10);
    expect(read.sort()).toEqual([1, 2, 3]);
    closed = true;
    wake();
    await expect(run).resolves.toBe('done');
  });

  it('shares a pool of slots with other streams: never more units at once than the pool has, and a unit whose slot comes after a failure is not read', async () => {
    const slots = new PQueue({ concurrency: 1 });
    let running = 0;
    let peak = 0;
    const read: string[] = [];
    const unit = async (name: string): Promise<void> => {
      running += 1;
      peak = Math.max(peak, running);
      await tick(5);
      running -= 1;
      if (name === 'a1') throw new Error('a1 failed');
      read.push(name);
    };
    const a = runUnits(unitList(['a1', 'a2', 'a3']), { limit: 2, ctx: ctx(), clock, slots }, unit);
    const b = runUnits(unitList(['b1', 'b2', 'b3']), { limit: 2, ctx: ctx(), clock, slots }, unit);
    await expect(a).rejects.toThrow('a1 failed');
    await expect(b).resolves.toBe('done');
    expect(peak).toBe(1);
    expect(read).toEqual(expect.arrayContaining(['b1', 'b2', 'b3']));
    // a2 was waiting for a slot when a1 failed: it is not read; a3 never starts.
    expect(read.filter((n) => n.startsWith('a'))).toEqual([]);
  });

  it('stops taking units once aborted and says so after the running ones end', async () => {
    const abort = new AbortController();
    const read: number[] = [];
    const run = runUnits(unitList([1, 2, 3, 4]), { limit: 1, ctx: ctx(abort.signal), clock }, async (n) => {
      if (n === 2) abort.abort();
      await tick();
      read.push(n);
    });
    await expect(run).resolves.toBe('aborted');
    expect(read).toEqual([1, 2]);
  });

  it('takes the units a unit hands back (a re-split) before the rest of the list', async () => {
    const read: string[] = [];
    await runUnits(unitList(['a', 'b']), { limit: 1, ctx: ctx(), clock }, async (u) => {
      read.push(u);
      return u === 'a' ? ['a1', 'a2'] : undefined;
    });
    expect(read).toEqual(['a', 'a1', 'a2', 'b']);
  });
});

describe('the sync producer and its book (state in, units out)', () => {
  const options = { runStartMs: T + 10 * H, lookbackMs: H };

  it('a split under way is its parts; finishing every part moves the mark to its end and the next unit is the window after it', () => {
    const st: StreamState = {
      mark: iso(T),
      split: {
        from: iso(T - H),
        to: iso(T + 5 * H),
        parts: [
          { from: iso(T - H), to: iso(T + 2 * H), cursor: 'c1' },
          { from: iso(T + 2 * H), to: iso(T + 5 * H) },
        ],
      },
    };
    const parts = splitUnits(st) ?? [];
    expect(parts.map((p) => [p.window.fromMs, p.window.toMs, p.cursor])).toEqual([
      [T - H, T + 2 * H, 'c1'],
      [T + 2 * H, T + 5 * H, undefined],
    ]);
    const oneLeft = withUnitCheckpoint(st, parts[0] as (typeof parts)[0], null);
    expect(oneLeft.mark).toBe(iso(T));
    const done = withUnitCheckpoint(oneLeft, parts[1] as (typeof parts)[0], null);
    expect(done.split).toBeUndefined();
    expect(done.mark).toBe(iso(T + 5 * H));
    expect(syncWindowUnit(done, options)).toEqual({ kind: 'window', window: { fromMs: T + 4 * H, toMs: T + 10 * H } });
  });

  it('a window unit checkpoints into pending and finishes into the mark; a refused cursor keeps the window, drops the cursor', () => {
    const unit = syncWindowUnit({ mark: iso(T) }, options);
    expect(unit).toEqual({ kind: 'window', window: { fromMs: T - H, toMs: T + 10 * H } });
    const open = withUnitCheckpoint({ mark: iso(T) }, unit as NonNullable<typeof unit>, 'c9');
    expect(open.pending).toEqual({ from: iso(T - H), to: iso(T + 10 * H), cursor: 'c9' });
    expect(syncWindowUnit(open, options)).toEqual({
      kind: 'window',
      window: { fromMs: T - H, toMs: T + 10 * H },
      cursor: 'c9',
    });
    expect(withoutUnitCursor(open, unit as NonNullable<typeof unit>).pending).toEqual({
      from: iso(T - H),
      to: iso(T + 10 * H),
    });
    const done = withUnitCheckpoint(open, unit as NonNullable<typeof unit>, null);
    expect(done).toEqual({ mark: iso(T + 10 * H), pending: undefined });
  });

  it('a settle re-read a killed run left is resumed from its cursor, and finishing it moves the settle mark only', () => {
    const st: StreamState = {
      mark: iso(T + 9 * H),
      settled: iso(T),
      settlePending: { from: iso(T), to: iso(T + 3 * H), cursor: 's1' },
    };
    const unit = resumedSettleUnit(st);
    expect(unit).toEqual({
      kind: 'settle',
      window: { fromMs: T, toMs: T + 3 * H },
      cursor: 's1',
      settledTo: T + 3 * H,
    });
    expect(withUnitCheckpoint(st, unit as NonNullable<typeof unit>, null)).toEqual({
      mark: iso(T + 9 * H),
      settled: iso(T + 3 * H),
      settlePending: undefined,
    });
  });
});

describe('the ledger producer (backfill, verify --repair, plan)', () => {
  const w = (i: number): { fromMs: number; toMs: number } => ({ fromMs: T + i * H, toMs: T + (i + 1) * H });
  const stream: StreamLedger = {
    requested: [{ from: iso(T), to: iso(T + 3 * H) }],
    done: [{ from: iso(T), to: iso(T + H), rows: 5, pages: 1, at: iso(T) }],
    running: [{ from: iso(T + H), to: iso(T + 2 * H), cursor: 'r1', rows: 7, pages: 2, since: iso(T) }],
  };

  it('marks done windows, resumes a running one from its cursor with its counts, and reads every one afresh when forced (repair)', () => {
    expect(ledgerUnits(stream, [w(0), w(1), w(2)], false)).toEqual([
      { window: w(0), done: true },
      { window: w(1), resumed: stream.running[0] },
      { window: w(2) },
    ]);
    expect(ledgerUnits(stream, [w(0), w(1), w(2)], true)).toEqual([
      { window: w(0) },
      { window: w(1) },
      { window: w(2) },
    ]);
  });
});

describe('runUnits when the producer fails', () => {
  it('throws what the source threw, once the running units end', async () => {
    let calls = 0;
    const read: number[] = [];
    const source: UnitSource<number> = {
      take: () => {
        calls += 1;
        if (calls === 2) throw new Error('state unreadable');
        return calls === 1 ? 1 : undefined;
      },
    };
    const run = runUnits(source, { limit: 2, ctx: ctx(), clock }, async (n) => {
      await tick();
      read.push(n);
    });
    await expect(run).rejects.toThrow('state unreadable');
    expect(read).toEqual([1]);
  });
});
