import { PaginationError } from '../core/errors.js';
import type { ProjectScope, ResourceDefinition } from '../core/types.js';
import type { SchemaTracker } from '../normalize/normalize.js';
import { StreamFrame, type StreamResult } from './frame.js';
import { ListNotes, listFacts, recordListFacts } from './list-facts.js';
import type { SyncRun } from './context.js';
import { UnitReader, type StreamHooks } from './stream-reader.js';
import type { SyncUnit } from '../state/books/sync.js';
import { runUnits, type SubWalk } from './units.js';

/**
 * Sync one (resource, project scope): read each window [mark − lookback, run start), walk every
 * page, write in batches, and checkpoint after each write: the cursor of the next page while the
 * window is open, the new mark when it is done. State never moves past rows that were not stored.
 *
 * Work units (the sync's book, `state/books/sync.ts`): the window state says is open (a split's
 * parts, the pending window, the next window), then the settle re-reads; each produced from state
 * when the one before has ended, all read by the one runner (`units.ts`) in the stream's frame
 * (`frame.ts`: its run record, the scope-rejected path, the error log).
 */
export async function syncStream(
  resource: ResourceDefinition,
  scope: ProjectScope,
  tracker: SchemaTracker,
  run: SyncRun,
  hooks: StreamHooks = {},
): Promise<StreamResult> {
  const { settings } = run;
  const frame = new StreamFrame(resource, scope, run, run.signal);
  const { key, ctx } = frame;
  const notes = new ListNotes(resource.name);
  const finish = async (outcomeIn: StreamResult['outcome'], errorIn?: Error): Promise<StreamResult> => {
    let outcome = outcomeIn;
    let error = errorIn;
    const seconds = frame.elapsed();
    await recordListFacts(resource.name, notes, run.state, run.logger, run.clock.now()).catch(() => undefined);
    if (notes.foreignTotal > 0) {
      run.logger.warn(
        {
          resource: resource.name,
          project: scope.key,
          dropped: notes.foreignTotal,
          projects: [...notes.foreignRows.keys()].sort(),
        },
        `${resource.path} answered ${notes.foreignTotal} rows of projects not asked for (${[...notes.foreignRows.keys()].sort().join(', ')}): the server ignores project_ids; dropped, not stored`,
      );
    }
    const lists = notes.summary();
    if (outcome === 'ok' && notes.inexact.length > 0) {
      // Everything read is stored; the run says what it could not prove exact, and exits non-zero.
      outcome = 'failed';
      error = new PaginationError(`${resource.name} may be incomplete: ${notes.inexact.join('; ')}`);
    }
    if (outcome !== 'scope-rejected') {
      const lastRun = frame.runRecord(outcome, reader.counts, seconds, error);
      await run.state.updateStream(key, (s) => ({ ...s, lastRun }));
    }
    return {
      resource: resource.name,
      scope: scope.key,
      outcome,
      ...reader.counts,
      stats: ctx.stats,
      seconds,
      error,
      ...(Object.keys(lists).length > 0 ? { lists } : {}),
    };
  };
  const reader = new UnitReader(resource, scope, tracker, run, hooks, ctx, {
    notes,
    fact: listFacts(run.state.document)[resource.name] ?? {},
  });
  try {
    if (resource.mode === 'full') {
      await reader.walk(undefined);
    } else {
      const markBefore = run.state.stream(key).mark;
      const units = { limit: reader.controller, ctx, clock: run.clock };
      const read = (unit: SyncUnit, sub: SubWalk): Promise<SyncUnit[] | undefined> => reader.read(unit, sub);
      if ((await runUnits(reader.windowUnits(), units, read)) === 'aborted') run.signal?.throwIfAborted();
      if (resource.settles === true && settings.settleMs > 0 && settings.sampleRows === undefined) {
        const settle = reader.settleUnits(markBefore, settings.settleMs);
        if ((await runUnits(settle, units, read)) === 'aborted') run.signal?.throwIfAborted();
        // Nothing to re-read (yet): the settle mark alone moves.
        const to = settle.settledTo();
        if (to !== undefined)
          await run.state.updateStream(key, (s) => ({ ...s, settled: maxIso(s.settled, new Date(to).toISOString()) }));
      }
    }
    const measured = reader.lateness?.summary(run.clock.now());
    if (measured !== undefined) await run.state.updateStream(key, (s) => ({ ...s, lateness: measured }));
    return await finish('ok');
  } catch (error) {
    const ended = frame.failure(error, reader.counts.pages);
    return finish(ended.outcome, ended.error);
  }
}

function maxIso(a: string | undefined, b: string): string {
  return a !== undefined && Date.parse(a) > Date.parse(b) ? a : b;
}
