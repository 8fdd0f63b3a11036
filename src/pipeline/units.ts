import type PQueue from 'p-queue';
import type { Clock } from '../core/types.js';
import { syncWindow, type TimeWindow } from '../extract/windows.js';
import type { ConcurrencyController } from '../http/concurrency.js';
import { newCallStats, type CallContext, type CallStats } from '../http/client.js';
import { isCovered, runningOf, type RunningWindow, type StreamLedger } from '../state/ledger.js';
import type { PendingWindow, StateWriter, StreamState } from '../state/store.js';

/**
 * Work units: every way rows are read is a producer of work units over one runner.
 *
 * A work unit is what one walk reads: a closed-open window (a sync window, a sub-window of a split,
 * a settle re-read, a backfill window) with the cursor it resumes from, or a chunk of parent ids
 * (per-parent children). Its progress lives in state in the same commit as its rows (`state.withBatch`),
 * through its book (`UnitBook`): the next cursor while it is open, "done" with its last batch. So the
 * state is finished ranges (the mark, the settle mark, the ledger's done windows, the children's done
 * ids) plus the units still open (pending, split parts, settlePending, the ledger's running windows,
 * the children's pending ids), and a run is the producer asking state what is open.
 *
 * Producers: `splitUnits`, `syncWindowUnit`, `resumedSettleUnit` and `settleWindow` below (sync,
 * driven from state by `stream.ts`; `plan` counts the same units), `ledgerUnits` (backfill and
 * `verify --repair`), the child queue's chunks (`children.ts`). One runner, `runUnits`, reads them.
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

/** How a producer records a unit's progress in state (applied inside the batch's commit). */
export interface UnitBook<U> {
  /** The unit's rows up to `nextCursor` are stored; `null`: it is done. Written through `state`, the batch's writer. */
  checkpoint(unit: U, nextCursor: string | null, state: StateWriter): Promise<void>;
  /** The server refused the unit's cursor: it restarts from its first page. */
  cursorRejected(unit: U): Promise<void>;
  /** A unit not yet read is replaced by `subs` that cover it (a re-split). */
  replace?(unit: U, subs: readonly TimeWindow[]): Promise<void>;
}

// ---- the sync producer (pure: state in, units out) ----

type WindowOptions = { readonly runStartMs: number; readonly lookbackMs: number; readonly startMs?: number };

/** The next window to read, resuming a checkpoint first; `undefined` when caught up. */
export function nextWindow(st: StreamState, options: WindowOptions): { window: TimeWindow; cursor: string | undefined } | undefined {
  if (st.pending !== undefined) {
    return { window: { fromMs: Date.parse(st.pending.from), toMs: Date.parse(st.pending.to) }, cursor: st.pending.cursor };
  }
  const window = syncWindow(st.mark === undefined ? undefined : Date.parse(st.mark), options);
  return window === undefined ? undefined : { window, cursor: undefined };
}

/** The split in state as units (its parts, each with its cursor), or `undefined` when none is under way. */
export function splitUnits(st: StreamState): SyncUnit[] | undefined {
  const split = st.split;
  if (split === undefined) return undefined;
  const whole = msWindow(split);
  return split.parts.map((p) => ({ kind: 'part', window: msWindow(p), split: whole, ...(p.cursor === undefined ? {} : { cursor: p.cursor }) }));
}

/** The window unit a sync reads next (after any split in state); `undefined` when caught up. */
export function syncWindowUnit(st: StreamState, options: WindowOptions): SyncUnit | undefined {
  const next = nextWindow(st, options);
  return next === undefined ? undefined : { kind: 'window', window: next.window, ...(next.cursor === undefined ? {} : { cursor: next.cursor }) };
}

