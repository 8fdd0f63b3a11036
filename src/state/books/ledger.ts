/**
 * The backfill ledger: per (resource, project scope), the intervals a backfill was asked for, every
 * finished window, and the windows in progress with their checkpoint cursors. Kept in the state
 * file's `backfills` section (never in the streams: a backfill does not touch the sync marks).
 * Pure functions over a plain document; the store writes it under its write lock.
 */

import { StateError } from '../../core/errors.js';
import type { StateWriter } from '../batch.js';
import type { LastRun, StateDocument } from '../document.js';
import type { Book } from './book.js';
// The window arithmetic is shared with every stage; windows.ts is pure and imports nothing.
import { isCovered as isCoveredBy, mergeWindows, subtractWindows, type TimeWindow } from '../../extract/windows.js';

/** Name of the state section that holds the ledger. */
export const BACKFILL_SECTION = 'backfills';

/** A closed-open interval [from, to) of ISO instants. */
export interface Interval {
  readonly from: string;
  readonly to: string;
}

/**
 * Finished windows: a window read to the end, or consecutive ones merged into one interval (the
 * ledger keeps finished time as merged intervals, so its size follows the gaps, not the windows:
 * every window's commit rewrites the ledger, and a two-year backfill in daily windows made it
 * hundreds of KB rewritten with each of thousands of windows). `rows` and `pages` are summed over
 * the merged windows' reads, `at` is the latest one.
 */
export interface DoneWindow extends Interval {
  readonly rows: number;
  readonly pages: number;
  readonly at: string;
  /** Windows merged into this interval. @default 1 (a state written before intervals were merged) */
  readonly windows?: number;
}

/** A window being read: rows up to `cursor` are stored; resuming reads from `cursor`. */
export interface RunningWindow extends Interval {
  readonly cursor?: string;
  readonly rows: number;
  readonly pages: number;
  readonly since: string;
}

export interface StreamLedger {
  /** Every interval a backfill was asked to load, merged. */
  readonly requested: readonly Interval[];
  /** Finished time as intervals, ordered by `from`, merged where they touch (`withDone`). */
  readonly done: readonly DoneWindow[];
  readonly running: readonly RunningWindow[];
  /** Full-refresh resources (no windows): the last complete read. */
  readonly fullRead?: { readonly at: string; readonly rows: number; readonly pages: number };
  /** The last backfill of the stream (with its span and windows). */
  readonly lastRun?: LastRun;
}

export interface BackfillLedger {
  readonly version: 1;
  readonly streams: Readonly<Record<string, StreamLedger>>;
}

const EMPTY_LEDGER: BackfillLedger = { version: 1, streams: {} };
const EMPTY_STREAM: StreamLedger = { requested: [], done: [], running: [] };

/** The ledger of a state document (empty when no backfill ran). */
export function readLedger(doc: Pick<StateDocument, 'sections'>): BackfillLedger {
  const raw = doc.sections[BACKFILL_SECTION];
  if (raw === undefined || raw === null) return EMPTY_LEDGER;
  const ledger = raw as Partial<BackfillLedger>;
  if (ledger.version !== 1 || typeof ledger.streams !== 'object' || ledger.streams === null) {
    throw new StateError(
      `the "${BACKFILL_SECTION}" section of the state file is not a backfill ledger (expected {"version": 1, "streams": {...}}); ` +
        `remove that section to start the backfill ledger over (loads merge on the key, so re-reading is safe)`,
    );
  }
  return { version: 1, streams: ledger.streams };
}

export function streamLedger(ledger: BackfillLedger, key: string): StreamLedger {
  const s = ledger.streams[key];
  return s === undefined ? EMPTY_STREAM : { ...EMPTY_STREAM, ...s };
}

/** Change one stream's ledger. */
export function updateStreamLedger(
  ledger: BackfillLedger | undefined,
  key: string,
  change: (current: StreamLedger) => StreamLedger,
): BackfillLedger {
  const base = ledger ?? EMPTY_LEDGER;
  return { version: 1, streams: { ...base.streams, [key]: change(streamLedger(base, key)) } };
}

// ---- interval arithmetic (ms) ----

/** A window in ms: the arithmetic is `extract/windows.ts`'s; the ledger stores ISO instants. */
export type MsInterval = TimeWindow;

const toMs = (i: Interval): MsInterval => ({ fromMs: Date.parse(i.from), toMs: Date.parse(i.to) });
export const toIso = (i: MsInterval): Interval => ({
  from: new Date(i.fromMs).toISOString(),
  to: new Date(i.toMs).toISOString(),
});

