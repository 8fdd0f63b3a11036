import { CursorRejectedError, DataError, PaginationError } from '../core/errors.js';
import type { ApiRecord, ProjectScope, ResourceDefinition, Row } from '../core/types.js';
import { rowBytes } from '../core/row-bytes.js';
import { paginate, type Page, type PartFilter } from '../extract/paginate.js';
import type { TimeWindow } from '../extract/windows.js';
import type { CallContext } from '../http/client.js';
import { dedupeRows, type LoadBatch, type LoadResult } from '../load/destination.js';
import { cursorMillis, PROJECT_COLUMN, type SchemaTracker } from '../normalize/normalize.js';
import type { StateWriter } from '../state/store.js';
import type { EngineRun, RunServices } from './context.js';
import type { ListFact, ListNotes } from './list-facts.js';
import { OrderWatch } from './order-watch.js';
import type { RowBudget } from './row-budget.js';

/** What one walk reads and where its progress goes (its run's services and `_synced_at` are passed beside it). */
export interface WalkParams {
  readonly resource: ResourceDefinition;
  readonly scope: ProjectScope;
  readonly tracker: SchemaTracker;
  /** The window to read; `undefined` reads everything (full-refresh resources). */
  readonly window: TimeWindow | undefined;
  /** Resume from this cursor instead of the first page. */
  readonly startCursor: string | undefined;
  /** A split walk's sub-window on another field than the window's (see `WalkRequest.partFilter`). */
  readonly partFilter?: PartFilter;
  /**
   * The walk's live range, when it may be cut while it runs (tail work-stealing, `stream.ts`): rows
   * are kept by `bounds.window` as it is when each page is read, and the walk ends at the first
   * page past its far edge (the records' order seen so far allowing).
   */
  readonly bounds?: WalkBounds;
  /**
   * Called with the first page of a walk from the window's start (not a resumed one), before any of
   * it is stored: resolving `true` abandons the walk (nothing stored, no checkpoint), e.g. because
   * the window is to be read split.
   */
  readonly onFirstPage?: (page: Page) => Promise<boolean>;
  /** Rows buffered before one write + checkpoint. */
  readonly batchRows: number;
  /**
   * Text buffered before a write, whatever the row count (`--batch-bytes`): reached inside a
   * page, the rows so far are written at once and the checkpoint follows at the page's end.
   */
  readonly batchBytes: number;
  /** Stop after the write that brings the walk's rows to this many, over its attempts (a dry run's sample). */
  readonly sampleRows?: number | undefined;
  readonly ctx: CallContext;
  /**
   * Called after each batch is durable in the destination, with the cursor of the next page to read
   * (`null` when the window is done) and what this attempt read and stored so far, this batch
   * included (`WalkEnd.attempt`). Whoever owns the window stores it (state mark, backfill ledger)
   * through `state`, the writer of the batch it commits with.
   */
  readonly checkpoint: (nextCursor: string | null, state: StateWriter, attempt: WalkCounts) => Promise<void>;
  /** Called when the server no longer accepts `startCursor`, before re-reading the window. */
  readonly onCursorRejected?: () => Promise<void>;
  /** Called with project slugs found in `project_id` of all-projects reads. */
  readonly onProjects?: (slugs: ReadonlySet<string>) => void;
  /** Called after each page (progress display). */
  readonly onPage?: (page: { readonly records: number; readonly rowsStored: number }) => void;
  /**
   * Called with each batch once it is durable, before its checkpoint (per-event traces enqueue
   * from it, so a crash between the two re-reads the batch rather than losing its traces); what
   * it records goes through `state`, the batch's writer.
   */
  readonly onStored?: (rows: readonly Row[], state: StateWriter) => Promise<void>;
  /** What the run learned of this list so far and collects of it (docs/list-semantics.md). */
  readonly lists?: { readonly notes: ListNotes; readonly fact: ListFact };
  /**
   * Where a window read whole in one batch (from its start, nothing written before its last page)
   * hands that batch, its rows and its state (the checkpoint that ends it), instead of committing
   * it alone: a backfill's small windows share one write (`shared-batch.ts`). Resolves once taken;
   * the rows are durable later, with the shared write. @default each window writes its own
   */
  readonly shareLastBatch?: (rows: readonly Row[], changes: (state: StateWriter) => Promise<void>) => Promise<void>;
  /**
   * Where a batch (deduplicated, not empty) and its state changes are committed instead of alone:
   * a split's parts share their stream's commits (`group-commit.ts`). Resolves once durable.
   * @default each batch its own commit
   */
  readonly commitBatch?: (rows: readonly Row[], changes: (state: StateWriter) => Promise<void>) => Promise<LoadResult>;
  /**
   * The rows this walk may hold, shared with its stream's other parts (`row-budget.ts`): a page's
   * worth is taken before each page is asked for and given back once its rows are stored.
   * @default no bound beyond the walk's own batch
   */
  readonly rowBudget?: RowBudget;
}

