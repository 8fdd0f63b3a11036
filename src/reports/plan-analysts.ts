import type { SavedSearch } from '../core/types.js';
import { FACET_FIELDS, FACETS_PATH, TIMESERIES_PATH, type Interval } from '../extract/analytics.js';
import { minimumSeconds } from '../http/scheduler/floor.js';
import type { RateLimits } from '../http/scheduler/budget.js';
import type { StateDocument } from '../state/store.js';
import {
  AGGREGATE_HORIZON_MS,
  AGGREGATES_SECTION,
  aggregatesKey,
  countsRange,
  EVENT_COUNTS_TABLE,
  EVENT_FACETS_TABLE,
} from '../analysts/aggregates.js';
import {
  SEARCH_PATH,
  SEARCH_RESULTS_TABLE,
  SEARCH_SECTION,
  searchDefinition,
  searchScopes,
  searchWindow,
  type SearchMark,
} from '../analysts/searches.js';

/**
 * The plan's rows for what a sync reads besides the resources: saved searches (`--search`) and
 * aggregates (`--aggregates`). Aggregates cost a known number of requests (one timeseries and one
 * facets request per field, per project); a search's pages are unknown (search has no count
 * endpoint), so its row says so and gives its range. No request is made.
 */

/** A plan row, as `plan.ts` declares it (kept structural so this file does not import plan.ts). */
export interface AnalystPlanRow {
  readonly resource: string;
  readonly scope: string;
  readonly endpoint: string;
  readonly windows: readonly {
    readonly from: string;
    readonly to: string;
    readonly status: 'todo';
    readonly pages?: number;
  }[];
  readonly pages?: number;
  readonly requests?: number;
  readonly minimumSeconds?: number;
  readonly unknown?: string;
}

export interface AnalystPlanInput {
  readonly searches?: readonly SavedSearch[];
  readonly aggregates?: boolean;
  /** @default 'day' */
  readonly aggregatesInterval?: Interval;
  readonly project: string | undefined;
  readonly projectIds?: readonly string[];
  readonly lookbackMs: number;
  readonly startMs?: number;
}

/** What the analyst streams' plan reads of the state: when each saved search and aggregate last read up to. */
export interface AnalystMarks {
  /** Each saved search's mark, by `<search>|<project>`. */
  readonly searches: Readonly<Record<string, SearchMark>>;
  /** When each aggregate was last refreshed, by `aggregatesKey`. */
  readonly aggregates: Readonly<Record<string, string>>;
}

/** The analyst marks of a state document. */
export function analystMarksOf(doc: Pick<StateDocument, 'sections'>): AnalystMarks {
  return {
    searches: (doc.sections[SEARCH_SECTION] ?? {}) as Readonly<Record<string, SearchMark>>,
    aggregates: (doc.sections[AGGREGATES_SECTION] ?? {}) as Readonly<Record<string, string>>,
  };
}

export function planAnalysts(
  input: AnalystPlanInput,
  state: { readonly projects: readonly string[]; readonly analysts: AnalystMarks },
  runStartMs: number,
  limits: RateLimits,
): AnalystPlanRow[] {
  const interval = input.aggregatesInterval ?? 'day';
  const searches = input.searches ?? [];
  if (searches.length === 0 && input.aggregates !== true) return [];
  const scopes = searchScopes(input.project, input.projectIds, state.projects);
  const rows: AnalystPlanRow[] = [];
  const noProject = (resource: string, endpoint: string): AnalystPlanRow => ({
    resource,
    scope: '*',
    endpoint,
    windows: [],
    unknown: `${endpoint} is read one project at a time and no project is known yet (pass --project-ids, or run a sync first)`,
  });
  const searchMarks = state.analysts.searches;
  for (const search of searches) {
    if (scopes.length === 0) rows.push(noProject(SEARCH_RESULTS_TABLE, SEARCH_PATH));
    for (const scope of scopes) {
      const project = scope.fallbackProjectId ?? 'default';
      const range = searchWindow(
        searchMarks[`${search.name}|${project}`],
        searchDefinition(search),
        runStartMs,
        input.lookbackMs,
      );
      rows.push({
        resource: SEARCH_RESULTS_TABLE,
        scope: `${search.name}@${project}`,
        endpoint: SEARCH_PATH,
        windows: [{ from: iso(range.fromMs), to: iso(range.toMs), status: 'todo' }],
        unknown: `search has no count endpoint: one request per page of hits, at least one (${limits.searchRpm} a minute)`,
      });
    }
  }
  if (input.aggregates === true) {
    if (scopes.length === 0)
      rows.push(noProject(EVENT_COUNTS_TABLE, TIMESERIES_PATH), noProject(EVENT_FACETS_TABLE, FACETS_PATH));
    const refreshed = state.analysts.aggregates;
    for (const scope of scopes) {
      const project = scope.fallbackProjectId ?? 'default';
      const counts = countsRange(refreshed[aggregatesKey(project, interval)], runStartMs, input.startMs, interval);
      rows.push(known(EVENT_COUNTS_TABLE, project, TIMESERIES_PATH, counts, 1, limits));
      rows.push(
        known(
          EVENT_FACETS_TABLE,
          project,
          FACETS_PATH,
          { fromMs: runStartMs - AGGREGATE_HORIZON_MS, toMs: runStartMs },
          FACET_FIELDS.length,
          limits,
        ),
      );
    }
  }
  return rows;
}

function known(
  resource: string,
  scope: string,
  endpoint: string,
  range: { fromMs: number; toMs: number },
  requests: number,
  limits: RateLimits,
): AnalystPlanRow {
  return {
    resource,
    scope,
    endpoint,
    windows: [{ from: iso(range.fromMs), to: iso(range.toMs), status: 'todo', pages: requests }],
    pages: requests,
    requests,
    minimumSeconds: minimumSeconds({ [endpoint]: requests }, limits),
  };
}

const iso = (ms: number): string => new Date(ms).toISOString();
