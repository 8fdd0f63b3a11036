import { DataError } from '../core/errors.js';
import type { ApiRecord, ProjectScope, ResourceDefinition, Row, SavedSearch, TableSchema } from '../core/types.js';
import { SYNC_METADATA_COLUMNS, tableSchema } from '../core/table-schema.js';
import { paginate } from '../extract/paginate.js';
import { newCallStats, type CallContext } from '../http/client.js';
import type { LoadBatch } from '../load/destination.js';
import { canonicalTimestamp } from '../normalize/timestamp.js';
import type { StateWriter } from '../state/store.js';
import { Capabilities, routeCapability } from '../sync/capabilities.js';
import { optionalRoute } from '../sync/optional.js';
import { singleProjectScope } from '../sync/scopes.js';
import type { RunHooks } from '../sync/engine.js';
import type { RunServices } from '../sync/context.js';
import { StreamFrame, type StreamResult } from '../sync/frame.js';

/**
 * Saved searches (`--search name=query,…`): each is read from `/v1/events/search` per project into
 * `search_results`, incrementally within the endpoint's 14-day range, on the search endpoint's own
 * budget (50 a minute, and only while the last second's combined count is under 20: the scheduler
 * applies both to `/v1/events/search`).
 */

export const SEARCH_RESULTS_TABLE = 'search_results';
/** The search endpoint (SDK `events-search`). */
export const SEARCH_PATH = '/v1/events/search';
/**
 * The widest window search accepts: "date range limited to 14 days" (SDK). One minute less, so a
 * server whose clock is a little ahead of ours never sees a 14-day-and-a-bit range.
 */
export const SEARCH_RANGE_MS = 14 * 86_400_000 - 60_000;
/** State section: per search and project, the mark and the definition it was read with. */
export const SEARCH_SECTION = 'searches';

const SEARCH_RESULTS_SCHEMA: TableSchema = tableSchema(
  SEARCH_RESULTS_TABLE,
  ['project_id', 'search_name', 'event_id'],
  {
    project_id: 'string',
    search_name: 'string',
    event_id: 'string',
    relevance_score: 'float64',
    event_timestamp: 'timestamp',
    first_matched_at: 'timestamp',
    last_matched_at: 'timestamp',
    query: 'string',
    mode: 'string',
    search_in: 'string',
    ...SYNC_METADATA_COLUMNS,
  },
  {
    // When a search first found the event stays as it was; everything else is the latest run's.
    insertOnly: ['first_matched_at'],
  },
);

/** One (search, project) in the state section. */
export interface SearchMark {
  /** The run start up to which this search has been read (ISO). */
  readonly mark: string;
  /** The definition it was read with: another one re-reads the whole range. */
  readonly definition: string;
}

type SearchSection = Readonly<Record<string, SearchMark>>;

export interface SearchOptions {
  readonly searches: readonly SavedSearch[];
  /** The sync's project: a slug, `*`, or `undefined` (no header: `default`). */
  readonly project: string | undefined;
  readonly projectIds?: readonly string[];
  readonly runStartMs: number;
  readonly lookbackMs: number;
  readonly runId: string;
  readonly signal?: AbortSignal;
}

export interface SearchDeps extends RunServices {
  /** The run's progress callbacks: each (search, project) is a stream of the display. */
  readonly hooks?: RunHooks;
  /** What this server offers (`sync/capabilities.ts`); one over `state` when absent. */
  readonly capabilities?: Capabilities;
}

/** The definition as kept in state and in each row. */
export function searchDefinition(search: SavedSearch): string {
  return JSON.stringify([search.query, search.mode, search.searchIn ?? null, search.threshold ?? null]);
}

/** The query and mode a definition (`searchDefinition`) was read with; `{}` for one this cannot read. */
export function definitionQuery(definition: string): { query?: string; mode?: string } {
  try {
    const parsed = JSON.parse(definition) as unknown;
    if (!Array.isArray(parsed)) return {};
    const [query, mode] = parsed as unknown[];
    return { ...(typeof query === 'string' ? { query } : {}), ...(typeof mode === 'string' ? { mode } : {}) };
  } catch {
    return {};
  }
}