/**
 * Times one window is restarted from its first page because the server refused a cursor (expired
 * while we read, or at resume). Each restart re-reads what was stored (harmless: keyed merges); a
 * server that refuses every cursor must not loop forever.
 */
export const MAX_WINDOW_RESTARTS = 3;

/** What a walk did: pages read, rows stored. */
export interface WalkCounts {
  readonly rows: number;
  readonly pages: number;
}

/**
 * How a walk ended, and what it did: `rows` and `pages` over all its attempts (a refused cursor
 * restarts it), `attempt` since it last started from its window's first page or its resumed cursor
 * (what the window's own record counts). A failed walk returns its error with its counts (its
 * owner's record counts the pages it read, and a stream that read none may be scope-rejected);
 * the owner throws it (`endOf`).
 */
export type WalkEnd = WalkCounts & { readonly attempt: WalkCounts } & (
    | { readonly ended: 'done' | 'abandoned' }
    | { readonly ended: 'failed'; readonly error: unknown }
  );

/** A walk's end once its owner has counted what it did: its error thrown when it failed. */
export function endOf(walk: WalkEnd): 'done' | 'abandoned' {
  if (walk.ended === 'failed') throw walk.error;
  return walk.ended;
}

const NOTHING: WalkCounts = { rows: 0, pages: 0 };

/**
 * Walk every page of one window, pulling a page at a time (memory stays flat), cut rows to the
 * window on the client, normalize, write in batches, and checkpoint after each write. A cursor the
 * server refuses, at resume or in the middle of the walk (`CursorRejectedError`), restarts the
 * window from its first page, at most `MAX_WINDOW_RESTARTS` times: keyed merges make the re-read
 * harmless. Resolves with how it ended and what it did (`WalkEnd`), a failure included.
 */
