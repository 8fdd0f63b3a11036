import type { ResourceDefinition } from '../core/types.js';
import {
  ledgerGaps,
  readLedger,
  streamLedger,
  windowsOf,
  type Interval,
  type StreamLedger,
} from '../state/books/ledger.js';
import type { Lateness, LastRun, StateDocument } from '../state/store.js';
import type { RateLimits } from '../http/scheduler/budget.js';
import { AGGREGATES_SECTION, EVENT_COUNTS_TABLE, EVENT_FACETS_TABLE } from '../analysts/aggregates.js';
import { traceBacklog } from '../sync/traces/queue.js';
import { readsByParent } from '../sync/traces/probe.js';
import { traceLoad, deficitLine, type TraceLoad } from '../sync/traces/load.js';
import { forecastBacklog, type BacklogForecast } from './freshness.js';
import { definitionQuery, SEARCH_RESULTS_TABLE, SEARCH_SECTION, type SearchMark } from '../analysts/searches.js';

/**
 * `status`: per resource and project scope, from the state file and the warehouse: the sync's
 * high-water mark and last run, the backfill ledger with its gaps, and the table's row counts.
 * Pure: the command reads the state (without the run lock) and the counts, this assembles them.
 */

export interface TableCounts {
  /** All rows of the table; `undefined` when the warehouse could not be read. */
  readonly rows?: number;
  /** Rows per `project_id`, when the destination can tell. */
  readonly byProject?: Readonly<Record<string, number>>;
}

export interface WarehouseStatus {
  readonly destination: string;
  readonly location: string;
  readonly available: boolean;
  /** Why the counts are missing. */
  readonly reason?: string;
  readonly tables: Readonly<Record<string, TableCounts>>;
}

interface SyncStreamStatus {
  readonly highWaterMark?: string;
  /** Settle mark: records before it were read again once settled (late enrichment). */
  readonly settled?: string;
  /** How late records arrived (receipt − own time) in the last run that read any. */
  readonly lateness?: Lateness;
  /** A window a killed sync left mid-way (it resumes there). */
  readonly pending?: { readonly from: string; readonly to: string; readonly checkpoint: boolean };
  readonly lastRun?: LastRun;
}

interface BackfillStreamStatus {
  readonly requested: readonly Interval[];
  readonly windowsDone: number;
  readonly rowsDone: number;
  readonly gaps: readonly Interval[];
  readonly running: readonly {
    readonly from: string;
    readonly to: string;
    readonly rows: number;
    readonly checkpoint: boolean;
  }[];
  readonly fullRead?: StreamLedger['fullRead'];
  readonly lastRun?: LastRun;
}

interface ScopeStatus {
  readonly project: string;
  /** Rows of this project (or of every project, for `*`) in the table, when known. */
  readonly tableRows?: number;
  readonly sync?: SyncStreamStatus;
  readonly backfill?: BackfillStreamStatus;
}

/** A per-event resource's backlog (traces read one event at a time). */
interface TraceBacklogStatus {
  /** Events whose traces are still to read, per project. */
  readonly pending: Readonly<Record<string, number>>;
  readonly total: number;
  /** Done records kept to avoid reading them twice (within the re-read horizon). */
  readonly remembered: number;
  /** Least time to drain it at `ratePerMinute` (the endpoint's default limit). */
  readonly etaSeconds: number;
  readonly ratePerMinute: number;
  /** Events answered empty while young, asked again at settle (spans that lag their event). */
  readonly recheck: number;
  /** Events queued a day against what the endpoint's limit allows; `deficit` says the backlog only grows. */
  readonly load?: TraceLoad;
  /** Said when the limit cannot keep up (with the daily deficit). */
  readonly deficit?: string;
  /** When it will be whole at `ratePerMinute`, events still arriving at the daily load. */
  readonly forecast: BacklogForecast;
}

interface ResourceStatus {
  readonly resource: string;
  /** What was learned about the server for this resource: read by time, or one event at a time. */
  readonly readBy?: 'time' | 'parent';
  readonly backlog?: TraceBacklogStatus;
  readonly tableRows?: number;
  readonly rowsByProject?: Readonly<Record<string, number>>;
  readonly scopes: readonly ScopeStatus[];
}

