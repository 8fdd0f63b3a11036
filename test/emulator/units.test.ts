import { describe, expect, it } from 'vitest';
import { decodeCursor, encodeCursor } from '../../emulator/cursor.js';
import { bucketStart } from '../../emulator/event-handlers.js';
import { cloneJson, toJson } from '../../emulator/json.js';
import { SlidingWindow } from '../../emulator/limits.js';
import { Random } from '../../emulator/random.js';
import { SortedList, count, walk, type Entry } from '../../emulator/sorted-list.js';

describe('toJson', () => {
  it('writes bigints as exact digits, and leaves look-alike strings alone', () => {
    const value = {
      a: 1795223955412441461n,
      b: [-5n, 0n, 1.5, 'x'],
      c: '\u0000bigint-000000000000:12',
      d: '"\\u0000bigint-',
      e: null,
      f: { g: true },
    };
    const text = toJson(value);
    expect(text).toBe(
      '{"a":1795223955412441461,"b":[-5,0,1.5,"x"],"c":"\\u0000bigint-000000000000:12","d":"\\"\\\\u0000bigint-","e":null,"f":{"g":true}}',
    );
    expect(JSON.parse(text).c).toBe(value.c);
  });

  it('cloneJson makes a deep copy', () => {
    const original = { a: [1, { b: 2n }] };
    const copy = cloneJson(original);
    expect(copy).toEqual(original);
    expect(copy.a).not.toBe(original.a);
    expect(copy.a[1]).not.toBe(original.a[1]);
  });
});

describe('Random', () => {
  it('repeats its sequence for a seed', () => {
    const a = new Random(42);
    const b = new Random(42);
    const seqA = Array.from({ length: 5 }, () => a.uuid());
    expect(Array.from({ length: 5 }, () => b.uuid())).toEqual(seqA);
    expect(new Random(43).uuid()).not.toBe(seqA[0]);
    for (const id of seqA) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Random(1).token('conv_', 5, '!')).toMatch(/^conv_[0-9a-f]{5}!$/);
  });
});

describe('cursor', () => {
  it('round-trips number and bigint positions and rejects foreign or broken cursors', () => {
    const position = { sortKey: 1795223955412441461n, id: 'span', project: 'alpha' };
    const text = encodeCursor({ resource: 'traces', direction: 'asc', position });
    expect(text).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(text, 'traces')).toEqual({ resource: 'traces', direction: 'asc', position });
    expect(decodeCursor(text, 'events')).toBeUndefined();
    expect(decodeCursor(text.slice(0, -3), 'traces')).toBeUndefined();
    expect(decodeCursor('!!', 'traces')).toBeUndefined();
    const ms = encodeCursor({
      resource: 'events',
      direction: 'desc',
      position: { sortKey: 123, id: 'e', project: 'p' },
    });
    expect(decodeCursor(ms, 'events')?.position.sortKey).toBe(123);
  });
});

describe('SortedList and walk', () => {
  const entry = (sortKey: number, id: string, project: string): Entry => ({ sortKey, id, project });

  it('merges lists of several projects in (key, id, project) order and resumes after a position', () => {
    const a = new SortedList([entry(3, 'x', 'a'), entry(1, 'y', 'a'), entry(2, 'b', 'a')]);
    const b = new SortedList([entry(2, 'b', 'b'), entry(2, 'a', 'b'), entry(5, 'z', 'b')]);
    const all = walk({ lists: [a, b], direction: 'asc', limit: 10 });
    expect(all.items.map((e) => `${e.sortKey}${e.id}${e.project}`)).toEqual(['1ya', '2ab', '2ba', '2bb', '3xa', '5zb']);
    expect(all.hasMore).toBe(false);
    const first = walk({ lists: [a, b], direction: 'desc', limit: 2 });
    expect(first.items.map((e) => `${e.sortKey}${e.id}${e.project}`)).toEqual(['5zb', '3xa']);
    expect(first.hasMore).toBe(true);
    const next = walk({ lists: [a, b], direction: 'desc', limit: 2, after: first.items[1] });
    expect(next.items.map((e) => `${e.sortKey}${e.id}${e.project}`)).toEqual(['2bb', '2ba']);
    const windowed = walk({ lists: [a, b], direction: 'asc', limit: 10, lower: 2, upper: 3 });
    expect(windowed.items.length).toBe(3);
    expect(count([a, b], 2, 3)).toBe(3);
    expect(count([a, b], undefined, undefined, (e) => e.project === 'b')).toBe(3);
  });

  it('keeps order on insert and removes the exact entry', () => {
    const list = new SortedList<Entry>([]);
    const items = [entry(5, 'a', 'p'), entry(1, 'b', 'p'), entry(5, '0', 'p'), entry(3, 'c', 'p')];
    for (const item of items) list.insert(item);
    expect(list.values().map((e) => e.id)).toEqual(['b', 'c', '0', 'a']);
    expect(list.remove(items[0]!)).toBe(true);
    expect(list.remove(entry(5, 'a', 'p'))).toBe(false);
    expect(list.values().map((e) => e.id)).toEqual(['b', 'c', '0']);
  });
});

describe('SlidingWindow', () => {
  it('counts times within the window and tells how long until it drops below a limit', () => {
    const window = new SlidingWindow(1000);
    for (const t of [0, 100, 200, 900]) window.add(t);
    expect(window.count(950)).toBe(4);
    expect(window.waitUntilBelow(4, 950)).toBe(50);
    expect(window.waitUntilBelow(2, 950)).toBe(250);
    expect(window.count(1000)).toBe(3);
    expect(window.count(1900)).toBe(0);
  });
});

describe('bucketStart', () => {
  it('aligns to UTC minute, hour, day, Monday and month', () => {
    const t = Date.parse('2026-11-19T13:47:12.345Z'); // a Thursday
    expect(new Date(bucketStart(t, 'minute')).toISOString()).toBe('2026-11-19T13:47:00.000Z');
    expect(new Date(bucketStart(t, 'hour')).toISOString()).toBe('2026-11-19T13:00:00.000Z');
    expect(new Date(bucketStart(t, 'day')).toISOString()).toBe('2026-11-19T00:00:00.000Z');
    expect(new Date(bucketStart(t, 'week')).toISOString()).toBe('2026-11-16T00:00:00.000Z');
    expect(new Date(bucketStart(Date.parse('2026-11-16T00:00:00.000Z'), 'week')).toISOString()).toBe(
      '2026-11-16T00:00:00.000Z',
    );
    expect(new Date(bucketStart(Date.parse('2026-11-15T23:59:59.999Z'), 'week')).toISOString()).toBe(
      '2026-11-09T00:00:00.000Z',
    );
    expect(new Date(bucketStart(t, 'month')).toISOString()).toBe('2026-11-01T00:00:00.000Z');
  });
});