export async function walkWindow(
  options: WalkParams,
  deps: RunServices & Pick<EngineRun, 'syncedAt'>,
  restarts = 0,
  before: WalkCounts = NOTHING,
): Promise<WalkEnd> {
  const { resource, scope, window, ctx } = options;
  /** What this attempt read and stored (`before`: the attempts before it). */
  const counts = { rows: 0, pages: 0 };
  const total = (): WalkCounts => ({ rows: before.rows + counts.rows, pages: before.pages + counts.pages });
  const end = (ended: 'done' | 'abandoned'): WalkEnd => ({ ...total(), attempt: { ...counts }, ended });
  const failed = (error: unknown): WalkEnd => ({ ...total(), attempt: { ...counts }, ended: 'failed', error });
  let buffer: Row[] = [];
  let bufferBytes = 0;
  const budget = options.rowBudget;
  const pageRows = Math.min(options.lists?.fact.pageCap ?? resource.maxPageSize, resource.maxPageSize);
  /** Rows taken of the budget for the pages read and not yet stored, and for the page asked for ahead. */
  let held = 0;
  let ahead = 0;
  const release = (): void => {
    budget?.give(held);
    held = 0;
  };
  const batchBytes = options.batchBytes;
  const seenProjects = new Set<string>();
  /** Whether this walk committed anything yet (rows or a checkpoint): a shared last batch needs none. */
  let committed = false;
  /** Write the buffer with its state: what `onStored` records, and the checkpoint when `cursor` is given. */
  const flush = async (cursor?: string | null): Promise<number> => {
    const schema = options.tracker.schema;
    // Deduped here (as the destination does), so the rows this batch stores are known before the
    // write: the checkpoint that commits with it counts them (a backfill ledger's window rows).
    const rows = dedupeRows(buffer, schema.key, schema.versionColumn);
    const read = buffer;
    const changes = async (state: StateWriter): Promise<void> => {
      if (rows.length > 0) await options.onStored?.(read, state);
      if (cursor !== undefined) await options.checkpoint(cursor, state, { ...counts });
    };
    if (cursor === null && !committed && options.startCursor === undefined && options.shareLastBatch !== undefined) {
      // The whole window in one batch: its rows and its end go with other windows' in one write
      // (counted first: the checkpoint that ends the window counts them, and may run in `shareLastBatch`).
      counts.rows += rows.length;
      try {
        await options.shareLastBatch(rows, changes);
      } catch (error) {
        counts.rows -= rows.length;
        throw error;
      }
      buffer = [];
      bufferBytes = 0;
      return rows.length;
    }
    committed = true;
    if (rows.length === 0) {
      await changes(deps.state);
      if (cursor !== undefined) release();
      return 0;
    }
    const write = (state: LoadBatch['state']): Promise<LoadResult> =>
      deps.destination.write({ table: schema, rows, ...(state === undefined ? {} : { state }) });
    counts.rows += rows.length;
    let written: LoadResult;
    try {
      written =
        options.commitBatch === undefined
          ? await deps.state.withBatch(changes, write)
          : await options.commitBatch(rows, changes);
    } catch (error) {
      counts.rows -= rows.length;
      throw error;
    }
    for (const warning of written.warnings ?? [])
      deps.logger.warn({ resource: resource.name, project: scope.key }, warning);
    buffer = [];
    bufferBytes = 0;
    // At a page's end every page read so far is stored: what they took goes back.
    if (cursor !== undefined) release();
    return rows.length;
  };
  const order = new OrderWatch(options, deps.logger);
  const lists = options.lists;
  const pages = paginate(
    deps.client,
    {
      resource,
      scope,
      window,
      startCursor: options.startCursor,
      partFilter: options.partFilter,
      pageSize: lists?.fact.pageCap,
      offsetCursors: lists?.fact.cursor === 'offset',
      watch: lists === undefined ? undefined : (seen) => lists.notes.observe(seen),
    },
    ctx,
  )[Symbol.asyncIterator]();
  // Rows of projects not asked for: `project_ids` is not in the SDK, and a server that ignores it
  // answers for every project. They are dropped and counted, never stored.
  const asked =
    scope.header === '*' && scope.projectIds !== undefined && scope.projectIds.length > 0
      ? new Set(scope.projectIds)
      : undefined;
  let firstPage = options.startCursor === undefined && options.onFirstPage !== undefined;
  try {
    if (budget !== undefined) ahead = await budget.take(pageRows);
    let next = pages.next();
    for (;;) {
      const result = await next;
      held += ahead;
      ahead = 0;
      if (result.done === true) break;
      const page = result.value;
      if (firstPage) {
        firstPage = false;
        if (await (options.onFirstPage as NonNullable<WalkParams['onFirstPage']>)(page)) {
          await pages.return?.(undefined);
          return end('abandoned');
        }
      }
      const cut = options.bounds?.observe(page.records) ?? false;
      const past = order.pastWindow(page.records) || cut;
      const hasMore = page.hasMore && !past;
      // Fetch the next page while this one is normalized and written: the walk's requests keep
      // flowing during a write. (Its rejection, if any, surfaces at the await above.) Not when the
      // stream's parts hold their budget of rows: then after this page (see below).
      let fetching = false;
      if (hasMore) {
        const took = budget === undefined ? 0 : budget.tryTake(pageRows);
        if (took !== undefined) {
          ahead = took;
          fetching = true;
          next = pages.next();
          next.catch(() => undefined);
        }
      }
      counts.pages += 1;
      let stored = 0;
      let writtenInPage = false;
      // The page's records are the walk's once the reader hands them over (it keeps their count
      // only): each is let go once normalized, so the parsed page does not stay in the heap beside
      // its rows while they wait for their write, nor while the next page is fetched and the
      // write's commit awaited. About 20 MB less at a first sync's peak (docs/benchmarks.md,
      // First sync, fourth step).
      const records = page.records as (ApiRecord | undefined)[];
      for (let i = 0; i < records.length; i++) {
        const record = records[i] as ApiRecord;
        records[i] = undefined;
        if (window !== undefined && !inWindow(resource, record, options.bounds?.window ?? window, ctx)) continue;
        const row = normalize(options, record, deps.syncedAt);
        if (asked !== undefined && !asked.has(String(row[PROJECT_COLUMN]))) {
          lists?.notes.dropForeign(String(row[PROJECT_COLUMN]));
          continue;
        }
        if (scope.header === '*') seenProjects.add(String(row[PROJECT_COLUMN]));
        buffer.push(row);
        bufferBytes += rowBytes(row);
        // Very large rows: write before the page ends (no checkpoint: the page is not all stored;
        // a resumed walk re-reads it, and keyed merges make that harmless).
        if (bufferBytes >= batchBytes) {
          stored += await flush();
          writtenInPage = true;
        }
      }
      // Projects seen start their per-project walks at once (discovery needs no durability: the
      // list only says what to read; waiting for the batch's write delayed them by many pages).
      if (seenProjects.size > 0) options.onProjects?.(seenProjects);
      // Field → column renames (once each) and values stored differently than received.
      for (const note of options.tracker.drainNotes())
        deps.logger[note.level]({ resource: resource.name, project: scope.key }, note.message);
      deps.logger.debug(
        {
          resource: resource.name,
          project: scope.key,
          page: before.pages + counts.pages,
          walkFrom: (options.partFilter?.window ?? options.window)?.fromMs,
          records: page.records.length,
          hasMore: page.hasMore,
          pastWindow: past,
        },
        'page',
      );
      if (buffer.length >= options.batchRows || bufferBytes >= batchBytes || writtenInPage || !hasMore) {
        // The rows and the checkpoint after them are one commit where the warehouse keeps state.
        stored += await flush(hasMore ? page.nextCursor : null);
      } else if (hasMore && !fetching && budget !== undefined && buffer.length > 0) {
        // The stream's parts hold their budget: what this walk holds is written (so it goes back)
        // before it waits for room for its next page (below), and no walk waits on one that waits.
        stored += await flush(page.nextCursor);
      }
      options.onPage?.({ records: page.records.length, rowsStored: stored });
      if (!hasMore) break;
      if (options.sampleRows !== undefined && before.rows + counts.rows >= options.sampleRows && hasMore) {
        await pages.return?.(undefined);
        return end('done');
      }
      if (!fetching && budget !== undefined) {
        release(); // a page with no rows to store
        ahead = await budget.take(pageRows);
        next = pages.next();
        next.catch(() => undefined);
      }
    }
    order.report(lists?.notes);
  } catch (error) {
    if (!(error instanceof CursorRejectedError)) return failed(error);
    try {
      await refusedCursor(error, options, deps, restarts, counts.pages);
    } catch (refused) {
      return failed(refused);
    }
    // A walk cut while it ran restarts over what is left to it (and learns its records' order again).
    options.bounds?.restart();
    return walkWindow(
      { ...options, window: options.bounds?.window ?? window, startCursor: undefined, onFirstPage: undefined },
      deps,
      restarts + 1,
      total(),
    );
  } finally {
    // However the walk ends: a page fetched ahead and never read, rows never stored.
    release();
    budget?.give(ahead);
    ahead = 0;
  }
  return end('done');
}

