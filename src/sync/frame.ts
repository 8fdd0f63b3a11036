import { FatalApiError, type QuerySyncError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Clock, ProjectScope, ResourceDefinition } from '../core/types.js';
import { newCallStats, type CallContext, type CallStats } from '../http/client.js';
import { streamKey, type LastRun } from '../state/store.js';
import type { ListSummary } from './list-facts.js';

/**
 * The frame every stream of a run runs in (sync, repair and backfill windows, per-event traces,
 * searches, aggregates): its call context and counters, its start, how a failure ends it (the
 * scope-rejected path, the error log), its run record (`lastRun`, one shape) and its result.
 * What a stream reads and where its progress goes is its own (its book, `state/books/`).
 */

export interface StreamResult {
  readonly resource: string;
  readonly scope: string;
  readonly outcome: 'ok' | 'failed' | 'scope-rejected';
  readonly rows: number;
  readonly pages: number;
  readonly windows: number;
  readonly stats: CallStats;
  readonly seconds: number;
  readonly error?: QuerySyncError | Error;
  /** What the stream noticed of its list: rows of projects not asked for (dropped), a page cap (docs/list-semantics.md). */
  readonly lists?: ListSummary;
  /** Skipped, not failed: what this server lacks (an optional resource's route, `optional.ts`). */
  readonly lacking?: string;
  /** Per-event traces: events of this scope whose traces are still owed when the drain ended. */
  readonly owed?: number;
}

/** The call context of one (resource, scope) walk: its fairness lane and its own counters. */
export function streamCallContext(
  resource: Pick<ResourceDefinition, 'name'>,
  scope: ProjectScope,
  signal: AbortSignal | undefined,
): CallContext {
  return {
    resource: resource.name,
    project: scope.key,
    lane: `${resource.name}|${scope.key}`,
    stats: newCallStats(),
    signal,
  };
}

export interface FrameOptions {
  /** The stream's own call context (a search's or an aggregate's lane); `streamCallContext` when absent. */
  readonly ctx?: CallContext;
  /**
   * The log line of a failure, for streams that name themselves otherwise than by resource and
   * project (a saved search, an aggregate table). @default `{ resource, project, code }` and the message
   */
  readonly failureLog?: (error: Error) => { readonly fields: Record<string, unknown>; readonly message: string };
}

/** One stream's frame: opened when it starts, asked how it ended. */
export class StreamFrame {
  readonly started: number;
  readonly key: string;
  readonly ctx: CallContext;

  constructor(
    readonly resource: Pick<ResourceDefinition, 'name'>,
    readonly scope: ProjectScope,
    private readonly deps: { readonly clock: Pick<Clock, 'now'>; readonly logger: Logger },
    signal: AbortSignal | undefined,
    private readonly options: FrameOptions = {},
  ) {
    this.started = deps.clock.now();
    this.key = streamKey(resource.name, scope.key);
    this.ctx = options.ctx ?? streamCallContext(resource, scope, signal);
  }

  /** Seconds since the stream started. */
  elapsed(): number {
    return (this.deps.clock.now() - this.started) / 1000;
  }

  /**
   * How `error` ends the stream. Scope-rejected: an all-projects read the server refused (400)
   * before any page, where the stream may say so (`pagesRead` given): the run reads per project
   * instead, so nothing is logged and no run record written. Else failed, logged once here.
   */
  failure(
    error: unknown,
    pagesRead?: number,
  ): { readonly outcome: 'failed' | 'scope-rejected'; readonly error: Error } {
    const err = error instanceof Error ? error : new Error(String(error));
    if (pagesRead === 0 && error instanceof FatalApiError && error.status === 400 && this.scope.header === '*')
      return { outcome: 'scope-rejected', error: err };
    this.logFailure(err);
    return { outcome: 'failed', error: err };
  }

  /** Log a failure the stream caught itself. */
  logFailure(err: Error): void {
    const custom = this.options.failureLog?.(err);
    if (custom !== undefined) this.deps.logger.error(custom.fields, custom.message);
    else
      this.deps.logger.error(
        { resource: this.resource.name, project: this.scope.key, code: (err as QuerySyncError).code },
        err.message,
      );
  }

  /**
   * The stream's run record, the one shape of `lastRun` (`state/document.ts`): its rows and pages,
   * the requests its calls sent, and for a backfill the span asked and its windows. Field order is
   * the persisted one. The state store takes secrets out of whatever it writes (the key echoed in an
   * error message).
   */
  runRecord(
    outcome: 'ok' | 'failed',
    totals: { readonly rows: number; readonly pages: number },
    seconds: number,
    error: Error | undefined,
    backfill?: { readonly from?: string; readonly to?: string; readonly windows: number; readonly skipped: number },
  ): LastRun {
    return {
      at: new Date(this.started).toISOString(),
      ...(backfill?.from === undefined ? {} : { from: backfill.from, to: backfill.to }),
      outcome,
      rows: totals.rows,
      pages: totals.pages,
      requests: this.ctx.stats.requests,
      ...(backfill === undefined ? {} : { windows: backfill.windows, skipped: backfill.skipped }),
      seconds,
      ...(error ? { error: error.message } : {}),
    };
  }
}
