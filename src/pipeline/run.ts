import { ConfigError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Clock, ProjectScope, ResourceDefinition } from '../core/types.js';
import type { ApiClient } from '../http/client.js';
import type { Destination } from '../load/destination.js';
import { SchemaTracker } from '../normalize/normalize.js';
import type { StateStore } from '../state/store.js';
import { syncStream, type StreamOptions, type StreamResult } from './stream.js';

export interface SyncPlanOptions {
  readonly resources: readonly ResourceDefinition[];
  /** A slug, `*` for all projects, or `undefined` (no header: the service reads `default`). */
  readonly project: string | undefined;
  /** Narrows `*`; also the project list for endpoints that reject `*`. */
  readonly projectIds?: readonly string[];
  readonly lookbackMs: number;
  readonly startMs?: number;
  /** @default 5000 */
  readonly batchRows?: number;
  readonly signal?: AbortSignal;
}

export interface SyncDeps {
  readonly client: ApiClient;
  readonly destination: Destination;
  readonly state: StateStore;
  readonly clock: Clock;
  readonly logger: Logger;
}

export interface RunSummary {
  readonly startedAt: string;
  readonly seconds: number;
  readonly streams: readonly StreamResult[];
  readonly ok: boolean;
}

/** Rows buffered per stream before one write + checkpoint. */
export const DEFAULT_BATCH_ROWS = 5000;

export function singleProjectScope(slug: string | undefined): ProjectScope {
  return { key: slug ?? 'default', header: slug, fallbackProjectId: slug ?? 'default' };
}

export function allProjectsScope(projectIds: readonly string[] | undefined): ProjectScope {
  const ids = projectIds && projectIds.length > 0 ? [...projectIds].sort() : undefined;
  return { key: ids ? `*[${ids.join(',')}]` : '*', header: '*', projectIds: ids, fallbackProjectId: undefined };
}

/**
 * One sync run: every resource × project scope concurrently, all drawing on one request budget.
 * With `*`, endpoints that accept it get one all-projects walk; the others (declared, or found out
 * by a 400 at run time) get one walk per project: the `--project-ids` list, else the projects in
 * state plus any that this run's all-projects reads discover, started as they are discovered.
 */
export async function runSync(options: SyncPlanOptions, deps: SyncDeps): Promise<RunSummary> {
  const runStartMs = deps.clock.now();
  const streamOptions: StreamOptions = {
    runStartMs,
    lookbackMs: options.lookbackMs,
    startMs: options.startMs,
    batchRows: options.batchRows ?? DEFAULT_BATCH_ROWS,
    syncedAt: new Date(runStartMs).toISOString(),
    signal: options.signal,
  };

  const trackers = new Map<string, SchemaTracker>();
  for (const resource of options.resources) {
    trackers.set(resource.name, new SchemaTracker(resource, await deps.destination.describe(resource.name)));
  }
  const run = (resource: ResourceDefinition, scope: ProjectScope, extra: Partial<StreamOptions> = {}): Promise<StreamResult> =>
    syncStream(resource, scope, trackers.get(resource.name) as SchemaTracker, deps, { ...streamOptions, ...extra });

  const pending: Promise<StreamResult>[] = [];

  if (options.project !== '*') {
    for (const resource of options.resources) pending.push(run(resource, singleProjectScope(options.project)));
    return summarize(runStartMs, await Promise.all(pending), deps.clock);
  }

  // All-projects mode.
  const perProject = new Set(options.resources.filter((r) => !r.allProjects));
  const started = new Set<string>();
  const projects = new Set<string>(options.projectIds ?? deps.state.document.projects);
  const discover = options.projectIds === undefined;

  const startPerProject = (resource: ResourceDefinition, slug: string): void => {
    const id = `${resource.name}:${slug}`;
    if (started.has(id)) return;
    started.add(id);
    pending.push(run(resource, singleProjectScope(slug)));
  };
  const onProjects = (slugs: ReadonlySet<string>): void => {
    if (!discover) return;
    const fresh = [...slugs].filter((s) => !projects.has(s));
    if (fresh.length === 0) return;
    for (const slug of fresh) projects.add(slug);
    void deps.state.addProjects(fresh);
    for (const resource of perProject) for (const slug of fresh) startPerProject(resource, slug);
  };

  const star = allProjectsScope(options.projectIds);
  for (const resource of options.resources) {
    if (!resource.allProjects) {
      for (const slug of projects) startPerProject(resource, slug);
      continue;
    }
    pending.push(
      run(resource, star, { onProjects }).then((result) => {
        if (result.outcome !== 'scope-rejected') return result;
        // Declared as accepting `*` but refused it: fall back to one walk per project.
        deps.logger.warn({ resource: resource.name }, `"*" was rejected (400); reading ${resource.name} one project at a time`);
        perProject.add(resource);
        for (const slug of projects) startPerProject(resource, slug);
        return result;
      }),
    );
  }

  // Walks are added while others run (discovered projects): wait until none is left.
  const results: StreamResult[] = [];
  for (let i = 0; i < pending.length; i++) results.push(await (pending[i] as Promise<StreamResult>));

  for (const resource of perProject) {
    if ([...started].some((id) => id.startsWith(`${resource.name}:`))) continue;
    results.push({
      resource: resource.name,
      scope: '*',
      outcome: 'failed',
      rows: 0,
      pages: 0,
      windows: 0,
      seconds: 0,
      stats: { requests: 0, retries: 0, rateLimited: 0, backoffMs: 0, waitedMs: 0 },
      error: new ConfigError(
        `${resource.path} does not accept the all-projects scope "*", and no project slugs are known yet ` +
          `(none in state, none found in this run's all-projects reads): pass --project-ids a,b`,
        { context: { resource: resource.name, project: '*' } },
      ),
    });
  }
  await deps.state.addProjects(projects);
  return summarize(runStartMs, results.filter((r) => r.outcome !== 'scope-rejected'), deps.clock);
}

function summarize(runStartMs: number, streams: StreamResult[], clock: Clock): RunSummary {
  return {
    startedAt: new Date(runStartMs).toISOString(),
    seconds: (clock.now() - runStartMs) / 1000,
    streams,
    ok: streams.every((s) => s.outcome === 'ok'),
  };
}

/** One line per resource and project scope, for the end of a run. */
export function formatSummary(summary: RunSummary): string[] {
  const lines = summary.streams.map((s) => {
    const parts = [
      `${s.resource.padEnd(13)} ${s.scope.padEnd(12)}`,
      `rows=${s.rows}`,
      `pages=${s.pages}`,
      `requests=${s.stats.requests}`,
      `retries=${s.stats.retries}`,
      `429s=${s.stats.rateLimited}`,
      `waited=${(s.stats.waitedMs / 1000).toFixed(1)}s`,
      `backoff=${(s.stats.backoffMs / 1000).toFixed(1)}s`,
      `seconds=${s.seconds.toFixed(1)}`,
      s.outcome === 'ok' ? 'ok' : `FAILED: ${s.error?.message ?? 'unknown error'}`,
    ];
    return parts.join(' ');
  });
  lines.push(`sync ${summary.ok ? 'ok' : 'FAILED'} in ${summary.seconds.toFixed(1)} s`);
  return lines;
}