/** Sorted, non-overlapping, adjacent ones joined; empty intervals dropped (`mergeWindows`). */
export const mergeIntervals: (intervals: readonly MsInterval[]) => MsInterval[] = mergeWindows;

/** The parts of `from` not covered by `minus` (`subtractWindows`). */
export const subtractIntervals: (from: readonly MsInterval[], minus: readonly MsInterval[]) => MsInterval[] =
  subtractWindows;

/** Whether `window` lies wholly inside the finished windows. */
export function isCovered(window: MsInterval, done: readonly Interval[]): boolean {
  return isCoveredBy(window, done.map(toMs));
}

/** What was asked for and is not finished: the gaps a `status` reports and a re-run fills. */
export function ledgerGaps(stream: StreamLedger): Interval[] {
  return subtractIntervals(stream.requested.map(toMs), stream.done.map(toMs)).map(toIso);
}

const sameWindow = (a: Interval, b: Interval): boolean =>
  Date.parse(a.from) === Date.parse(b.from) && Date.parse(a.to) === Date.parse(b.to);

/** Add intervals to `requested`. */
export function withRequested(stream: StreamLedger, intervals: readonly MsInterval[]): StreamLedger {
  return { ...stream, requested: mergeIntervals([...stream.requested.map(toMs), ...intervals]).map(toIso) };
}

/** Record the checkpoint of a running window. */
export function withCheckpoint(stream: StreamLedger, running: RunningWindow): StreamLedger {
  return { ...stream, running: [...stream.running.filter((r) => !sameWindow(r, running)), running] };
}

/** A resumed cursor was refused: the window restarts from its first page. */
export function withoutCursor(stream: StreamLedger, window: Interval): StreamLedger {
  return { ...stream, running: stream.running.filter((r) => !sameWindow(r, window)) };
}

/**
 * Move a window from running to done, merged with the finished intervals it touches or overlaps.
 * A window read again (a repair) replaces its own record; inside a wider finished interval it only
 * moves that interval's `at` (its rows were counted at their first read). A ledger written before
 * intervals were merged (one entry per window) is merged whole here, at its first new window.
 */
export function withDone(stream: StreamLedger, done: DoneWindow): StreamLedger {
  const running = stream.running.filter((r) => !sameWindow(r, done));
  const within = stream.done.find(
    (d) =>
      !sameWindow(d, done) && Date.parse(d.from) <= Date.parse(done.from) && Date.parse(done.to) <= Date.parse(d.to),
  );
  if (within !== undefined) {
    const at = later(within.at, done.at);
    return { ...stream, running, done: stream.done.map((d) => (d === within ? { ...d, at } : d)) };
  }
  const kept = stream.done.filter((d) => !sameWindow(d, done));
  return { ...stream, running, done: mergeDone([...kept, done]) };
}

/** Finished intervals sorted by start, those that touch or overlap joined (their counts summed). */
function mergeDone(done: readonly DoneWindow[]): DoneWindow[] {
  const sorted = done
    .map((d) => ({ d, fromMs: Date.parse(d.from), toMs: Date.parse(d.to) }))
    .sort((a, b) => a.fromMs - b.fromMs || a.toMs - b.toMs);
  const out: { d: DoneWindow; fromMs: number; toMs: number }[] = [];
  for (const next of sorted) {
    const last = out[out.length - 1];
    if (last === undefined || next.fromMs > last.toMs) {
      out.push(next);
      continue;
    }
    const toMs = Math.max(last.toMs, next.toMs);
    last.d = {
      from: last.d.from,
      to: toMs === last.toMs ? last.d.to : next.d.to,
      rows: last.d.rows + next.d.rows,
      pages: last.d.pages + next.d.pages,
      at: later(last.d.at, next.d.at),
      windows: windowsOf(last.d) + windowsOf(next.d),
    };
    last.toMs = toMs;
  }
  return out.map((o) => o.d);
}

const later = (a: string, b: string): string => (Date.parse(b) > Date.parse(a) ? b : a);

/** Windows a finished interval holds (an entry from before intervals were merged is one). */
export function windowsOf(done: DoneWindow): number {
  return done.windows ?? 1;
}

/** Drop running entries a new run will not resume (windows sliced differently, or not asked for). */
export function keepRunning(stream: StreamLedger, windows: readonly MsInterval[]): StreamLedger {
  return { ...stream, running: stream.running.filter((r) => windows.some((w) => sameWindow(r, toIso(w)))) };
}

