import type { DeletionMode } from '../core/deletions.js';
import type { ResourceDefinition, Row } from '../core/types.js';
import type { DeletionFollower } from '../load/destination-capabilities.js';
import type { StateWriter } from '../state/store.js';
import type { WindowKeys } from '../load/destination.js';

/**
 * Reconcile's id comparison (issue 31): where a window's counts differ, the repair lists the window
 * anyway, so the ids it returned are compared with the warehouse's, not only the totals:
 * - listed, not in the warehouse after the re-read: a loss that stays (exit 5);
 * - in the warehouse, no longer listed: deleted at the source (`--deletions`);
 * - listed while marked deleted: the record came back, its mark is cleared;
 * - the list and the warehouse agree while the count does not: the count lags or is wrong, never a
 *   deletion nor exit 5 on its own.
 */

/** What a window's list and its warehouse rows say of each other. */
export interface IdComparison {
  /** Ids the list returned and the warehouse does not hold, even after the re-read. */
  readonly lost: readonly string[];
  /** Live rows the list no longer returns: deleted at the source. */
  readonly gone: readonly string[];
  /** Rows marked deleted that the list returns again. */
  readonly restored: readonly string[];
}

export function compareIds(listed: ReadonlySet<string>, keys: WindowKeys): IdComparison {
  const live = new Set(keys.live);
  const marked = new Set(keys.marked);
  return {
    lost: [...listed].filter((id) => !live.has(id) && !marked.has(id)).sort(),
    gone: keys.live.filter((id) => !listed.has(id)).sort(),
    restored: keys.marked.filter((id) => listed.has(id)).sort(),
  };
}

/**
 * The tables whose rows follow a parent's deletion: its bridge tables (`event_signals`) and the
 * resources read per event record (`traces`, by the event key the trace rows carry), whichever
 * this run reads: a warehouse holds them from earlier runs too.
 */
export function followersOf(parent: ResourceDefinition, catalog: readonly ResourceDefinition[]): DeletionFollower[] {
  const out: DeletionFollower[] = (parent.bridges ?? []).map((b) => ({ table: b.table, column: b.parentColumn }));
  for (const r of catalog)
    if (r.perParent?.parent === parent.name && !out.some((f) => f.table === r.name))
      out.push({ table: r.name, column: r.perParent.param });
  return out;
}

/** Ids of the rows a repair stored, by (resource, project), with the instant of each (its cursor field). */
export class ListedIds {
  private readonly byScope = new Map<string, Map<string, number>>();

  constructor(private readonly resources: readonly ResourceDefinition[]) {}

  add(resource: string, project: string, rows: readonly Row[]): void {
    const r = this.resources.find((x) => x.name === resource);
    if (r?.cursorField === undefined) return;
    const id = `${resource}\u0000${project}`;
    const ids = this.byScope.get(id) ?? new Map<string, number>();
    this.byScope.set(id, ids);
    for (const row of rows) ids.set(String(row[r.key]), Date.parse(String(row[r.cursorField])));
  }

  /** The ids listed in [fromMs, toMs). */
  inWindow(resource: string, project: string, fromMs: number, toMs: number): Set<string> {
    const out = new Set<string>();
    for (const [id, ms] of this.byScope.get(`${resource}\u0000${project}`) ?? [])
      if (ms >= fromMs && ms < toMs) out.add(id);
    return out;
  }
}

/**
 * Where `--deletions keep` said which windows hold rows deleted at the source: said once per window,
 * then not again while the window's counts stay as they were when it was said (`sections.reconcile`).
 */
export const RECONCILE_SECTION = 'reconcile';

interface KeptWindow {
  readonly expected: number;
  readonly found: number;
  readonly ids: number;
}
interface ReconcileSection {
  readonly kept?: Readonly<Record<string, KeptWindow>>;
}

const keptKey = (resource: string, project: string, from: string, to: string): string =>
  `${resource}|${project}|${from}|${to}`;

/** Whether `keep` said this window before, with the same counts (so it says nothing now, and reads nothing). */
export function keptBefore(
  sections: Readonly<Record<string, unknown>>,
  mode: DeletionMode,
  w: { resource: string; project: string; from: string; to: string; expected: number; found: number },
): boolean {
  if (mode !== 'keep') return false;
  const kept = (sections[RECONCILE_SECTION] as ReconcileSection | undefined)?.kept?.[
    keptKey(w.resource, w.project, w.from, w.to)
  ];
  return kept !== undefined && kept.expected === w.expected && kept.found === w.found;
}

/**
 * Remember the windows `keep` said this run; forget those whose end is before `forgetBeforeMs` (out of
 * the range a sync checks every run: a catch-up that reads them again says them again).
 */
export function rememberKept(
  state: StateWriter,
  said: readonly {
    resource: string;
    project: string;
    from: string;
    to: string;
    expected: number;
    found: number;
    ids: number;
  }[],
  forgetBeforeMs: number,
): Promise<void> {
  return state.updateSection<ReconcileSection>(RECONCILE_SECTION, (current) => {
    const kept: Record<string, KeptWindow> = {};
    for (const [k, v] of Object.entries(current?.kept ?? {}))
      if (Date.parse(k.split('|')[3] ?? '') >= forgetBeforeMs) kept[k] = v;
    for (const w of said)
      kept[keptKey(w.resource, w.project, w.from, w.to)] = { expected: w.expected, found: w.found, ids: w.ids };
    return { ...current, kept };
  });
}
