import type { Logger } from '../core/log.js';
import type { ListObservation } from '../extract/list-watch.js';
import type { StateDocument } from '../state/document.js';
import type { StateStore } from '../state/store.js';

/**
 * What each list was learned to do, kept in state (`sections.lists`, per resource), so a run
 * starts from what the last one proved and re-checks it cheaply on the records it reads anyway
 * (docs/list-semantics.md). Nothing here is assumed: a fact is stored only with the records that
 * proved it, and a run whose records contradict it logs what changed, once, and stores the new one.
 */
const LISTS_SECTION = 'lists';

export interface ListFact {
  /**
   * The field and direction the list's records come in (`"-last_message_at"`), `"unordered"` when
   * records contradicted every candidate; absent while unproven.
   */
  readonly order?: string;
  /** Most records one page held while the server said there were more (a page cap below our `limit`). */
  readonly pageCap?: number;
  /** `offset`: cursors count records (pages shift when rows move during a walk). */
  readonly cursor?: 'offset' | 'opaque';
  readonly learnedAt?: string;
  /** What proved the latest change, in words. */
  readonly evidence?: string;
}

export type ListFacts = Readonly<Record<string, ListFact>>;

export function listFacts(doc: StateDocument): ListFacts {
  return (doc.sections[LISTS_SECTION] ?? {}) as ListFacts;
}

/**
 * What one stream saw of its list this run: rows of projects not asked for (dropped), and what the
 * list showed of its order, page cap and cursors. `inexact` names what could not be proven exact:
 * the stream fails with it (exit non-zero) after storing everything it read.
 */
export class ListNotes {
  readonly foreignRows = new Map<string, number>();
  readonly inexact: string[] = [];
  private observed: ListObservation = {};

  constructor(readonly resource: string) {}

  dropForeign(project: string): void {
    this.foreignRows.set(project, (this.foreignRows.get(project) ?? 0) + 1);
  }

  get foreignTotal(): number {
    let n = 0;
    for (const count of this.foreignRows.values()) n += count;
    return n;
  }

  /** Merge what one walk saw (order proven or broken, a cap, an offset cursor). */
  observe(seen: ListObservation): void {
    if (seen.inexact !== undefined && !this.inexact.includes(seen.inexact)) this.inexact.push(seen.inexact);
    const o = this.observed;
    this.observed = {
      // A walk that saw the order broken outweighs one that saw it hold (a different part of the list).
      order: o.orderBroken === true ? o.order : seen.orderBroken === true ? seen.order : (seen.order ?? o.order),
      orderBroken: o.orderBroken === true || seen.orderBroken === true,
      pageCap:
        o.pageCap === undefined
          ? seen.pageCap
          : seen.pageCap === undefined
            ? o.pageCap
            : Math.max(o.pageCap, seen.pageCap),
      offsetCursor: o.offsetCursor === true || seen.offsetCursor === true,
      evidence: seen.evidence ?? o.evidence,
    };
  }

  get observation(): ListObservation {
    return this.observed;
  }

  /** The summary fields of the run (`_query_sync_runs.streams`, `--json`); empty when nothing was noticed. */
  summary(): ListSummary {
    const foreign = this.foreignTotal;
    return {
      ...(foreign > 0 ? { foreignRowsDropped: foreign, foreignProjects: [...this.foreignRows.keys()].sort() } : {}),
      ...(this.observed.pageCap !== undefined ? { pageCap: this.observed.pageCap } : {}),
      ...(this.inexact.length > 0 ? { inexact: [...this.inexact] } : {}),
    };
  }
}

export interface ListSummary {
  readonly foreignRowsDropped?: number;
  readonly foreignProjects?: readonly string[];
  readonly pageCap?: number;
  readonly inexact?: readonly string[];
}

/**
 * Store what this run's records proved about the list, logging each change once (with what it was
 * and what it is now). Order: a proven order replaces an unproven one; a broken one replaces any.
 */
export async function recordListFacts(
  resource: string,
  notes: ListNotes,
  state: Pick<StateStore, 'document' | 'updateSection'>,
  logger: Logger,
  nowMs: number,
): Promise<void> {
  const seen = notes.observation;
  const before = listFacts(state.document)[resource] ?? {};
  const order = seen.order ?? before.order;
  const pageCap = seen.pageCap ?? before.pageCap;
  const cursor = seen.offsetCursor === true ? 'offset' : before.cursor;
  const changes: string[] = [];
  if (order !== before.order) changes.push(`order ${before.order ?? 'unproven'} → ${order ?? 'unproven'}`);
  if (pageCap !== before.pageCap) changes.push(`page cap ${before.pageCap ?? 'none seen'} → ${pageCap ?? 'none seen'}`);
  if (cursor !== before.cursor) changes.push(`cursors ${before.cursor ?? 'unknown'} → ${cursor ?? 'unknown'}`);
  if (changes.length === 0) return;
  const fact: ListFact = {
    ...(order === undefined ? {} : { order }),
    ...(pageCap === undefined ? {} : { pageCap }),
    ...(cursor === undefined ? {} : { cursor }),
    learnedAt: new Date(nowMs).toISOString(),
    ...(seen.evidence === undefined ? {} : { evidence: seen.evidence }),
  };
  await state.updateSection<ListFacts>(LISTS_SECTION, (facts) => ({ ...facts, [resource]: fact }));
  const level =
    before.order !== undefined || before.pageCap !== undefined || before.cursor !== undefined ? 'warn' : 'info';
  logger[level](
    { resource },
    `${resource} list: ${changes.join('; ')}${seen.evidence === undefined ? '' : ` (${seen.evidence})`}; kept in state`,
  );
}