/** The settle re-read a killed run left (`settlePending`), as a unit. */
export function resumedSettleUnit(st: StreamState): SyncUnit | undefined {
  const resumed = st.settlePending;
  if (resumed === undefined) return undefined;
  const window = msWindow(resumed);
  return { kind: 'settle', window, settledTo: window.toMs, ...(resumed.cursor === undefined ? {} : { cursor: resumed.cursor }) };
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
  else if (markBefore !== undefined) fromMs = Date.parse(markBefore) - options.lookbackMs - options.settleMs; // state from before the settle pass
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
      return nextCursor === null ? { ...s, mark: maxIso(s.mark, iso(unit.window.toMs)), pending: undefined } : { ...s, pending: pending() };
    case 'settle':
      return nextCursor === null ? { ...s, settled: maxIso(s.settled, iso(unit.settledTo)), settlePending: undefined } : { ...s, settlePending: pending() };
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
      return { ...s, settlePending: s.settlePending ? { from: s.settlePending.from, to: s.settlePending.to } : undefined };
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
export function withPartCheckpoint(s: StreamState, part: PendingWindow | PartRef, nextCursor: string | null): StreamState {
  const split = s.split;
  if (split === undefined) return s;
  const same = isPart(asRef(part));
  if (nextCursor !== null) {
    return { ...s, split: { ...split, parts: split.parts.map((p) => (same(p) ? { from: p.from, to: p.to, cursor: nextCursor } : p)) } };
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
export function withPartCut(s: StreamState, ref: PartRef & { readonly anchor: 'from' | 'to' }, atMs: number): StreamState {
  const split = s.split;
  if (split === undefined) return s;
  const same = isPart(ref);
  const at = iso(atMs);
  const parts = split.parts.flatMap((p) => {
    if (!same(p) || !(Date.parse(p.from) < atMs && atMs < Date.parse(p.to))) return [p];
    const cursor = p.cursor === undefined ? {} : { cursor: p.cursor };
    return ref.anchor === 'to' ? [{ from: at, to: p.to, ...cursor }, { from: p.from, to: at }] : [{ from: p.from, to: at, ...cursor }, { from: at, to: p.to }];
  });
  return { ...s, split: { ...split, parts } };
}

// ---- the ledger's producer (backfill, `verify --repair`, and the plan of a backfill) ----

/** A backfill unit: a window of the ledger (none: the whole resource, read once), with what a crashed run left of it. */
export interface LedgerUnit {
  readonly window: TimeWindow | undefined;
  /** The ledger has it done (skipped). */
  readonly done?: boolean;
  /** Its running entry: the cursor to resume from, the rows and pages stored so far, since when. */
  readonly resumed?: RunningWindow;
}

/** The units of `windows` as the ledger has them: done, resumed, or to read; `force` reads every one afresh (repair). */
export function ledgerUnits(stream: StreamLedger, windows: readonly TimeWindow[], force: boolean): LedgerUnit[] {
  return windows.map((window) => {
    if (force) return { window };
    if (isCovered(window, stream.done)) return { window, done: true };
    const resumed = runningOf(stream, window);
    return resumed === undefined ? { window } : { window, resumed };
  });
}

// ---- the runner ----

/** What the runner gives each unit: its own call counters, and the page hook that feeds the controller. */
export interface SubWalk {
  /** The unit's own call context (same lane as the stream, its own counters). */
  readonly ctx: CallContext;
  /** Call after each page: feeds the controller and adds the counters to the stream's. */
  readonly onPage: () => void;
  /** Feed the controller one sample of the unit's own making (and add the counters to the stream's). */
  readonly record: (sample: { readonly waitedMs: number; readonly latencyMs: number; readonly rateLimited: boolean }) => void;
}

/**
 * Where units come from. `take` is asked whenever a slot is free (after every page and every
 * finished unit): a unit to run; `'wait'` (none now, more may come: ask again after `changed()`);
 * `'end'` (take no more); or `undefined` (none now: ask again when a running unit ends, and the run
 * ends once none runs).
 */
export interface UnitSource<U> {
  take(running: number): U | 'wait' | 'end' | undefined;
  changed?(): Promise<void>;
  /** Units a finished one handed back (a re-split): taken next. */
  putBack?(units: readonly U[]): void;
  /** A unit ended (stored to the end, or not). */
  release?(unit: U): void;
  /**
   * Units that may run at once beyond the limit now (the source's own judgement, e.g. the far side
   * of a running walk cut at the tail while the walks wait on the network: the adaptive limit,
   * shrunk while the budget bound, follows by one walk a second).
   */
  room?(running: number): number;
}

/** A list of units that grows at its front (units handed back are taken first). */
export function unitList<U>(units: readonly U[]): UnitSource<U> {
  const todo = [...units];
  return { take: () => todo.shift(), putBack: (more) => todo.unshift(...more) };
}

export interface RunUnitsOptions {
  /** At most this many units at once: a fixed number, or the adaptive controller (read again after every page). */
  readonly limit: number | ConcurrencyController;
  /** The stream's call context: the units' counters are added to its stats; its signal stops new units. */
  readonly ctx: CallContext;
  readonly clock: Pick<Clock, 'now'>;
  /** A pool shared with other streams (a backfill's window slots): each unit runs in one of its slots. */
  readonly slots?: PQueue;
}

/**
 * Run units from `source`, at most `limit` at once. A unit may end by handing back the units it was
 * replaced with (a re-split): the source takes them next. The first failure stops new units from
 * starting; those running finish (their checkpoints are kept) and the failure is thrown. An abort
 * (the context's signal) stops new units too: resolves `'aborted'` once running ones end.
 */
export async function runUnits<U>(
  source: UnitSource<U>,
  options: RunUnitsOptions,
  run: (unit: U, sub: SubWalk) => Promise<readonly U[] | void>,
): Promise<'done' | 'aborted'> {
  const { ctx: streamCtx, clock, slots } = options;
  const controller = typeof options.limit === 'number' ? undefined : options.limit;
  const limit = (): number => Math.max(typeof options.limit === 'number' ? options.limit : options.limit.limit, source.room?.(running) ?? 0);
  const aborted = (): boolean => streamCtx.signal?.aborted === true;
  let running = 0;
  let failure: unknown;
  let failed = false;
  let ended = false;
  let waiting = false;
  return new Promise<'done' | 'aborted'>((resolve, reject) => {
    const settle = (): void => {
      if (running > 0) return;
      if (failed) reject(failure);
      else if (aborted()) resolve('aborted');
      else if (ended) resolve('done');
    };
    const fill = (): void => {
      while (!failed && !ended && !aborted() && running < limit()) {
        let unit: U | 'wait' | 'end' | undefined;
        try {
          unit = source.take(running);
        } catch (error) {
          // A producer that cannot say what is open (state it cannot read) fails the run like a unit.
          failed = true;
          failure = error;
          break;
        }
        if (unit === 'end' || (unit === undefined && running === 0)) {
          ended = true;
          break;
        }
        if (unit === undefined) break;
        if (unit === 'wait') {
          if (!waiting && source.changed !== undefined) {
            waiting = true;
            void source.changed().then(() => {
              waiting = false;
              fill();
            });
          }
          break;
        }
        running += 1;
        const sub = subWalk(streamCtx, controller, clock, fill);
        // The failure is noted inside the unit's slot: in a shared pool, the next slot (which may be
        // this stream's next unit) starts as soon as this one ends, and must see it.
        const once = async (): Promise<readonly U[] | void> => {
          if (failed) return;
          try {
            return await run(unit, sub);
          } catch (error) {
            if (!failed) {
              failed = true;
              failure = error;
            }
          }
        };
        (slots === undefined ? once() : (slots.add(once) as Promise<readonly U[] | void>))
          .then((more) => {
            if (more !== undefined && more.length > 0) source.putBack?.(more);
          })
          .catch((error: unknown) => {
            if (!failed) {
              failed = true;
              failure = error;
            }
          })
          .finally(() => {
            source.release?.(unit);
            sub.onPage();
            running -= 1;
            fill();
            settle();
          });
      }
      settle();
    };
    fill();
  });
}

function subWalk(streamCtx: CallContext, controller: ConcurrencyController | undefined, clock: Pick<Clock, 'now'>, fill: () => void): SubWalk {
  const stats = newCallStats();
  const ctx: CallContext = { ...streamCtx, stats };
  const folded: CallStats = newCallStats();
  let lastAt = clock.now();
  const fold = (): void => {
    for (const k of ['requests', 'retries', 'rateLimited', 'backoffMs', 'waitedMs'] as const) {
      streamCtx.stats[k] += stats[k] - folded[k];
      folded[k] = stats[k];
    }
  };
  return {
    ctx,
    onPage: () => {
      const now = clock.now();
      const waitedMs = stats.waitedMs - folded.waitedMs;
      const rateLimited = stats.rateLimited - folded.rateLimited;
      if (stats.requests > folded.requests) {
        controller?.record({ waitedMs, latencyMs: Math.max(0, now - lastAt - waitedMs), rateLimited: rateLimited > 0 });
      }
      lastAt = now;
      fold();
      fill();
    },
    record: (sample) => {
      controller?.record(sample);
      lastAt = clock.now();
      fold();
    },
  };
}

const iso = (ms: number): string => new Date(ms).toISOString();
const isoWindow = (w: TimeWindow): PendingWindow => ({ from: iso(w.fromMs), to: iso(w.toMs) });
const msWindow = (w: { readonly from: string; readonly to: string }): TimeWindow => ({ fromMs: Date.parse(w.from), toMs: Date.parse(w.to) });

function maxIso(a: string | undefined, b: string): string {
  return a !== undefined && Date.parse(a) > Date.parse(b) ? a : b;
}