/** A saved search, per project: how far it has been read, and with what. */
interface SearchStatus {
  readonly search: string;
  readonly project: string;
  /** The run start up to which it has been read. */
  readonly mark: string;
  readonly query?: string;
  readonly mode?: string;
}

/** When a project's `event_counts` were last refreshed, per interval. */
interface AggregateStatus {
  readonly project: string;
  readonly interval: string;
  readonly refreshed: string;
}

/** Saved searches and aggregates (`--search`, `--aggregates`), when a sync has read any. */
export interface AnalystStatus {
  readonly searches: readonly SearchStatus[];
  readonly aggregates: readonly AggregateStatus[];
  /** Rows of `search_results`, `event_counts` and `event_facets`, when known. */
  readonly tables: Readonly<Record<string, TableCounts>>;
}

export interface StatusReport {
  readonly state: string;
  readonly projects: readonly string[];
  readonly warehouse: WarehouseStatus;
  readonly resources: readonly ResourceStatus[];
  readonly analysts?: AnalystStatus;
}

/** The tables of saved searches and aggregates a status should count (those the state has read). */
export function analystTablesOf(doc: StateDocument): string[] {
  const out: string[] = [];
  if (Object.keys((doc.sections[SEARCH_SECTION] ?? {}) as object).length > 0) out.push(SEARCH_RESULTS_TABLE);
  if (Object.keys((doc.sections[AGGREGATES_SECTION] ?? {}) as object).length > 0)
    out.push(EVENT_COUNTS_TABLE, EVENT_FACETS_TABLE);
  return out;
}

function analystStatus(doc: StateDocument, warehouse: WarehouseStatus): AnalystStatus | undefined {
  const tables = analystTablesOf(doc);
  if (tables.length === 0) return undefined;
  const counts = Object.fromEntries(
    tables.filter((t) => warehouse.tables[t] !== undefined).map((t) => [t, warehouse.tables[t] as TableCounts]),
  );
  const searches = Object.entries((doc.sections[SEARCH_SECTION] ?? {}) as Readonly<Record<string, SearchMark>>).map(
    ([key, mark]): SearchStatus => {
      const [search = key, project = ''] = key.split('|');
      // An unreadable definition shows the mark alone (the next run re-reads the whole range).
      return { search, project, mark: mark.mark, ...definitionQuery(mark.definition) };
    },
  );
  const aggregates = Object.entries((doc.sections[AGGREGATES_SECTION] ?? {}) as Readonly<Record<string, string>>).map(
    ([key, refreshed]): AggregateStatus => {
      const [project = key, interval = 'day'] = key.split('|');
      return { project, interval, refreshed };
    },
  );
  const byName = (a: { project: string }, b: { project: string }): number => a.project.localeCompare(b.project);
  return {
    searches: searches.sort((a, b) => a.search.localeCompare(b.search) || byName(a, b)),
    aggregates: aggregates.sort((a, b) => byName(a, b) || a.interval.localeCompare(b.interval)),
    tables: counts,
  };
}

