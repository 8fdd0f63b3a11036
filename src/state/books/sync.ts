import { syncWindow, type TimeWindow } from '../../extract/windows.js';
import type { StateWriter } from '../batch.js';
import type { PendingWindow, SplitWindow, StreamState } from '../document.js';
import type { Book } from './book.js';

/**
 * The sync's book: where a sync stream's mark moves. Its units are produced from the stream's
 * state (`mark`, `pending`, `split.parts`, `settled`, `settlePending`: pure functions, state in,
 * units out; `plan` counts the same units), and each unit's progress is recorded back into it:
 * `withUnitCheckpoint` (the next cursor while open; done: the mark, the split or the settle mark
 * moves), `withoutUnitCursor`, `withPartCut`, `withPartReplaced`. `syncBook` applies them to one
 * stream; the pipeline walks the units (`sync/stream-reader.ts`).
 */

/** A window unit of a sync stream (the persisted shape is `StreamState`'s: mark, pending, split, settled). */
export type SyncUnit =
  /** The stream's next window (`pending` when it has a cursor). */
  | { readonly kind: 'window'; readonly window: TimeWindow; readonly cursor?: string }
  /** A sub-window of the split in state (`split.parts`), read at once with its siblings. */
  | {
      readonly kind: 'part';
      readonly window: TimeWindow;
      readonly cursor?: string;
      readonly split: TimeWindow;
      /** The edge a walk of it keeps once it may have been cut while running (`withPartCut`); asked at each checkpoint. */
      readonly anchor?: () => 'from' | 'to' | undefined;
    }
  /** A settle re-read (`settlePending` when it has a cursor); done moves `settled` to `settledTo`. */
  | { readonly kind: 'settle'; readonly window: TimeWindow; readonly cursor?: string; readonly settledTo: number };

type WindowOptions = { readonly runStartMs: number; readonly lookbackMs: number; readonly startMs?: number };

/** The next window to read, resuming a checkpoint first; `undefined` when caught up. */
export function nextWindow(
  st: StreamState,
  options: WindowOptions,
): { window: TimeWindow; cursor: string | undefined } | undefined {
  if (st.pending !== undefined) {
    return {
      window: { fromMs: Date.parse(st.pending.from), toMs: Date.parse(st.pending.to) },
      cursor: st.pending.cursor,
    };
  }
  const window = syncWindow(st.mark === undefined ? undefined : Date.parse(st.mark), options);
  return window === undefined ? undefined : { window, cursor: undefined };
}

/** The split in state as units (its parts, each with its cursor), or `undefined` when none is under way. */
export function splitUnits(st: StreamState): SyncUnit[] | undefined {
  const split = st.split;
  if (split === undefined) return undefined;
  const whole = msWindow(split);
  return split.parts.map((p) => ({
    kind: 'part',
    window: msWindow(p),
    split: whole,
    ...(p.cursor === undefined ? {} : { cursor: p.cursor }),
  }));
}

/** The window unit a sync reads next (after any split in state); `undefined` when caught up. */
export function syncWindowUnit(st: StreamState, options: WindowOptions): SyncUnit | undefined {
  const next = nextWindow(st, options);
  return next === undefined
    ? undefined
    : { kind: 'window', window: next.window, ...(next.cursor === undefined ? {} : { cursor: next.cursor }) };
}

/**
 * What a sync reads next from the stream's state, the one order of its window units: the parts of
 * a split under way (read at once), else the window left mid-way (`pending`), else the next window;
 * `undefined` when caught up. The run asks it each time the units before have ended
 * (`sync/stream-reader.ts`); `plan` steps through it, applying each unit as done.
 */
export function nextSyncUnits(
  st: StreamState,
  options: WindowOptions,
):
  | { readonly kind: 'split'; readonly parts: SyncUnit[] }
  | { readonly kind: 'window'; readonly unit: SyncUnit }
  | undefined {
  const parts = splitUnits(st);
  if (parts !== undefined) return { kind: 'split', parts };
  const unit = syncWindowUnit(st, options);
  return unit === undefined ? undefined : { kind: 'window', unit };
}

/** The settle re-read a killed run left (`settlePending`), as a unit. */
export function resumedSettleUnit(st: StreamState): SyncUnit | undefined {
  const resumed = st.settlePending;
  if (resumed === undefined) return undefined;
  const window = msWindow(resumed);
  return {
    kind: 'settle',
    window,
    settledTo: window.toMs,
    ...(resumed.cursor === undefined ? {} : { cursor: resumed.cursor }),
  };
}

