import type PQueue from 'p-queue';
import type { Clock } from '../core/types.js';
import type { ConcurrencyController } from './concurrency.js';
import { newCallStats, type CallContext, type CallStats } from '../http/client.js';

/**
 * Work units: every way rows are read is a producer of work units over one runner, `runUnits`.
 *
 * A work unit is what one walk reads: a closed-open window (a sync window, a sub-window of a split,
 * a settle re-read, a backfill window) with the cursor it resumes from, or a chunk of parent ids
 * (per-event traces). Its progress lives in state in the same commit as its rows (`state.withBatch`),
 * through its book (`state/books/`): the next cursor while it is open, "done" with its last batch. So
 * the state is finished ranges (the mark, the settle mark, the ledger's done windows, the traces'
 * done ids) plus the units still open (pending, split parts, settlePending, the ledger's running
 * windows, the traces' pending ids), and a run is the producer asking state what is open.
 *
 * Producers: the sync book's units (`state/books/sync.ts`, driven from state by `stream-reader.ts`;
 * `plan` counts the same units), the ledger's (`state/books/ledger.ts`: backfill and
 * `verify --repair`), the trace queue's chunks (`sync/traces/queue.ts`). This file is the runner.
 */

/** What the runner gives each unit: its own call counters, and the page hook that feeds the controller. */
export interface SubWalk {
  /** The unit's own call context (same lane as the stream, its own counters). */
  readonly ctx: CallContext;
  /** Call after each page: feeds the controller and adds the counters to the stream's. */
  readonly onPage: () => void;
  /** Feed the controller one sample of the unit's own making (and add the counters to the stream's). */
  readonly record: (sample: {
    readonly waitedMs: number;
    readonly latencyMs: number;
    readonly rateLimited: boolean;
  }) => void;
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

/** What a unit's walk ends with: the units it was replaced with (a re-split), or nothing. */
// biome-ignore lint/suspicious/noConfusingVoidType: a walk that hands nothing back is a plain async function (Promise<void>)
export type MoreUnits<U> = readonly U[] | void;

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
  run: (unit: U, sub: SubWalk) => Promise<MoreUnits<U>>,
): Promise<'done' | 'aborted'> {
  const { ctx: streamCtx, clock, slots } = options;
  const controller = typeof options.limit === 'number' ? undefined : options.limit;
  const limit = (): number =>
    Math.max(typeof options.limit === 'number' ? options.limit : options.limit.limit, source.room?.(running) ?? 0);
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
        const once = async (): Promise<MoreUnits<U>> => {
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
        (slots === undefined ? once() : (slots.add(once) as Promise<MoreUnits<U>>))
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

function subWalk(
  streamCtx: CallContext,
  controller: ConcurrencyController | undefined,
  clock: Pick<Clock, 'now'>,
  fill: () => void,
): SubWalk {
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