/** The running entry of `window`, if a crashed run left one. */
export function runningOf(stream: StreamLedger, window: MsInterval): RunningWindow | undefined {
  const iso = toIso(window);
  return stream.running.find((r) => sameWindow(r, iso));
}

// ---- the ledger's units (backfill, `verify --repair`, and the plan of a backfill) ----

/** A backfill unit: a window of the ledger (none: the whole resource, read once), with what a crashed run left of it. */
export interface LedgerUnit {
  readonly window: TimeWindow | undefined;
  /** The ledger has it done (skipped). */
  readonly done?: boolean;
  /** Its running entry: the cursor to resume from, the rows and pages stored so far, since when. */
  readonly resumed?: RunningWindow;
  /** Windows of the backfill's slicing the unit covers (a run of them read by one walk). @default 1 */
  readonly windows?: number;
}

/**
 * The units of `windows` as the ledger has them: done, resumed, or to read; `force` reads every one
 * afresh (repair). `joined`: each run of consecutive windows left to read is one unit (one walk),
 * for a list that cannot be asked for one window alone (`sync/backfill.ts`); the done ones are
 * still listed one by one.
 */
export function ledgerUnits(
  stream: StreamLedger,
  windows: readonly TimeWindow[],
  force: boolean,
  joined = false,
): LedgerUnit[] {
  const done = stream.done.map(toMs);
  const units: LedgerUnit[] = [];
  let run: { fromMs: number; toMs: number; windows: number } | undefined;
  const endRun = (): void => {
    if (run === undefined) return;
    const window = { fromMs: run.fromMs, toMs: run.toMs };
    const resumed = force ? undefined : runningOf(stream, window);
    units.push({ window, windows: run.windows, ...(resumed === undefined ? {} : { resumed }) });
    run = undefined;
  };
  for (const window of windows) {
    if (!force && isCoveredBy(window, done)) {
      endRun();
      units.push({ window, done: true });
    } else if (!joined) {
      const resumed = force ? undefined : runningOf(stream, window);
      units.push(resumed === undefined ? { window } : { window, resumed });
    } else if (run !== undefined && run.toMs === window.fromMs) {
      run.toMs = window.toMs;
      run.windows += 1;
    } else {
      endRun();
      run = { ...window, windows: 1 };
    }
  }
  endRun();
  return units;
}

/** Change one stream's ledger through `state` (the store, or the batch the change commits with). */
export function changeStreamLedger(
  state: StateWriter,
  key: string,
  change: (current: StreamLedger) => StreamLedger,
): Promise<void> {
  return state.updateSection<BackfillLedger>(BACKFILL_SECTION, (current) =>
    updateStreamLedger(
      current === undefined ? undefined : readLedger({ sections: { [BACKFILL_SECTION]: current } }),
      key,
      change,
    ),
  );
}

/**
 * The ledger's book for one stream (`key`): where a backfill's windows move. A checkpoint is the
 * window running with its cursor and the rows and pages stored so far (`counts`), then done with
 * the batch that ends it; a refused cursor restarts the window (`onRestart` first, then through
 * `store`). A unit of `undefined` (a full read of the whole resource) keeps no checkpoint.
 */
export function ledgerBook(options: {
  readonly store: StateWriter;
  readonly key: string;
  readonly now: () => number;
  /** Rows and pages of the window stored so far. */
  readonly counts: () => { readonly rows: number; readonly pages: number };
  /** When the window's first run started (a resumed one keeps its own). */
  readonly since: string;
  /** Windows of the backfill's slicing the unit covers (`LedgerUnit.windows`). @default 1 */
  readonly windows?: number;
  readonly onRestart: () => void;
}): Book<Interval | undefined> {
  const { store, key } = options;
  return {
    checkpoint: async (unit, nextCursor, state) => {
      if (unit === undefined) return;
      const at = new Date(options.now()).toISOString();
      const counts = options.counts();
      await changeStreamLedger(state, key, (s) =>
        nextCursor === null
          ? withDone(s, {
              ...unit,
              ...counts,
              at,
              ...(options.windows === undefined ? {} : { windows: options.windows }),
            })
          : withCheckpoint(s, { ...unit, cursor: nextCursor, ...counts, since: options.since }),
      );
    },
    cursorRejected: async (unit) => {
      options.onRestart();
      if (unit !== undefined) await changeStreamLedger(store, key, (s) => withoutCursor(s, unit));
    },
  };
}