/**
 * The settle re-read of this run: records in [settled, now − settle) were last read while fresh,
 * except those this run's windows just read (from `readFromMs` on), which are read settled already.
 * So each record is read once more at most, and only the part no window of this run covered. A
 * first sync reads nothing here: everything older than `now − settle` it read settled. A window
 * shorter than the lookback (runs back to back) is left for a later run.
 */
export function settleWindow(
  st: StreamState,
  options: WindowOptions & { readonly settleMs: number },
  markBefore: string | undefined,
  readFromMs: number | undefined,
): { readonly window?: TimeWindow; readonly settledTo: number } {
  const settledTo = Math.max(options.startMs ?? 0, options.runStartMs - options.settleMs);
  let fromMs: number;
  if (st.settled !== undefined) fromMs = Date.parse(st.settled);
  else if (markBefore !== undefined)
    fromMs = Date.parse(markBefore) - options.lookbackMs - options.settleMs; // state from before the settle pass
  else fromMs = settledTo; // first sync
  fromMs = Math.max(options.startMs ?? 0, fromMs);
  const toMs = Math.min(settledTo, readFromMs ?? settledTo);
  if (fromMs >= toMs) return { settledTo };
  // A sliver (runs back to back) waits until it is worth a request: the settle mark stays put.
  if (toMs - fromMs < Math.min(options.lookbackMs, options.settleMs)) return { settledTo: fromMs };
  return { window: { fromMs, toMs }, settledTo };
}

/** The book of a sync unit: its checkpoint in the stream's state. `null` finishes it (mark, split or settle mark moves). */
export function withUnitCheckpoint(s: StreamState, unit: SyncUnit, nextCursor: string | null): StreamState {
  const pending = (): PendingWindow => ({ ...isoWindow(unit.window), cursor: nextCursor as string });
  switch (unit.kind) {
    case 'window':
      return nextCursor === null
        ? { ...s, mark: maxIso(s.mark, iso(unit.window.toMs)), pending: undefined }
        : { ...s, pending: pending() };
    case 'settle':
      return nextCursor === null
        ? { ...s, settled: maxIso(s.settled, iso(unit.settledTo)), settlePending: undefined }
        : { ...s, settlePending: pending() };
    case 'part':
      return withPartCheckpoint(s, { part: isoWindow(unit.window), anchor: unit.anchor?.() }, nextCursor);
  }
}

/** The server refused a sync unit's cursor: the unit restarts from its first page. */
export function withoutUnitCursor(s: StreamState, unit: SyncUnit): StreamState {
  switch (unit.kind) {
    case 'window':
      return { ...s, pending: s.pending ? { from: s.pending.from, to: s.pending.to } : undefined };
    case 'settle':
      return {
        ...s,
        settlePending: s.settlePending ? { from: s.settlePending.from, to: s.settlePending.to } : undefined,
      };
    case 'part':
      return withoutPartCursor(s, { part: isoWindow(unit.window), anchor: unit.anchor?.() });
  }
}

/**
 * Which part of `split.parts` a walk of `part` is: the one with its window, or, once the walk was
 * cut while it ran (`withPartCut`), the one that keeps the edge it started from (`anchor`). Parts
 * are disjoint, so no two share an edge value; the anchored match finds the part before and after
 * the cut is committed, whichever commit lands first.
 */
export interface PartRef {
  readonly part: PendingWindow;
  readonly anchor?: 'from' | 'to' | undefined;
}

function isPart(ref: PartRef): (p: PendingWindow) => boolean {
  const { part, anchor } = ref;
  if (anchor === undefined) return (p) => p.from === part.from && p.to === part.to;
  const from = Date.parse(part.from);
  const to = Date.parse(part.to);
  return (p) => p[anchor] === part[anchor] && Date.parse(p.from) >= from && Date.parse(p.to) <= to;
}

const asRef = (part: PendingWindow | PartRef): PartRef => ('part' in part ? part : { part });

/**
 * A sub-window's checkpoint: its next cursor, or (`null`) it is stored to the end and leaves the
 * split; when none is left, the mark moves to the end of the window, in the same write.
 */