export function buildStatus(
  statePath: string,
  doc: StateDocument,
  resources: readonly ResourceDefinition[],
  warehouse: WarehouseStatus,
  /** The configured per-endpoint minute limit (`--max-rpm`): a backlog drains at it. */
  limits: Pick<RateLimits, 'maxRpm'>,
  /** Now (the daily load's "today"). @default Date.now() */
  nowMs: number = Date.now(),
  /** Per resource read one event at a time: events owed their traces per project, from the warehouse's book (the state queue's pending otherwise). */
  owed?: Readonly<Record<string, Readonly<Record<string, number>>>>,
): StatusReport {
  const ledger = readLedger(doc);
  const out: ResourceStatus[] = [];
  for (const resource of resources) {
    const scopes = new Map<string, { sync?: SyncStreamStatus; backfill?: BackfillStreamStatus }>();
    const entry = (scope: string): { sync?: SyncStreamStatus; backfill?: BackfillStreamStatus } => {
      let e = scopes.get(scope);
      if (e === undefined) {
        e = {};
        scopes.set(scope, e);
      }
      return e;
    };
    const prefix = `${resource.name}:`;
    for (const [key, stream] of Object.entries(doc.streams)) {
      if (!key.startsWith(prefix)) continue;
      entry(key.slice(prefix.length)).sync = {
        highWaterMark: stream.mark,
        settled: stream.settled,
        lateness: stream.lateness,
        pending:
          stream.pending === undefined
            ? undefined
            : { from: stream.pending.from, to: stream.pending.to, checkpoint: stream.pending.cursor !== undefined },
        lastRun: stream.lastRun,
      };
    }
    for (const key of Object.keys(ledger.streams)) {
      if (!key.startsWith(prefix)) continue;
      const stream = streamLedger(ledger, key);
      entry(key.slice(prefix.length)).backfill = {
        requested: stream.requested,
        windowsDone: stream.done.reduce((n, d) => n + windowsOf(d), 0),
        rowsDone: stream.done.reduce((n, d) => n + d.rows, 0),
        gaps: ledgerGaps(stream),
        running: stream.running.map((r) => ({
          from: r.from,
          to: r.to,
          rows: r.rows,
          checkpoint: r.cursor !== undefined,
        })),
        fullRead: stream.fullRead,
        lastRun: stream.lastRun,
      };
    }
    const table = warehouse.tables[resource.name] ?? {};
    const byParent = resource.perParent === undefined ? undefined : readsByParent(doc, resource);
    const backlog =
      byParent === true ? traceBacklogStatus(doc, resource, limits, nowMs, owed?.[resource.name]) : undefined;
    out.push({
      resource: resource.name,
      ...(byParent === undefined ? {} : { readBy: byParent ? ('parent' as const) : ('time' as const) }),
      ...(backlog === undefined ? {} : { backlog }),
      tableRows: table.rows,
      rowsByProject: table.byProject,
      scopes: [...scopes.entries()]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([project, e]) => ({ project, tableRows: rowsOfScope(project, table), ...e })),
    });
  }
  const analysts = analystStatus(doc, warehouse);
  return {
    state: statePath,
    projects: doc.projects,
    warehouse,
    resources: out,
    ...(analysts === undefined ? {} : { analysts }),
  };
}

/**
 * The backlog of a resource read one event at a time, its daily load and its forecast at the
 * per-endpoint minute limit (`status`, and a sync's summary at its end).
 */
function traceBacklogStatus(
  doc: StateDocument,
  resource: ResourceDefinition,
  limits: Pick<RateLimits, 'maxRpm'>,
  nowMs: number,
  /** Events owed their traces per project, from the warehouse's trace book. @default the state queue's pending */
  owed?: Readonly<Record<string, number>>,
): TraceBacklogStatus {
  const b = traceBacklog(doc, resource);
  const pending = owed ?? b.pending;
  const total = Object.values(pending).reduce((n, x) => n + x, 0);
  const rate = limits.maxRpm;
  const load = traceLoad(doc, resource, limits, nowMs);
  const deficit = deficitLine(resource, load, limits);
  return {
    pending,
    total,
    remembered: b.done,
    etaSeconds: Math.ceil((total / rate) * 60),
    ratePerMinute: rate,
    recheck: b.recheck,
    ...(load === undefined ? {} : { load }),
    ...(deficit === undefined ? {} : { deficit }),
    forecast: forecastBacklog(
      resource.name,
      total,
      rate,
      load === undefined ? undefined : { perDay: load.perDay, partialDay: load.partialDay },
    ),
  };
}

/** The forecast of each resource read one event at a time on this server (a sync's summary, its run history). */
export function backlogForecasts(
  doc: StateDocument,
  resources: readonly ResourceDefinition[],
  limits: Pick<RateLimits, 'maxRpm'>,
  nowMs: number,
  /** Per resource read one event at a time: events still owed per project (a run's drains say so from the warehouse's book). */
  owed?: Readonly<Record<string, Readonly<Record<string, number>>>>,
): BacklogForecast[] {
  return resources
    .filter((r) => r.perParent !== undefined && readsByParent(doc, r) === true)
    .map((r) => traceBacklogStatus(doc, r, limits, nowMs, owed?.[r.name]).forecast);
}

/** Rows of a scope: one project's, the listed projects' (`*[a,b]`), or all (`*`). */
function rowsOfScope(scope: string, table: TableCounts): number | undefined {
  if (scope === '*') return table.rows;
  const listed = /^\*\[(.*)\]$/.exec(scope);
  if (table.byProject === undefined) return undefined;
  const byProject = table.byProject;
  if (listed !== null) return (listed[1] ?? '').split(',').reduce((n, p) => n + (byProject[p] ?? 0), 0);
  return byProject[scope] ?? 0;
}
