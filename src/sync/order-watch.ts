import type { Logger } from '../core/log.js';
import type { ApiRecord, ProjectScope, ResourceDefinition } from '../core/types.js';
import type { TimeWindow } from '../extract/windows.js';
import { OrderLearner } from '../extract/list-watch.js';
import { cursorMillis } from '../normalize/normalize.js';
import type { ListFact, ListNotes } from './list-facts.js';

/** What the watch needs of a walk (`WalkParams`). */
export interface OrderWatchOptions {
  readonly resource: ResourceDefinition;
  readonly scope: ProjectScope;
  readonly window: TimeWindow | undefined;
  readonly lists?: { readonly notes: ListNotes; readonly fact: ListFact };
}

/**
 * For a list with no filter on its cursor field (`stopPastWindow`): the walk ends at the first page
 * whose records have all passed the window's start, once the list's newest-first order is proven
 * (by this walk's records, or by an earlier run's, kept in state) and not contradicted. Unproven,
 * or one record out of order, and the walk reads to the end of the list (docs/list-semantics.md).
 */
export class OrderWatch {
  private lastMs: number | undefined;
  private readonly learner: OrderLearner;
  private readonly active: boolean;
  /** An earlier run proved this order; this walk re-checks it on its own records. */
  private readonly known: boolean;
  private warned = false;

  constructor(
    private readonly options: OrderWatchOptions,
    private readonly logger: Logger,
  ) {
    this.active = options.resource.stopPastWindow === true && options.window !== undefined;
    this.learner = new OrderLearner(options.resource);
    this.known = options.lists?.fact.order === `-${options.resource.cursorField ?? ''}`;
  }

  pastWindow(records: readonly ApiRecord[]): boolean {
    if (!this.active || this.options.window === undefined) return false;
    this.learner.see(records);
    for (const record of records) {
      const ms = cursorMillis(this.options.resource, record);
      if (ms !== undefined) this.lastMs = ms; // inWindow reports a missing field
    }
    const fact = this.options.lists?.fact.order;
    if (this.learner.broken && !this.warned && (fact === undefined || this.known)) {
      this.warned = true;
      this.logger.warn(
        { resource: this.options.resource.name, project: this.options.scope.key },
        `expected ${this.options.resource.path} newest first by ${this.options.resource.cursorField ?? '?'}, got a newer record after an older one: reading the whole list`,
      );
    }
    const trusted = !this.learner.broken && (this.known || this.learner.proven);
    return trusted && this.lastMs !== undefined && this.lastMs < this.options.window.fromMs;
  }

  /** What this walk's records proved of the order (stored at the stream's end). */
  report(notes: ListNotes | undefined): void {
    if (this.active) notes?.observe(this.learner.observation());
  }
}
