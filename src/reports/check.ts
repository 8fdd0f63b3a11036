import { AuthError, FatalApiError } from '../core/errors.js';
import type { JsonValue, LogicalType, ProjectScope, ResourceDefinition } from '../core/types.js';
import type { SavedSearch } from '../core/types.js';
import { FACETS_PATH, readFacets, readTimeseries, TIMESERIES_PATH } from '../extract/analytics.js';
import { readTotal } from '../extract/count.js';
import type { TimeWindow } from '../extract/windows.js';
import { readEnvelope, walkQuery } from '../extract/paginate.js';
import { newCallStats, type ApiClient, type CallContext } from '../http/client.js';
import { cursorMillis, inferType, PROJECT_COLUMN } from '../normalize/normalize.js';
import { AGGREGATE_HORIZON_MS, EVENT_COUNTS_TABLE, EVENT_FACETS_TABLE } from '../analysts/aggregates.js';
import { allProjectsScope, singleProjectScope, type ScopeOptions } from '../sync/scopes.js';
import type { CapabilityFacts } from '../sync/capabilities.js';
import { probeCapabilities, type OfferedCapability } from './check-capabilities.js';
import { SEARCH_PATH, SEARCH_RANGE_MS, SEARCH_RESULTS_TABLE, searchResource } from '../analysts/searches.js';
import { EXIT_CODES, exitCode } from '../core/exit-codes.js';

/**
 * `check`: before a schedule is set, one request per endpoint and project scope says what works:
 * the key, each project, which endpoints accept `*`, and the shape the server really sends (the
 * declared key and cursor fields present, the fields and their types). Reads the first page only
 * and writes nothing. A rejected key stops it at the first request (every other would say the same).
 */

/** `not-offered`: an optional resource's route answered 404/405 (sync skips it there): information, not a failure. */
type CheckOutcome = 'ok' | 'refuses-all-projects' | 'not-offered' | 'key-rejected' | 'project-refused' | 'failed';

export interface CheckResult {
  readonly resource: string;
  /** The list path, or the count path for a count check. */
  readonly endpoint: string;
  readonly scope: string;
  readonly outcome: CheckOutcome;
  readonly message?: string;
  /** List: records on the first page, and whether more follow. */
  readonly records?: number;
  readonly hasMore?: boolean;
  /** Count: the total the count endpoint gave. */
  readonly total?: number;
  /** The fields of the first page's records, with their inferred types. */
  readonly fields?: Readonly<Record<string, LogicalType>>;
  /** Shape problems: a declared key or cursor field missing, `project_id` missing in a `*` read. */
  readonly problems?: readonly string[];
}

export interface CheckReport {
  readonly results: readonly CheckResult[];
  readonly keyAccepted: boolean;
  /** Endpoints that answered a `*` read, and those that refused it (400). */
  readonly allProjects: { readonly accepted: readonly string[]; readonly refused: readonly string[] };
  /** Project slugs known or seen in `project_id` of `*` reads. */
  readonly projects: readonly string[];
  /** What this server offers of the optional parts of the API, beside what sync recorded (`check-capabilities.ts`). */
  readonly capabilities: readonly OfferedCapability[];
  readonly requests: number;
  readonly ok: boolean;
}

export interface CheckOptions extends ScopeOptions {
  /** Projects recorded in state (for per-project endpoints under `*`). */
  readonly knownProjects: readonly string[];
  readonly signal?: AbortSignal;
  /** `--search`: each saved search is asked once (first page), in one project. */
  readonly searches?: readonly SavedSearch[];
  /** `--aggregates`: the timeseries and facets endpoints are asked once each, in one project. */
  readonly aggregates?: boolean;
  /** @default 'day' */
  readonly aggregatesInterval?: 'day' | 'hour';
  /** @default Date.now() */
  readonly nowMs?: number;
  /** What sync recorded in state about this server's capabilities (shown beside what check finds). */
  readonly recordedCapabilities?: CapabilityFacts;
}

