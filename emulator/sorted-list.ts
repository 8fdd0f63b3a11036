/**
 * Records kept sorted by (sort key, id, project), with binary search for time windows and keyset
 * positions. Lists are sorted once when seeded and kept sorted by insertion, never re-sorted per
 * request. A walk merges the lists of several projects for the all-projects scope.
 */

/** A time in ms, or a nanosecond epoch (traces) as `bigint`. One list uses one kind. */
export type SortKey = number | bigint;

export interface Entry {
  readonly project: string;
  readonly id: string;
  readonly sortKey: SortKey;
}

/** A keyset position: where a walk stopped. */
export interface Position {
  readonly sortKey: SortKey;
  readonly id: string;
  readonly project: string;
}

export type Direction = 'asc' | 'desc';

function comparePositions(a: Position, b: Position): number {
  if (a.sortKey < b.sortKey) return -1;
  if (a.sortKey > b.sortKey) return 1;
  if (a.id < b.id) return -1;
  if (a.id > b.id) return 1;
  if (a.project < b.project) return -1;
  if (a.project > b.project) return 1;
  return 0;
}

export class SortedList<E extends Entry> {
  private readonly items: E[];

  constructor(items: E[] = []) {
    this.items = items.sort(comparePositions);
  }

  get length(): number {
    return this.items.length;
  }

  at(index: number): E | undefined {
    return this.items[index];
  }

  values(): readonly E[] {
    return this.items;
  }

  insert(entry: E): void {
    this.items.splice(this.firstNotBefore(entry), 0, entry);
  }

  /** Removes `entry` (the same object); call before changing its sort key. */
  remove(entry: E): boolean {
    const index = this.firstNotBefore(entry);
    if (this.items[index] !== entry) return false;
    this.items.splice(index, 1);
    return true;
  }

  /** Index of the first entry whose sort key is >= `key`. */
  lowerBound(key: SortKey): number {
    return this.firstNot((entry) => entry.sortKey < key);
  }

  /** Index of the first entry >= `position` in (key, id, project) order. */
  firstNotBefore(position: Position): number {
    return this.firstNot((entry) => comparePositions(entry, position) < 0);
  }

  /** Index of the first entry strictly after `position`. */
  firstAfter(position: Position): number {
    return this.firstNot((entry) => comparePositions(entry, position) <= 0);
  }

  /** Binary search: the index of the first entry for which `before` is false (it holds for a prefix of the sorted entries). */
  private firstNot(before: (entry: E) => boolean): number {
    let lo = 0;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (before(this.items[mid]!)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** [start, end) of the entries with lower <= key < upper. */
  range(lower: SortKey | undefined, upper: SortKey | undefined): [number, number] {
    const start = lower === undefined ? 0 : this.lowerBound(lower);
    const end = upper === undefined ? this.items.length : this.lowerBound(upper);
    return [start, Math.max(start, end)];
  }
}

export interface WalkOptions<E extends Entry> {
  readonly lists: readonly SortedList<E>[];
  readonly direction: Direction;
  /** Inclusive lower bound of the sort key. */
  readonly lower?: SortKey;
  /** Exclusive upper bound of the sort key. */
  readonly upper?: SortKey;
  /** Continue strictly after this position, in walk direction. */
  readonly after?: Position;
  readonly predicate?: (entry: E) => boolean;
  readonly limit: number;
}

export interface Page<E> {
  readonly items: E[];
  readonly hasMore: boolean;
}

interface Cursor<E> {
  readonly list: SortedList<E & Entry>;
  next: number;
  readonly stop: number;
}

/** One page of a keyset walk over one or more lists (merged in walk order). */
export function walk<E extends Entry>(options: WalkOptions<E>): Page<E> {
  const { direction, predicate, limit } = options;
  const asc = direction === 'asc';
  const cursors: Cursor<E>[] = [];
  for (const list of options.lists) {
    let [start, end] = list.range(options.lower, options.upper);
    if (options.after) {
      if (asc) start = Math.max(start, list.firstAfter(options.after));
      else end = Math.min(end, list.firstNotBefore(options.after));
    }
    if (start >= end) continue;
    cursors.push(asc ? { list, next: start, stop: end } : { list, next: end - 1, stop: start - 1 });
  }
  const items: E[] = [];
  for (;;) {
    let best: Cursor<E> | undefined;
    let bestEntry: E | undefined;
    for (const cursor of cursors) {
      if (cursor.next === cursor.stop) continue;
      const entry = cursor.list.at(cursor.next)!;
      if (bestEntry === undefined || comparePositions(entry, bestEntry) < 0 === asc) {
        best = cursor;
        bestEntry = entry;
      }
    }
    if (best === undefined || bestEntry === undefined) return { items, hasMore: false };
    best.next += asc ? 1 : -1;
    if (predicate && !predicate(bestEntry)) continue;
    if (items.length === limit) return { items, hasMore: true };
    items.push(bestEntry);
  }
}

/** Calls `visit` for every entry in [lower, upper) of every list, in no particular list order. */
export function scan<E extends Entry>(
  lists: readonly SortedList<E>[],
  lower: SortKey | undefined,
  upper: SortKey | undefined,
  visit: (entry: E) => void,
): void {
  for (const list of lists) {
    const [start, end] = list.range(lower, upper);
    for (let i = start; i < end; i++) visit(list.at(i)!);
  }
}

/** Entries in [lower, upper) that pass `predicate`; O(log n) per list without a predicate. */
export function count<E extends Entry>(
  lists: readonly SortedList<E>[],
  lower: SortKey | undefined,
  upper: SortKey | undefined,
  predicate?: (entry: E) => boolean,
): number {
  let total = 0;
  if (!predicate) {
    for (const list of lists) {
      const [start, end] = list.range(lower, upper);
      total += end - start;
    }
    return total;
  }
  scan(lists, lower, upper, (entry) => {
    if (predicate(entry)) total++;
  });
  return total;
}