/** The request of one search, as a resource declaration (so the list walk and its checks apply). */
export function searchResource(search: SavedSearch): ResourceDefinition {
  return {
    name: SEARCH_RESULTS_TABLE,
    path: SEARCH_PATH,
    key: 'id',
    mode: 'incremental',
    cursorField: 'timestamp',
    filterGte: 'timestamp[gte]',
    filterLt: 'timestamp[lt]',
    params: {
      query: search.query,
      mode: search.mode,
      ...(search.searchIn === undefined ? {} : { search_in: search.searchIn.join(',') }),
      ...(search.threshold === undefined ? {} : { threshold: String(search.threshold) }),
    },
    sortOrder: 'unknown',
    allProjects: false,
    maxPageSize: 100, // field notes: "maximum 100 on most lists"; the SDK's default is 50
  };
}

/** The projects searched one by one (search has no all-projects scope in the SDK). */
export function searchScopes(
  project: string | undefined,
  projectIds: readonly string[] | undefined,
  known: readonly string[],
): ProjectScope[] {
  if (project !== '*') return [singleProjectScope(project)];
  return [...(projectIds ?? known)].sort().map((slug) => singleProjectScope(slug));
}

/** `[from, to)` a search reads this run: since its mark less the lookback, within the 14-day range. */
export function searchWindow(
  mark: SearchMark | undefined,
  definition: string,
  runStartMs: number,
  lookbackMs: number,
): { fromMs: number; toMs: number; gapMs: number } {
  const rangeStart = runStartMs - SEARCH_RANGE_MS;
  const since = mark === undefined || mark.definition !== definition ? rangeStart : Date.parse(mark.mark) - lookbackMs;
  return { fromMs: Math.max(rangeStart, since), toMs: runStartMs, gapMs: Math.max(0, rangeStart - since) };
}

/**
 * Read every saved search for every project. Each (search, project) is one walk: rows are merged
 * page by page (keyed on project, search and event: a re-read changes nothing but the latest
 * score and `last_matched_at`), and its mark moves to the run's start once the walk is stored.
 */
export async function runSearches(options: SearchOptions, deps: SearchDeps): Promise<StreamResult[]> {
  const scopes = searchScopes(options.project, options.projectIds, deps.state.document.projects);
  if (scopes.length === 0 && options.searches.length > 0) {
    deps.logger.warn(
      "saved searches read one project at a time: no project is known yet for --project '*' (pass --project-ids, or they run once a sync has found the projects)",
    );
  }
  const jobs: Promise<StreamResult>[] = [];
  // A server without search: each search is skipped (learned once, re-checked daily), not failed.
  const caps = deps.capabilities ?? new Capabilities(deps);
  for (const search of options.searches) {
    for (const scope of scopes) {
      const label = `${search.name}@${scope.fallbackProjectId ?? 'default'}`;
      jobs.push(
        optionalRoute(
          routeCapability(SEARCH_PATH),
          undefined,
          caps,
          { resource: SEARCH_RESULTS_TABLE, scope: label },
          () => searchOne(search, scope, options, deps),
        ),
      );
    }
  }
  return Promise.all(jobs);
}

async function searchOne(
  search: SavedSearch,
  scope: ProjectScope,
  options: SearchOptions,
  deps: SearchDeps,
): Promise<StreamResult> {
  const result = await readSearch(search, scope, options, deps);
  deps.hooks?.onStreamDone?.(result);
  return result;
}