export async function checkApi(options: CheckOptions, client: ApiClient): Promise<CheckReport> {
  const results: CheckResult[] = [];
  const stats = newCallStats();
  const projects = new Set<string>(options.projectIds ?? options.knownProjects);
  let keyAccepted = false;
  const accepted: string[] = [];
  const refused: string[] = [];
  const perProject: ResourceDefinition[] = [];

  const run = async (resource: ResourceDefinition, scope: ProjectScope, count: boolean): Promise<CheckResult> => {
    const ctx: CallContext = {
      resource: resource.name,
      project: scope.key,
      lane: `check|${resource.name}|${scope.key}`,
      stats,
      signal: options.signal,
    };
    let result = count
      ? await checkCount(client, resource, scope, ctx)
      : await checkList(client, resource, scope, ctx, projects);
    if (resource.optional === true && result.outcome === 'failed' && /HTTP 40[45]\b/.test(result.message ?? '')) {
      result = {
        ...result,
        outcome: 'not-offered',
        message: `this server does not offer ${resource.path} (sync skips ${resource.name}): ${result.message ?? ''}`,
      };
      keyAccepted = true;
    }
    // A 403 names the project: the key itself was accepted.
    if (result.outcome === 'ok' || result.outcome === 'refuses-all-projects' || result.outcome === 'project-refused')
      keyAccepted = true;
    results.push(result);
    return result;
  };
  // A rejected key, or a server that does not answer at all: every other request would say the same.
  const stop = (): boolean =>
    results.some((r) => r.outcome === 'key-rejected') || (!keyAccepted && results.some((r) => r.outcome === 'failed'));

  for (const resource of options.resources) {
    if (stop()) break;
    if (options.project !== '*') {
      const scope = singleProjectScope(options.project);
      await run(resource, scope, false);
      if (resource.countPath !== undefined && !stop()) await run(resource, scope, true);
      continue;
    }
    // Every endpoint is asked for `*` once, declared or not: that is what check is for.
    const star = allProjectsScope(options.projectIds);
    const result = await run(resource, star, false);
    if (result.outcome === 'ok') accepted.push(resource.path);
    if (result.outcome === 'refuses-all-projects') {
      refused.push(resource.path);
      perProject.push(resource);
    } else if (resource.countPath !== undefined && !stop()) {
      await run(resource, star, true);
    }
  }
  // Endpoints that refuse `*`: one request per project (known, or seen in the `*` reads above).
  for (const resource of perProject) {
    for (const slug of [...projects].sort()) {
      if (stop()) break;
      await run(resource, singleProjectScope(slug), false);
    }
    if (projects.size === 0) {
      results.push({
        resource: resource.name,
        endpoint: resource.path,
        scope: '*',
        outcome: 'failed',
        message: `${resource.path} refuses "*" and no project slug is known (none in state, none seen in the other endpoints' rows): pass --project-ids a,b`,
      });
    }
  }
  if (!stop()) results.push(...(await checkAnalysts(options, client, stats, projects)));
  let capabilities: OfferedCapability[] = [];
  const slug = options.project === '*' ? [...projects].sort()[0] : options.project;
  if (!stop() && (options.project !== '*' || slug !== undefined)) {
    const ctx: CallContext = {
      resource: 'capabilities',
      project: slug ?? 'default',
      lane: `check|capabilities`,
      stats,
      signal: options.signal,
    };
    capabilities = await probeCapabilities(
      client,
      options.resources,
      singleProjectScope(slug),
      ctx,
      options.nowMs ?? Date.now(),
      options.recordedCapabilities ?? {},
    );
  }
  // A `*` refused, or an optional route absent, is information (sync reads per project, or skips), not a failure.
  const ok = results.every(
    (r) =>
      (r.outcome === 'ok' || r.outcome === 'refuses-all-projects' || r.outcome === 'not-offered') &&
      (r.problems ?? []).length === 0,
  );
  return {
    results,
    keyAccepted,
    allProjects: { accepted, refused },
    projects: [...projects].sort(),
    capabilities,
    requests: stats.requests,
    ok,
  };
}

/**
 * What `sync --search` and `--aggregates` read besides the resources: one request per saved search
 * (its first page over search's 14-day range), one to the timeseries and one to the facets endpoint,
 * each in one project (search and the aggregates are read one project at a time): the sync's
 * project, or under `*` the first known.
 */