/**
 * The server refused the walk's cursor: fail once the window was restarted `MAX_WINDOW_RESTARTS`
 * times, else say so and let the owner forget the cursor (the caller restarts from the first page).
 */
async function refusedCursor(
  error: CursorRejectedError,
  options: WalkParams,
  deps: RunServices,
  restarts: number,
  pagesInWalk: number,
): Promise<void> {
  const { resource, scope, window, ctx } = options;
  const where =
    window === undefined
      ? 'the whole resource'
      : `window [${new Date(window.fromMs).toISOString()}, ${new Date(window.toMs).toISOString()})`;
  if (restarts >= MAX_WINDOW_RESTARTS) {
    throw new PaginationError(
      `the server refused our cursor ${restarts + 1} times while reading ${where} (restarted from its first page ${restarts} times); ` +
        `expected a cursor to stay valid for one walk. Last refusal: ${error.message}`,
      { cause: error, context: ctx },
    );
  }
  deps.logger.warn(
    {
      resource: resource.name,
      project: scope.key,
      status: error.status,
      pagesRead: pagesInWalk,
      restart: restarts + 1,
      maxRestarts: MAX_WINDOW_RESTARTS,
    },
    `cursor refused after ${pagesInWalk} pages of ${where} (HTTP ${error.status}); re-reading it from its first page (keyed merges make the re-read harmless)`,
  );
  await options.onCursorRejected?.();
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

function normalize(options: WalkParams, record: ApiRecord, syncedAt: string): Row {
  try {
    return options.tracker.normalize(record, options.scope.fallbackProjectId, syncedAt);
  } catch (error) {
    if (error instanceof DataError) throw new DataError(error.message, { cause: error, context: options.ctx });
    throw error;
  }
}

/**
 * The live range of a walk that may be cut while it runs: what it has seen (the direction its
 * records come in, the last cursor value), so a producer can hand the far part of what is left to
 * another walk (`cut`), and the window it keeps rows of. The API may list newest or oldest first:
 * the direction is read from the records (two different cursor values), and a walk whose records
 * ever go against it is never cut and never stops early (it reads to the end of its cursor, keeping
 * the rows of its window: overlap is harmless, keyed merges; a gap is not).
 */
export class WalkBounds {
  /** Rows outside it are dropped; once cut, the part the walk still owns. */
  window: TimeWindow;
  /** The edge the walk started from, which it keeps when cut (`to` newest first, `from` oldest first). */
  anchor: 'from' | 'to' | undefined;
  private firstMs: number | undefined;
  private lastMs: number | undefined;
  private direction: 'asc' | 'desc' | undefined;
  private ordered = true;
  private pages = 0;

  constructor(
    window: TimeWindow,
    private readonly resource: ResourceDefinition,
  ) {
    this.window = window;
  }

  /** A page read (before its rows are kept): whether the walk has passed its window's far edge. */
  observe(records: readonly ApiRecord[]): boolean {
    for (const record of records) {
      const ms = cursorMillis(this.resource, record);
      if (ms === undefined) continue; // inWindow reports the missing field
      if (this.lastMs !== undefined && ms !== this.lastMs) {
        const step = ms > this.lastMs ? 'asc' : 'desc';
        if (this.direction === undefined && this.ordered) this.direction = step;
        else if (step !== this.direction) this.ordered = false;
      }
      this.firstMs ??= ms;
      this.lastMs = ms;
    }
    this.pages += 1;
    return this.passed();
  }

  /** The walk saw a record past the far edge of its window, in an order that says no later one can be inside. */
  passed(): boolean {
    if (!this.ordered || this.direction === undefined || this.lastMs === undefined) return false;
    return this.direction === 'desc' ? this.lastMs < this.window.fromMs : this.lastMs >= this.window.toMs;
  }

  /**
   * What is left to read, and the pages it holds at the density seen so far (`undefined` while the
   * walk cannot be cut: its order unknown or broken, fewer than two pages seen, or past its edge).
   * Newest first, rows at the last value seen may still come: the range includes it.
   */
  left(): { readonly range: TimeWindow; readonly pages: number; readonly direction: 'asc' | 'desc' } | undefined {
    const { firstMs, lastMs, direction } = this;
    if (
      !this.ordered ||
      direction === undefined ||
      firstMs === undefined ||
      lastMs === undefined ||
      this.pages < 2 ||
      this.passed()
    )
      return undefined;
    const range =
      direction === 'desc'
        ? { fromMs: this.window.fromMs, toMs: lastMs + 1 }
        : { fromMs: lastMs, toMs: this.window.toMs };
    const seen = Math.abs(lastMs - firstMs);
    if (range.toMs - range.fromMs < 2 || seen <= 0) return undefined;
    return { range, pages: ((range.toMs - range.fromMs) / seen) * this.pages, direction };
  }

  /**
   * Give up the far part of what is left from `atMs` on: the walk keeps the rows before it in its
   * direction of travel (`atMs` itself newest first: [atMs, to); oldest first: [from, atMs)), and
   * the other side is returned for another walk. Rows equal to `atMs` belong to exactly one side.
   */
  cut(atMs: number, direction: 'asc' | 'desc'): TimeWindow {
    const { fromMs, toMs } = this.window;
    this.anchor = direction === 'desc' ? 'to' : 'from';
    if (direction === 'desc') {
      this.window = { fromMs: atMs, toMs };
      return { fromMs, toMs: atMs };
    }
    this.window = { fromMs, toMs: atMs };
    return { fromMs: atMs, toMs };
  }

  /** The walk starts again from its first page (a refused cursor): its order is learned again. */
  restart(): void {
    this.firstMs = undefined;
    this.lastMs = undefined;
    this.pages = 0;
  }
}