async function readSearch(
  search: SavedSearch,
  scope: ProjectScope,
  options: SearchOptions,
  deps: SearchDeps,
): Promise<StreamResult> {
  const project = scope.fallbackProjectId ?? 'default';
  const label = `${search.name}@${project}`;
  const frame = new StreamFrame({ name: SEARCH_RESULTS_TABLE }, scope, deps, options.signal, {
    ctx: {
      resource: SEARCH_RESULTS_TABLE,
      project,
      lane: `${SEARCH_RESULTS_TABLE}|${label}`,
      stats: newCallStats(),
      signal: options.signal,
    },
    failureLog: (error) => ({
      fields: { search: search.name, project, err: error.message },
      message: `search "${search.name}" (${project}) failed: ${error.message}`,
    }),
  });
  const { ctx } = frame;
  const key = `${search.name}|${project}`;
  const definition = searchDefinition(search);
  const section = (deps.state.document.sections[SEARCH_SECTION] ?? {}) as SearchSection;
  const window = searchWindow(section[key], definition, options.runStartMs, options.lookbackMs);
  if (window.gapMs > 0 && section[key] !== undefined && section[key]?.definition === definition) {
    deps.logger.warn(
      { search: search.name, project, missedHours: Math.round(window.gapMs / 3_600_000) },
      `search "${search.name}" (${project}): the last run was more than 14 days ago; search reaches back 14 days only, so matches among events of the ${Math.round(window.gapMs / 3_600_000)} hours before that are not read`,
    );
  }
  const syncedAt = new Date(options.runStartMs).toISOString();
  let rows = 0;
  let pages = 0;
  // The search's mark: committed with the last page's rows (alone when the pages ended otherwise).
  let marked = false;
  const mark = (state: StateWriter): Promise<void> => {
    marked = true;
    return state.updateSection<SearchSection>(SEARCH_SECTION, (current) => ({
      ...(current ?? {}),
      [key]: { mark: syncedAt, definition },
    }));
  };
  deps.hooks?.onStreamStart?.(SEARCH_RESULTS_TABLE, label);
  try {
    const resource = searchResource(search);
    for await (const page of paginate(deps.client, { resource, scope, window }, ctx)) {
      pages += 1;
      const batch: Row[] = [];
      for (const record of page.records) {
        const row = searchRow(search, record, project, syncedAt, options.runId, ctx);
        const ms = Date.parse(String(row.event_timestamp));
        if (ms >= window.fromMs && ms < window.toMs) batch.push(row);
      }
      const write = async (state: LoadBatch['state']): Promise<number> =>
        batch.length === 0
          ? 0
          : (
              await deps.destination.write({
                table: SEARCH_RESULTS_SCHEMA,
                rows: batch,
                ...(state === undefined ? {} : { state }),
              })
            ).rows;
      const stored =
        page.hasMore || batch.length === 0 ? await write(undefined) : await deps.state.withBatch(mark, write);
      rows += stored;
      deps.hooks?.onPage?.(SEARCH_RESULTS_TABLE, label, { records: page.records.length, rowsStored: stored });
    }
    if (!marked) await mark(deps.state);
    return {
      resource: SEARCH_RESULTS_TABLE,
      scope: label,
      outcome: 'ok',
      rows,
      pages,
      windows: 1,
      stats: ctx.stats,
      seconds: frame.elapsed(),
    };
  } catch (error) {
    const { error: err } = frame.failure(error);
    return {
      resource: SEARCH_RESULTS_TABLE,
      scope: label,
      outcome: 'failed',
      rows,
      pages,
      windows: 0,
      stats: ctx.stats,
      seconds: frame.elapsed(),
      error: err,
    };
  }
}

/** One search hit → its `search_results` row. */
function searchRow(
  search: SavedSearch,
  record: ApiRecord,
  project: string,
  syncedAt: string,
  runId: string,
  ctx: CallContext,
): Row {
  const id = record.id;
  const eventId =
    typeof id === 'string' && id !== ''
      ? id
      : typeof id === 'number' || typeof id === 'bigint'
        ? String(id)
        : undefined;
  const timestamp = typeof record.timestamp === 'string' ? canonicalTimestamp(record.timestamp) : undefined;
  if (eventId === undefined || timestamp === undefined) {
    throw new DataError(
      `expected each search result of "${search.name}" to carry an event "id" and an ISO "timestamp", got id ${JSON.stringify(String(id))} and timestamp ${JSON.stringify(String(record.timestamp))}`,
      { context: ctx },
    );
  }
  const score = record.relevance_score;
  return {
    project_id: project,
    search_name: search.name,
    event_id: eventId,
    relevance_score: typeof score === 'number' ? score : typeof score === 'bigint' ? Number(score) : null,
    event_timestamp: timestamp,
    first_matched_at: syncedAt,
    last_matched_at: syncedAt,
    query: search.query,
    mode: search.mode,
    search_in: search.searchIn?.join(',') ?? null,
    _synced_at: syncedAt,
    _run_id: runId,
  };
}