async function checkAnalysts(
  options: CheckOptions,
  client: ApiClient,
  stats: CallContext['stats'],
  projects: ReadonlySet<string>,
): Promise<CheckResult[]> {
  const searches = options.searches ?? [];
  if (searches.length === 0 && options.aggregates !== true) return [];
  const slug = options.project === '*' ? [...projects].sort()[0] : options.project;
  const scope = singleProjectScope(slug);
  const project = slug ?? 'default';
  const nowMs = options.nowMs ?? Date.now();
  const ctxOf = (resource: string): CallContext => ({
    resource,
    project,
    lane: `check|${resource}|${project}`,
    stats,
    signal: options.signal,
  });
  const results: CheckResult[] = [];
  if (options.project === '*' && slug === undefined) {
    const endpoints = [
      ...(searches.length > 0 ? [SEARCH_PATH] : []),
      ...(options.aggregates === true ? [TIMESERIES_PATH, FACETS_PATH] : []),
    ];
    return endpoints.map((endpoint) => ({
      resource:
        endpoint === SEARCH_PATH
          ? SEARCH_RESULTS_TABLE
          : endpoint === TIMESERIES_PATH
            ? EVENT_COUNTS_TABLE
            : EVENT_FACETS_TABLE,
      endpoint,
      scope: '*',
      outcome: 'failed' as const,
      message: `${endpoint} is read one project at a time and no project slug is known (none in state, none seen in the other endpoints' rows): pass --project-ids a,b`,
    }));
  }
  for (const search of searches) {
    const resource = searchResource(search);
    const window: TimeWindow = { fromMs: nowMs - SEARCH_RANGE_MS, toMs: nowMs };
    const result = await checkList(client, resource, scope, ctxOf(SEARCH_RESULTS_TABLE), new Set(), window);
    results.push({ ...result, scope: `${search.name}@${project}` });
  }
  if (options.aggregates === true) {
    const window = { fromMs: nowMs - AGGREGATE_HORIZON_MS, toMs: nowMs };
    const base = { scope: project };
    try {
      const { total } = await readTimeseries(
        client,
        scope,
        window,
        options.aggregatesInterval ?? 'day',
        ctxOf(EVENT_COUNTS_TABLE),
      );
      results.push({ ...base, resource: EVENT_COUNTS_TABLE, endpoint: TIMESERIES_PATH, outcome: 'ok', total });
    } catch (error) {
      results.push({ ...base, resource: EVENT_COUNTS_TABLE, endpoint: TIMESERIES_PATH, ...classify(error, scope) });
    }
    try {
      const facets = await readFacets(client, scope, 'event_name', window, ctxOf(EVENT_FACETS_TABLE));
      results.push({
        ...base,
        resource: EVENT_FACETS_TABLE,
        endpoint: FACETS_PATH,
        outcome: 'ok',
        records: facets.length,
        hasMore: false,
        fields: { value: 'string', count: 'int64' },
      });
    } catch (error) {
      results.push({ ...base, resource: EVENT_FACETS_TABLE, endpoint: FACETS_PATH, ...classify(error, scope) });
    }
  }
  return results;
}

async function checkList(
  client: ApiClient,
  resource: ResourceDefinition,
  scope: ProjectScope,
  ctx: CallContext,
  projects: Set<string>,
  window?: TimeWindow,
): Promise<CheckResult> {
  const base = { resource: resource.name, endpoint: resource.path, scope: scope.key };
  let body: JsonValue;
  try {
    body = await client.getJson(
      {
        endpoint: resource.path,
        path: resource.path,
        query: walkQuery({ resource, scope, window }),
        project: scope.header,
      },
      ctx,
    );
  } catch (error) {
    return { ...base, ...classify(error, scope) };
  }
  let page: ReturnType<typeof readEnvelope>;
  try {
    page = readEnvelope(body, ctx);
  } catch (error) {
    return { ...base, outcome: 'failed', message: (error as Error).message };
  }
  const fields: Record<string, LogicalType> = {};
  const problems = new Set<string>();
  for (const record of page.records) {
    for (const [name, value] of Object.entries(record)) if (value !== null) fields[name] ??= inferType(value);
    if (record[resource.key] === undefined || record[resource.key] === null)
      problems.add(`a record without its key field "${resource.key}"`);
    if (resource.cursorField !== undefined && cursorMillis(resource, record) === undefined) {
      problems.add(
        `a record without a usable cursor field "${resource.cursorField}" (${resource.cursorFormat ?? 'iso'})`,
      );
    }
    const project = record[PROJECT_COLUMN];
    if (scope.header === '*') {
      if (typeof project === 'string' && project !== '') projects.add(project);
      else problems.add(`a record of a "*" read without "${PROJECT_COLUMN}"`);
    }
  }
  return {
    ...base,
    outcome: 'ok',
    records: page.records.length,
    hasMore: page.hasMore,
    fields,
    ...(problems.size > 0 ? { problems: [...problems] } : {}),
  };
}

async function checkCount(
  client: ApiClient,
  resource: ResourceDefinition,
  scope: ProjectScope,
  ctx: CallContext,
): Promise<CheckResult> {
  const path = resource.countPath ?? '';
  const base = { resource: resource.name, endpoint: path, scope: scope.key };
  const query: Record<string, string | undefined> = {};
  if (scope.projectIds !== undefined && scope.projectIds.length > 0) query.project_ids = scope.projectIds.join(',');
  try {
    const body = await client.getJson({ endpoint: path, path, query, project: scope.header }, ctx);
    return { ...base, outcome: 'ok', total: readTotal(body, path, ctx) };
  } catch (error) {
    return { ...base, ...classify(error, scope) };
  }
}

function classify(error: unknown, scope: ProjectScope): { outcome: CheckOutcome; message: string } {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof AuthError)
    return { outcome: error.status === 401 ? 'key-rejected' : 'project-refused', message };
  if (error instanceof FatalApiError && error.status === 400 && scope.header === '*')
    return { outcome: 'refuses-all-projects', message };
  return { outcome: 'failed', message };
}

/** Exit code as for sync: 3 for a rejected key or project, 1 for any other failure, 0 when all is well. */
export function checkExitCode(report: CheckReport): number {
  if (report.results.some((r) => r.outcome === 'key-rejected' || r.outcome === 'project-refused'))
    return EXIT_CODES.authentication;
  return exitCode(report.ok ? 'ok' : 'failed');
}
