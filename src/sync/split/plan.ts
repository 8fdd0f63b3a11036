import { DataError, FatalApiError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { ApiRecord, Clock, ProjectScope, ResourceDefinition } from '../../core/types.js';
import { readTotal } from '../../extract/count.js';
import type { JsonReader, RequestMemo } from '../../extract/memo.js';
import { refineAround } from '../../extract/timeseries.js';
import { Capabilities, memoryBook, type CapabilityState } from '../capabilities.js';
import { whereRecordsLie, type RecordsLie } from './lie.js';
import { splitByCounts, splitIntoPages, splitPages, type TimeWindow, type WindowCount } from '../../extract/windows.js';
import { cursorMillis } from '../../normalize/normalize.js';
import type { RateLimits } from '../../http/scheduler/budget.js';
import type { ConcurrencyController } from '../concurrency.js';
import type { ApiClient, CallContext } from '../../http/client.js';
import { runUnits, unitList, type MoreUnits, type SubWalk } from '../units.js';

/**
 * Split walks: one large window of a stream read as sub-windows at once.
 *
 * A walk is sequential (each page's cursor comes from the previous one), so at a real server's
 * latency one walk cannot use the budget. A window that holds many pages is cut into sub-windows
 * balanced by the resource's count endpoint; they are walked concurrently, as many at a time as the
 * `ConcurrencyController` finds useful (up to `--concurrency`). Each sub-window is closed-open and
 * keeps its own checkpoint in the stream's state (`split.parts`), so a killed run resumes each where
 * it was; the mark moves only in the write that finishes the last one.
 */

/** Least pages a sub-window should hold: fewer would spend more on partial last pages than they win. */
const MIN_PAGES_PER_PART = 10;

/** The configured limits a split is sized by (`--max-rps`, `--max-rpm`), never the compiled-in defaults. */
export type SplitLimits = Pick<RateLimits, 'maxRps' | 'maxRpm'>;

/** Client time per page (parse, normalize, write) added to the latency when sizing a split. */
const CLIENT_MS_PER_PAGE = 25;

/**
 * Sub-windows worth cutting at `latencyMs` a request: twice the walks that fill the combined
 * per-second budget (so the controller has room, and the last sub-windows to finish overlap), and
 * at least two.
 */
export function partsForLatency(latencyMs: number, maxRps: number): number {
  return Math.max(2, 2 * Math.ceil((maxRps * (latencyMs + CLIENT_MS_PER_PAGE)) / 1000));
}

/** What the first page of a window showed, for sizing a split before reading on. */
export interface FirstPage {
  readonly records: readonly ApiRecord[];
  readonly hasMore: boolean;
  /** Its answer time (queueing for budget excluded). */
  readonly latencyMs: number;
}

/**
 * Pages a window holds, guessed from its first page alone: the page's records span some stretch of
 * the window (from either end, whatever the order); records spread evenly would fill the rest at
 * the same rate. Free (no request); the split's timeseries corrects it before cutting.
 */
function pagesFromFirstPage(
  resource: ResourceDefinition,
  window: TimeWindow,
  page: Pick<FirstPage, 'records' | 'hasMore'>,
): number {
  if (!page.hasMore) return 1;
  const span = cursorSpan(resource, page.records);
  if (span === undefined) return 1;
  return (window.toMs - window.fromMs) / Math.max(1, span.toMs - span.fromMs);
}

/**
 * The sub-windows to read `window` in, or `undefined` to go on in one walk: when the resource
 * declares no split, when the first page shows a small window, when the timeseries says so, or when
 * it fails (a split is an optimisation; its failure must not fail the sync).
 *
 * One timeseries request (two or three for a first sync from the epoch: see `recordsOverTime`)
 * replaces the counts: where the resource's own counts exist (`exact`), cuts fall where sub-windows
 * hold whole pages, so splitting costs no partial pages (asking finer buckets around each cut when
 * the first answer's edges do not allow it and the walk is long enough for a page to matter: see
 * `wholePages`); elsewhere the events' timeseries says where records lie and the first page's span
 * how many there are.
 */
export async function planSplit(
  resource: ResourceDefinition,
  scope: ProjectScope,
  window: TimeWindow,
  first: FirstPage | undefined,
  maxParts: number,
  deps: {
    readonly client: ApiClient;
    /** The run's memo of aggregate answers (`extract/memo.ts`); absent: each count and timeseries is asked. */
    readonly aggregates?: RequestMemo;
    readonly logger: Logger;
    readonly clock: Clock;
    readonly limits: SplitLimits;
    readonly state?: CapabilityState;
    readonly capabilities?: Capabilities;
  },
  ctx: CallContext,
): Promise<SplitPlan | undefined> {
  const decl = resource.split;
  if (decl === undefined || maxParts < 2) return undefined;
  if (
    first !== undefined &&
    (partsForLatency(first.latencyMs, deps.limits.maxRps) < 2 ||
      pagesFromFirstPage(resource, window, first) < 2 * MIN_PAGES_PER_PART)
  )
    return undefined;
  if (first === undefined && !decl.exact && decl.count === undefined) return undefined;
  try {
    const startedAt = deps.clock.now();
    const waitedBefore = ctx.stats.waitedMs;
    // The count (where the resource has one) does not depend on the timeseries: both go out at once.
    const counted =
      decl.exact || decl.count === undefined
        ? undefined
        : countPages(resource, decl.count, scope, window, deps.aggregates ?? deps.client, ctx);
    counted?.catch(() => undefined);
    const caps = deps.capabilities ?? new Capabilities({ ...deps, state: deps.state ?? memoryBook() });
    // Counts over ranges (where the timeseries is unusable) start from the first page's span, when there is one.
    const span = first === undefined ? undefined : cursorSpan(resource, first.records);
    const firstRangeMs = span === undefined ? undefined : Math.max(60_000, 2 * (window.toMs - span.fromMs));
    const lie = await whereRecordsLie(
      decl,
      scope,
      window,
      maxParts,
      firstRangeMs,
      caps,
      deps.client,
      ctx,
      deps.aggregates,
    );
    if (lie === undefined) {
      deps.logger.warn(
        { resource: resource.name, project: scope.key },
        `${decl.timeseriesPath} is not usable on this server and ${resource.name} declares no count endpoint to cut by: reading the window in one walk`,
      );
      return undefined;
    }
    // Without a first page, the timeseries' own answer time says how many walks the budget can use.
    // (Requests sent at once wait for budget side by side: their waits are counted once.)
    const waited = ((ctx.stats.waitedMs - waitedBefore) * lie.rounds) / lie.requests;
    const latencyMs = first?.latencyMs ?? Math.max(0, (deps.clock.now() - startedAt - waited) / lie.rounds);
    const cap = Math.min(maxParts, partsForLatency(latencyMs, deps.limits.maxRps));
    let pages: number;
    if (decl.exact) {
      pages = lie.total / resource.maxPageSize;
    } else if (counted !== undefined) {
      pages = await counted;
    } else {
      // The first page's share of where records lie (by the proxy) says how many pages there are.
      const span = first === undefined ? undefined : cursorSpan(resource, first.records);
      const seen = span === undefined ? 0 : massWithin(lie.buckets, { fromMs: span.fromMs, toMs: span.toMs + 1 });
      pages =
        seen > 0 && lie.total > 0
          ? lie.total / seen
          : first === undefined
            ? 0
            : pagesFromFirstPage(resource, window, first);
    }
    const parts = Math.min(cap, Math.floor(pages / MIN_PAGES_PER_PART));
    if (parts < 2) return undefined;
    let buckets = lie.buckets;
    // Whole pages need edges every few records (the timeseries' minute buckets); counts over ranges
    // have a few dozen edges, so their cuts go where the records are balanced instead.
    const wholePagesPossible = decl.exact && lie.source === 'timeseries';
    let subs = wholePagesPossible
      ? splitIntoPages(window, parts, buckets, resource.maxPageSize)
      : splitByCounts(window, parts, buckets);
    if (wholePagesPossible && subs.length >= 2 && lie.source === 'timeseries')
      ({ subs, buckets } = await wholePages(resource, scope, window, lie, subs, deps, ctx));
    if (subs.length < 2) return undefined;
    // Sub-windows on another field (conversations' started_at, never after the cursor field): the
    // first one also takes everything that started before the window and is still active in it.
    return {
      parts: decl.partGte === undefined ? subs : subs.map((w, i) => (i === 0 ? { fromMs: 0, toMs: w.toMs } : w)),
      pagesPerPart: pages / subs.length,
      buckets,
    };
  } catch (error) {
    // Only a timeseries the server does not serve as documented is worked around; anything else (a
    // refused key or project, retries exhausted, an abort) would fail the walk too: say it once.
    if (!(error instanceof DataError) && !(error instanceof FatalApiError)) throw error;
    deps.logger.warn(
      { resource: resource.name, project: scope.key, err: (error as Error).message },
      `asking ${decl.timeseriesPath} where records lie, to split the window, failed; reading it in one walk`,
    );
    return undefined;
  }
}

/** Pages the resource's own count endpoint says `window` holds. */
async function countPages(
  resource: ResourceDefinition,
  count: NonNullable<NonNullable<ResourceDefinition['split']>['count']>,
  scope: ProjectScope,
  window: TimeWindow,
  client: JsonReader,
  ctx: CallContext,
): Promise<number> {
  const decl = resource.split as NonNullable<ResourceDefinition['split']>;
  const { path, param, value } = count;
  const query: Record<string, string | undefined> = {
    [param]: value,
    [decl.timeseriesGte]: new Date(window.fromMs).toISOString(),
    [decl.timeseriesLt]: new Date(window.toMs).toISOString(),
  };
  if (scope.projectIds !== undefined && scope.projectIds.length > 0) query.project_ids = scope.projectIds.join(',');
  return (
    readTotal(await client.getJson({ endpoint: path, path, query, project: scope.header }, ctx), path, ctx) /
    resource.maxPageSize
  );
}

/**
 * How far (a share of a sub-window's records) a cut may stray from an even split to fall on a whole
 * page, and so how wide a stretch around each cut is asked finer. Minute buckets hide the counts
 * between records that share a minute or a timestamp; ± 1/8 (about six whole pages each side for
 * 16 sub-windows of 40,000 events) was sometimes all hidden (a run in a few cost page 401), while
 * ± 1/4 is still one minute request (a day of minutes), and at a minute's budget a page saved
 * outweighs a sub-window an eighth longer.
 */
const WHOLE_PAGE_REACH = 1 / 4;

/**
 * A split of exact counts that costs a page more than one walk (its cuts fall inside pages: hour
 * buckets of ~100 records rarely end on a whole page), cut again on the timeseries asked finer
 * around each cut (one request each, on the timeseries endpoint). Only for walks of at least a
 * minute's budget of their endpoint: there the endpoint's per-minute limit binds, so a page is
 * worth 1/400 of a minute of it, and a page past a multiple of 400 a whole minute window (80,000
 * events: 800 pages in 69 s, 801 in 120 s), while the timeseries requests draw on another
 * endpoint's budget. A smaller walk is bound by the combined per-second budget, where the requests
 * would cost more than the page they save. A failed refinement keeps the first cut.
 */
async function wholePages(
  resource: ResourceDefinition,
  scope: ProjectScope,
  window: TimeWindow,
  lie: Extract<RecordsLie, { readonly source: 'timeseries' }>,
  subs: TimeWindow[],
  deps: {
    readonly client: ApiClient;
    readonly aggregates?: RequestMemo;
    readonly logger: Logger;
    readonly limits: SplitLimits;
  },
  ctx: CallContext,
): Promise<{ subs: TimeWindow[]; buckets: readonly WindowCount[] }> {
  const decl = resource.split;
  const pageSize = resource.maxPageSize;
  const pages = splitPages(subs, lie.buckets, pageSize);
  if (decl === undefined || pages <= Math.ceil(lie.total / pageSize) || pages < deps.limits.maxRpm)
    return { subs, buckets: lie.buckets };
  const size = lie.total / subs.length;
  const targets = subs.slice(1).map((_, i) => size * (i + 1));
  try {
    const fine = await refineAround(
      deps.aggregates ?? deps.client,
      decl,
      scope,
      lie,
      targets,
      size * WHOLE_PAGE_REACH,
      ctx,
      lie.allowed,
    );
    if (fine.requests === 0) return { subs, buckets: lie.buckets };
    const again = splitIntoPages(window, subs.length, fine.buckets, pageSize, WHOLE_PAGE_REACH);
    return splitPages(again, fine.buckets, pageSize) < splitPages(subs, fine.buckets, pageSize) &&
      again.length === subs.length
      ? { subs: again, buckets: fine.buckets }
      : { subs, buckets: fine.buckets };
  } catch (error) {
    if (!(error instanceof DataError) && !(error instanceof FatalApiError)) throw error;
    deps.logger.warn(
      { resource: resource.name, project: scope.key, err: (error as Error).message },
      `asking ${decl.timeseriesPath} finer, to cut on whole pages, failed; cutting on the first answer`,
    );
    return { subs, buckets: lie.buckets };
  }
}

/**
 * A sub-window whose first page shows it far larger than its share (the records are not where the
 * proxy timeseries put them: users are denser than events lately): the sub-windows to read it in
 * instead, or `undefined` to go on. Its pages are the proxy's records in the sub-window over those
 * in the first page's span (the ratio of records to proxy taken as constant inside it). Costs the
 * one page read. Only within the run that planned the split (the proxy's buckets are in memory).
 */
export function resplit(
  resource: ResourceDefinition,
  part: TimeWindow,
  first: FirstPage,
  plan: SplitPlan,
  maxParts: number,
): TimeWindow[] | undefined {
  if (!first.hasMore) return undefined;
  const span = cursorSpan(resource, first.records);
  const seen = span === undefined ? 0 : massWithin(plan.buckets, { fromMs: span.fromMs, toMs: span.toMs + 1 });
  if (!(seen > 0)) return undefined;
  const pages = massWithin(plan.buckets, part) / seen;
  const perPart = Math.max(MIN_PAGES_PER_PART, plan.pagesPerPart);
  if (pages < 3 * perPart) return undefined;
  const subs = splitByCounts(part, Math.min(maxParts, Math.floor(pages / perPart)), plan.buckets);
  return subs.length >= 2 ? subs : undefined;
}

/**
 * Least pages a running walk must have left (by the density it has seen) for its far half to be
 * handed to a free slot: each side keeps two pages or more, so the one request a cut costs (the
 * page the walk reads past the cut, or the new walk's partial last page) buys at least a page's
 * round trip.
 */
export const MIN_STEAL_PAGES = 4;

/**
 * Where to cut what a running walk has left (`range`, see `WalkBounds.left`) so each side holds
 * about half its records: by the timeseries this run planned with when there is one, else at the
 * middle. A whole ms strictly inside the range, so both sides are non-empty; `undefined` when the
 * range is too narrow.
 */
export function stealCut(range: TimeWindow, buckets: readonly WindowCount[] | undefined): number | undefined {
  if (range.toMs - range.fromMs < 2) return undefined;
  const half = buckets === undefined ? [] : splitByCounts(range, 2, buckets);
  const at = half.length === 2 ? (half[0] as TimeWindow).toMs : Math.floor((range.fromMs + range.toMs) / 2);
  return Math.min(range.toMs - 1, Math.max(range.fromMs + 1, at));
}

/**
 * Pages a part of `plan` has left after `read` pages, for the scheduler's longest-first order: where
 * records lie by the plan's timeseries, over the range the walk has left when it knows it
 * (`WalkBounds.left`), else over its whole window less the pages read. A part's pages are its exact
 * count where the resource has one, else the plan's pages per part (the parts are balanced by the proxy).
 */
export function partPagesLeft(
  resource: ResourceDefinition,
  plan: SplitPlan,
  part: TimeWindow,
  read: number,
  range: TimeWindow | undefined,
): number {
  const mass = massWithin(plan.buckets, part);
  const pages = resource.split?.exact === true ? mass / resource.maxPageSize : plan.pagesPerPart;
  if (range === undefined || !(mass > 0)) return Math.max(0, pages - read);
  return (pages * massWithin(plan.buckets, range)) / mass;
}

/** A split as planned: its sub-windows, the pages each was given, and where records lie (the timeseries). */
export interface SplitPlan {
  readonly parts: readonly TimeWindow[];
  readonly pagesPerPart: number;
  readonly buckets: readonly WindowCount[];
}

function cursorSpan(resource: ResourceDefinition, records: readonly ApiRecord[]): TimeWindow | undefined {
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const r of records) {
    const ms = cursorMillis(resource, r);
    if (ms === undefined) continue;
    lo = Math.min(lo, ms);
    hi = Math.max(hi, ms);
  }
  return lo <= hi ? { fromMs: lo, toMs: hi } : undefined;
}

function massWithin(buckets: readonly WindowCount[], w: TimeWindow): number {
  let n = 0;
  for (const b of buckets) {
    const from = Math.max(w.fromMs, b.window.fromMs);
    const to = Math.min(w.toMs, b.window.toMs);
    if (to > from) n += (b.count * (to - from)) / (b.window.toMs - b.window.fromMs);
  }
  return n;
}

/**
 * Walk `parts` at most `controller.limit` at a time: the list producer over the one runner
 * (`runUnits`, units.ts). A part may end by handing back the sub-parts it was replaced with (a
 * re-split): they are walked next. The first failure stops new parts from starting; those running
 * finish (their checkpoints are kept) and the failure is thrown.
 */
export async function walkParts<P>(
  parts: readonly P[],
  controller: ConcurrencyController,
  streamCtx: CallContext,
  clock: Clock,
  walkPart: (part: P, sub: SubWalk) => Promise<MoreUnits<P>>,
): Promise<void> {
  await runUnits(unitList(parts), { limit: controller, ctx: streamCtx, clock }, walkPart);
}