export function withPartCheckpoint(
  s: StreamState,
  part: PendingWindow | PartRef,
  nextCursor: string | null,
): StreamState {
  const split = s.split;
  if (split === undefined) return s;
  const same = isPart(asRef(part));
  if (nextCursor !== null) {
    return {
      ...s,
      split: {
        ...split,
        parts: split.parts.map((p) => (same(p) ? { from: p.from, to: p.to, cursor: nextCursor } : p)),
      },
    };
  }
  const left = split.parts.filter((p) => !same(p));
  if (left.length > 0) return { ...s, split: { ...split, parts: left } };
  const { split: _done, ...rest } = s;
  return { ...rest, mark: maxIso(s.mark, split.to) };
}

/** The server refused a sub-window's checkpoint cursor: that sub-window restarts from its first page. */
export function withoutPartCursor(s: StreamState, part: PendingWindow | PartRef): StreamState {
  const split = s.split;
  if (split === undefined) return s;
  const same = isPart(asRef(part));
  return {
    ...s,
    split: { ...split, parts: split.parts.map((p) => (same(p) ? { from: p.from, to: p.to } : p)) },
  };
}

/**
 * A part being walked, cut at `atMs` (tail work-stealing): the walk keeps the side it started from
 * with its cursor (newest first: [atMs, to); oldest first: [from, atMs)), and the far side becomes a
 * part of its own, read from its first page. One state write: a kill keeps the whole part or both
 * halves. The cut must lie inside the part as it is in state (else nothing changes: the part was
 * stored to the end meanwhile, or cut already).
 */
export function withPartCut(
  s: StreamState,
  ref: PartRef & { readonly anchor: 'from' | 'to' },
  atMs: number,
): StreamState {
  const split = s.split;
  if (split === undefined) return s;
  const same = isPart(ref);
  const at = iso(atMs);
  const parts = split.parts.flatMap((p) => {
    if (!same(p) || !(Date.parse(p.from) < atMs && atMs < Date.parse(p.to))) return [p];
    const cursor = p.cursor === undefined ? {} : { cursor: p.cursor };
    return ref.anchor === 'to'
      ? [
          { from: at, to: p.to, ...cursor },
          { from: p.from, to: at },
        ]
      : [
          { from: p.from, to: at, ...cursor },
          { from: at, to: p.to },
        ];
  });
  return { ...s, split: { ...split, parts } };
}

/** A new split of `window` into `parts` (each read from its first page). */
export function newSplit(window: TimeWindow, parts: readonly TimeWindow[]): SplitWindow {
  const iso = (ms: number): string => new Date(ms).toISOString();
  return {
    from: iso(window.fromMs),
    to: iso(window.toMs),
    parts: parts.map((p) => ({ from: iso(p.fromMs), to: iso(p.toMs) })),
  };
}

/** A sub-window not yet read replaced by the sub-windows that cover it (one state write: a kill keeps one or the other). */
function withPartReplaced(s: StreamState, part: PendingWindow, subs: readonly TimeWindow[]): StreamState {
  const split = s.split;
  if (split === undefined) return s;
  const iso = (ms: number): string => new Date(ms).toISOString();
  const parts = split.parts.flatMap((p) =>
    p.from === part.from && p.to === part.to ? subs.map((w) => ({ from: iso(w.fromMs), to: iso(w.toMs) })) : [p],
  );
  return { ...s, split: { ...split, parts } };
}

/**
 * The book of one sync stream (`key`): a checkpoint through the batch it commits with; a refused
 * cursor and a re-split through `store`, each durable on its own.
 */
export function syncBook(store: StateWriter, key: string): Book<SyncUnit> {
  return {
    checkpoint: (unit, nextCursor, state) => state.updateStream(key, (s) => withUnitCheckpoint(s, unit, nextCursor)),
    cursorRejected: (unit) => store.updateStream(key, (s) => withoutUnitCursor(s, unit)),
    replace: (unit, subs) => store.updateStream(key, (s) => withPartReplaced(s, isoWindow(unit.window), subs)),
  };
}

const iso = (ms: number): string => new Date(ms).toISOString();
const isoWindow = (w: TimeWindow): PendingWindow => ({ from: iso(w.fromMs), to: iso(w.toMs) });
const msWindow = (w: { readonly from: string; readonly to: string }): TimeWindow => ({
  fromMs: Date.parse(w.from),
  toMs: Date.parse(w.to),
});

function maxIso(a: string | undefined, b: string): string {
  return a !== undefined && Date.parse(a) > Date.parse(b) ? a : b;
}
