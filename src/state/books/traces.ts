import type { OwedMark } from '../../core/state-table.js';
import type { StateDocument } from '../document.js';

/**
 * The trace queue's book: where the units of per-event traces move. One state section
 * `children:<resource>` (the persisted name, kept for existing state) holds `{ [project]:
 * { pending: {id: eventMs}, done: {id: eventMs}, recheck?: {id: eventMs} } }`: an events batch
 * enqueues its units (`withQueued`, in the batch's commit), a drained chunk moves them to done or
 * to recheck (`withCompleted`, in the chunk's commit). The queue that drives them is
 * `sync/traces/queue.ts`.
 */

interface ProjectUnits {
  readonly pending: Readonly<Record<string, number>>;
  readonly done: Readonly<Record<string, number>>;
  /** Answered empty while young: asked again once `at + settle` has passed. */
  readonly recheck?: Readonly<Record<string, number>>;
}

export type TraceSection = Readonly<Record<string, ProjectUnits>>;

/** The section of one per-event resource. */
export const traceSectionName = (resource: { readonly name: string }): string => `children:${resource.name}`;

/**
 * The owed listings of one per-event resource, where the warehouse keeps the trace book:
 * `owed-listed:<resource>` holds `{ [project]: { listedAtMs, fullAtMs } }`, the start of the last
 * complete listing (every event owed then was read and booked since) and of the last full one. The
 * next listing reads only what changed since (`OwedTraces.listedThrough`); `reset` drops it.
 */
export type OwedMarks = Readonly<Record<string, OwedMark>>;

export const owedMarkSectionName = (resource: { readonly name: string }): string => `owed-listed:${resource.name}`;

/** The trace section as a state document holds it (empty when none). */
export function traceSection(doc: Pick<StateDocument, 'sections'>, name: string): TraceSection {
  return (doc.sections[name] ?? {}) as TraceSection;
}

/** `fresh` events (per project: id → event instant) pending, but for those already done or to be rechecked. */
export function withQueued(
  section: TraceSection,
  fresh: ReadonlyMap<string, ReadonlyMap<string, number>>,
): TraceSection {
  const next: Record<string, ProjectUnits> = { ...section };
  for (const [project, ids] of fresh) {
    const units = next[project] ?? { pending: {}, done: {} };
    const pending = { ...units.pending };
    for (const [id, at] of ids) if (!(id in units.done) && !(id in (units.recheck ?? {}))) pending[id] = at;
    next[project] = { ...units, pending };
  }
  return next;
}

/**
 * A chunk of a project's units stored: each done (kept only from `horizonMs` on, the oldest event
 * a later sync could enqueue again) or, in `later`, to be asked again at settle. Done units older
 * than the horizon are pruned.
 */
export function withCompleted(
  section: TraceSection,
  project: string,
  units: readonly { readonly id: string; readonly at: number }[],
  later: ReadonlySet<string>,
  horizonMs: number,
): TraceSection {
  const prev = section[project] ?? { pending: {}, done: {} };
  const pending = { ...prev.pending };
  const recheck = { ...prev.recheck };
  const done: Record<string, number> = {};
  for (const [id, at] of Object.entries(prev.done)) if (at >= horizonMs) done[id] = at;
  for (const u of units) {
    delete pending[u.id];
    delete recheck[u.id];
    if (later.has(u.id)) recheck[u.id] = u.at;
    else if (u.at >= horizonMs) done[u.id] = u.at;
  }
  return { ...section, [project]: { pending, done, ...(Object.keys(recheck).length === 0 ? {} : { recheck }) } };
}
