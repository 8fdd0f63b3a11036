import { DataError, FatalApiError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { ApiRecord, ProjectScope, ResourceDefinition, Row } from '../core/types.js';
import { paginate, type TimeWindow } from '../extract/paginate.js';
import type { ApiClient, CallContext } from '../http/client.js';
import type { Destination } from '../load/destination.js';
import { cursorMillis, PROJECT_COLUMN, type SchemaTracker } from '../normalize/normalize.js';

export interface WalkDeps {
  readonly client: ApiClient;
  readonly destination: Destination;
  readonly logger: Logger;
}

export interface WalkOptions {
  readonly resource: ResourceDefinition;
  readonly scope: ProjectScope;
  readonly tracker: SchemaTracker;
  /** The window to read; `undefined` reads everything (full-refresh resources). */
  readonly window: TimeWindow | undefined;
  /** Resume from this cursor instead of the first page. */
  readonly startCursor: string | undefined;
  /** Rows buffered before one write + checkpoint. */
  readonly batchRows: number;
  /** Stop after the write that brings the walk's rows to this many (a dry run's sample). */
  readonly sampleRows?: number | undefined;
  readonly syncedAt: string;
  readonly ctx: CallContext;
  /**
   * Called after each batch is durable in the destination, with the cursor of the next page to read
   * (`null` when the window is done). Whoever owns the window stores it (state mark, backfill ledger).
   */
  readonly checkpoint: (nextCursor: string | null) => Promise<void>;
  /** Called when the server no longer accepts `startCursor`, before re-reading the window. */
  readonly onCursorRejected?: () => Promise<void>;
  /** Called with project slugs found in `project_id` of all-projects reads. */
  readonly onProjects?: (slugs: ReadonlySet<string>) => void;
  /** Called after each page (progress display). */
  readonly onPage?: (page: { readonly records: number; readonly rowsStored: number }) => void;
}

export interface WalkTotals {
  rows: number;
  pages: number;
}

/**
 * Walk every page of one window, pulling a page at a time (memory stays flat), cut rows to the
 * window on the client, normalize, write in batches, and checkpoint after each write. A resumed
 * cursor the server refuses (400 on the first page) restarts the window from its first page:
 * keyed merges make the re-read harmless.
 */
export async function walkWindow(options: WalkOptions, deps: WalkDeps, totals: WalkTotals): Promise<void> {
  const { resource, scope, window, ctx } = options;
  let buffer: Row[] = [];
  const seenProjects = new Set<string>();
  let pagesInWalk = 0;
  const pages = paginate(deps.client, { resource, scope, window, startCursor: options.startCursor }, ctx)[Symbol.asyncIterator]();
  try {
    let next = pages.next();
    for (;;) {
      const result = await next;
      if (result.done === true) break;
      const page = result.value;
      // Fetch the next page while this one is normalized and written: the walk's requests keep
      // flowing during a write. (Its rejection, if any, surfaces at the await above.)
      next = pages.next();
      next.catch(() => undefined);
      pagesInWalk += 1;
      totals.pages += 1;
      for (const record of page.records) {
        if (window !== undefined && !inWindow(resource, record, window, ctx)) continue;
        const row = normalize(options, record);
        if (scope.header === '*') seenProjects.add(String(row[PROJECT_COLUMN]));
        buffer.push(row);
      }
      deps.logger.debug(
        { resource: resource.name, project: scope.key, page: totals.pages, records: page.records.length, hasMore: page.hasMore },
        'page',
      );
      let stored = 0;
      if (buffer.length >= options.batchRows || !page.hasMore) {
        if (buffer.length > 0) {
          const written = await deps.destination.write({ table: options.tracker.schema, rows: buffer });
          for (const warning of written.warnings ?? []) deps.logger.warn({ resource: resource.name, project: scope.key }, warning);
          totals.rows += written.rows;
          stored = written.rows;
        }
        buffer = [];
        if (seenProjects.size > 0) options.onProjects?.(seenProjects);
        await options.checkpoint(page.hasMore ? page.nextCursor : null);
      }
      options.onPage?.({ records: page.records.length, rowsStored: stored });
      if (options.sampleRows !== undefined && totals.rows >= options.sampleRows && page.hasMore) {
        await pages.return?.(undefined);
        return;
      }
    }
  } catch (error) {
    const cursorRejected =
      options.startCursor !== undefined && pagesInWalk === 0 && error instanceof FatalApiError && error.status === 400;
    if (!cursorRejected) throw error;
    deps.logger.warn({ resource: resource.name, project: scope.key }, 'checkpoint cursor rejected; re-reading the window');
    await options.onCursorRejected?.();
    return walkWindow({ ...options, startCursor: undefined }, deps, totals);
  }
}

/** The client-side cut-off: the server may ignore or widen the filter. */
function inWindow(resource: ResourceDefinition, record: ApiRecord, window: TimeWindow, ctx: CallContext): boolean {
  const ms = cursorMillis(resource, record);
  if (ms === undefined) {
    throw new DataError(
      `expected "${resource.cursorField}" (${resource.cursorFormat ?? 'iso'}) on every record, got ${
        record[resource.cursorField ?? ''] === undefined ? 'none' : typeof record[resource.cursorField ?? '']
      } in record ${String(record[resource.key])}`,
      { context: ctx },
    );
  }
  return ms >= window.fromMs && ms < window.toMs;
}

function normalize(options: WalkOptions, record: ApiRecord): Row {
  try {
    return options.tracker.normalize(record, options.scope.fallbackProjectId, options.syncedAt);
  } catch (error) {
    if (error instanceof DataError) throw new DataError(error.message, { cause: error, context: options.ctx });
    throw error;
  }
}
