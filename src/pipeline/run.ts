import type { Logger } from '../core/log.js';
import type { Clock, ProjectScope, ResourceDefinition } from '../core/types.js';
import { newCallStats, type ApiClient } from '../http/client.js';
import type { Destination } from '../load/destination.js';
import { SchemaTracker } from '../normalize/normalize.js';
import type { StateStore } from '../state/store.js';
import { forEachScope, type ScopeHooks } from './scopes.js';
import { formatStreamLine, syncStream, type StreamOptions, type StreamResult } from './stream.js';

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
  /** @default DEFAULT_BATCH_BYTES (walk.ts) */
  readonly batchBytes?: number;
  /** Most sub-windows of one large window walked at once (split walks). @default 16 */
  readonly concurrency?: number;
  /** Stop each stream once it has written this many rows (a dry run's sample). @default all */
  readonly sampleRows?: number;
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

export { allProjectsScope, singleProjectScope } from './scopes.js';

/** Progress callbacks of a run (the live display and the progress log lines). */
export interface RunHooks {
  /** A walk of one (resource, scope) starts. */
  readonly onStreamStart?: (resource: string, scope: string) => void;
  /** It ended, whatever the outcome (`scope-rejected`: replaced by per-project walks). */
  readonly onStreamDone?: (result: StreamResult) => void;
  /** After each page of a walk. */
  readonly onPage?: (resource: string, scope: string, page: { readonly records: number; readonly rowsStored: number }) => void;
}

/**
 * One sync run: every resource × project scope concurrently, all drawing on one request budget.
 * With `*`, endpoints that accept it get one all-projects walk; the others (declared, or found out
 * by a 400 at run time) get one walk per project: the `--project-ids` list, else the projects in
 * state plus any that this run's all-projects reads discover, started as they are discovered
 * (`forEachScope`).
 */
export async function runSync(options: SyncPlanOptions, deps: SyncDeps, hooks: RunHooks = {}): Promise<RunSummary> {
  const runStartMs = deps.clock.now();
  const streamOptions: StreamOptions = {
    runStartMs,
    lookbackMs: options.lookbackMs,
    startMs: options.startMs,
    batchRows: Math.min(options.batchRows ?? DEFAULT_BATCH_ROWS, options.sampleRows ?? Infinity),
    batchBytes: options.batchBytes,
    syncedAt: new Date(runStartMs).toISOString(),
    signal: options.signal,
    concurrency: options.concurrency,
    ...(options.sampleRows === undefined ? {} : { sampleRows: options.sampleRows }),
  };

  const trackers = new Map<string, SchemaTracker>();
  for (const resource of options.resources) {
    trackers.set(resource.name, new SchemaTracker(resource, await deps.destination.describe(resource.name)));
  }
  const run = async (resource: ResourceDefinition, scope: ProjectScope, scopeHooks: ScopeHooks): Promise<StreamResult> => {
    hooks.onStreamStart?.(resource.name, scope.key);
    const onPage = hooks.onPage;
    const result = await syncStream(resource, scope, trackers.get(resource.name) as SchemaTracker, deps, {
      ...streamOptions,
      onProjects: scopeHooks.onProjects,
      onPage: onPage === undefined ? undefined : (page) => onPage(resource.name, scope.key, page),
    });
    hooks.onStreamDone?.(result);
    return result;
  };

  const streams = await forEachScope(options, deps, run, failedBeforeStart);
  return summarize(runStartMs, streams, deps.clock);
}

/** The result of a stream that could not start (e.g. `*` refused and no project known). */
export function failedBeforeStart(resource: ResourceDefinition, error: Error): StreamResult {
  return { resource: resource.name, scope: '*', outcome: 'failed', rows: 0, pages: 0, windows: 0, seconds: 0, stats: newCallStats(), error };
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
  return [...summary.streams.map((s) => formatStreamLine(s)), `sync ${summary.ok ? 'ok' : 'FAILED'} in ${summary.seconds.toFixed(1)} s`];
}
