import PQueue from 'p-queue';
import { ConfigError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { ProjectScope, ResourceDefinition, Row } from '../core/types.js';
import { countRecords } from '../extract/count.js';
import { bucketStart, readTimeseries, type Bucket, type Interval } from '../extract/analytics.js';
import { sliceWindows, type TimeWindow } from '../extract/windows.js';
import { newCallStats, type ApiClient, type CallContext } from '../http/client.js';
import type { Destination } from '../load/destination.js';
import { SchemaTracker } from '../normalize/normalize.js';
import { backfillStream, perWindowBatch, type BackfillHooks, type BackfillStreamResult } from '../sync/backfill.js';
import { engineRun, type RunServices } from '../sync/context.js';
import { singleProjectScope } from '../sync/scopes.js';

/**
 * `verify`: reconcile the warehouse with the API. Per window and project, the resource's count
 * endpoint (unfiltered: counts filtered by signal under-count, field notes) against the rows the
 * warehouse holds for that project with the cursor field in the window. Only resources with a
 * documented count endpoint can be verified (events); the others are reported as not verifiable.
 */

export interface VerifyOptions {
  readonly resources: readonly ResourceDefinition[];
  /** A slug, `*` (every project, counted one by one), or `undefined` (no header: `default`). */
  readonly project: string | undefined;
  readonly projectIds?: readonly string[];
  /** Projects recorded in state, for `*` without `--project-ids`. */
  readonly knownProjects: readonly string[];
  readonly fromMs: number;
  readonly toMs: number;
  readonly windowMs: number;
}

export interface VerifyDeps {
  readonly client: ApiClient;
  readonly destination: Destination;
  readonly logger: Logger;
  /** Count requests and warehouse counts in flight at once. @default 8 */
  readonly concurrency?: number;
}

/** The project a check reads: the slug in `project_id`, and the header sent (none for `default`). */
export interface VerifyProject {
  readonly slug: string;
  readonly header: string | undefined;
}

export interface VerifyWindow {
  readonly resource: string;
  readonly project: string;
  readonly header: string | undefined;
  readonly from: string;
  readonly to: string;
  readonly api: number;
  readonly warehouse: number;
  readonly match: boolean;
}

export interface VerifyReport {
  readonly windows: readonly VerifyWindow[];
  readonly notVerifiable: readonly { readonly resource: string; readonly reason: string }[];
  readonly mismatches: number;
}

/** Whether a resource can be reconciled by counts, and if not, why. */
function verifiability(resource: ResourceDefinition): string | undefined {
  if (resource.countPath === undefined) return `no count endpoint is documented for ${resource.path}: not verifiable`;
  if (resource.mode !== 'incremental' || resource.cursorField === undefined)
    return 'no time field to count windows on: not verifiable';
  if ((resource.cursorFormat ?? 'iso') !== 'iso')
    return `${resource.cursorField} is not an ISO instant: not verifiable`;
  return undefined;
}

/** The projects to check, one count each (the header is the slug). */
export function verifyProjects(
  options: Pick<VerifyOptions, 'project' | 'projectIds' | 'knownProjects'>,
): VerifyProject[] {
  if (options.project === undefined) return [{ slug: 'default', header: undefined }];
  if (options.project !== '*') return [{ slug: options.project, header: options.project }];
  const slugs = options.projectIds ?? options.knownProjects;
  if (slugs.length === 0) {
    throw new ConfigError(
      `verify --project '*' counts each project on its own and needs the list: pass --project-ids a,b (or run a sync first, which records the projects in state)`,
    );
  }
  return [...slugs].sort().map((slug) => ({ slug, header: slug }));
}

/** Count every window of every verifiable resource and project, in the API and in the warehouse. */
export async function verifyCounts(options: VerifyOptions, deps: VerifyDeps): Promise<VerifyReport> {
  const windows = sliceWindows(options.fromMs, options.toMs, options.windowMs);
  return verifyWindows(options.resources, verifyProjects(options), () => windows, deps);
}

/** Count the given windows per resource and project (also used to check again after a repair). */
export async function verifyWindows(
  resources: readonly ResourceDefinition[],
  projects: readonly VerifyProject[],
  windowsOf: (resource: string, project: string) => readonly TimeWindow[],
  deps: VerifyDeps,
): Promise<VerifyReport> {
  const counts = deps.destination.can.windows;
  if (counts === undefined) {
    throw new ConfigError(
      `verify compares API counts with warehouse counts per window, which the ${deps.destination.kind} destination cannot give: ` +
        'use a destination that counts windows (duckdb, bigquery)',
    );
  }
  const queue = new PQueue({ concurrency: deps.concurrency ?? 8 });
  const notVerifiable: { resource: string; reason: string }[] = [];
  const jobs: Promise<VerifyWindow>[] = [];
  for (const resource of resources) {
    const reason = verifiability(resource);
    if (reason !== undefined) {
      notVerifiable.push({ resource: resource.name, reason });
      continue;
    }
    const column = resource.cursorField as string;
    for (const project of projects) {
      const scope = singleProjectScope(project.header);
      const ctx: CallContext = {
        resource: resource.name,
        project: project.slug,
        lane: `verify|${resource.name}|${project.slug}`,
        stats: newCallStats(),
      };
      const windows = windowsOf(resource.name, project.slug);
      // One timeseries request for all the windows when they fall on its buckets; else one count each.
      const series = seriesCounts(deps, resource, scope, windows, ctx);
      for (const window of windows) {
        const from = new Date(window.fromMs).toISOString();
        const to = new Date(window.toMs).toISOString();
        jobs.push(
          queue.add(async (): Promise<VerifyWindow> => {
            const [api, warehouse] = await Promise.all([
              series.then((counts) => counts?.get(window) ?? countRecords(deps.client, resource, scope, window, ctx)),
              counts.countWindow(resource.name, { projectId: project.slug, column, fromIso: from, toIso: to }),
            ]);
            return {
              resource: resource.name,
              project: project.slug,
              header: project.header,
              from,
              to,
              api,
              warehouse,
              match: api === warehouse,
            };
          }),
        );
      }
    }
  }
  const results = await Promise.all(jobs);
  return { windows: results, notVerifiable, mismatches: results.filter((w) => !w.match).length };
}

/** The coarsest bucket every window starts and ends on, or undefined. */
function alignedInterval(windows: readonly TimeWindow[]): Interval | undefined {
  for (const interval of ['day', 'hour'] as const) {
    if (windows.every((w) => bucketStart(w.fromMs, interval) === w.fromMs && bucketStart(w.toMs, interval) === w.toMs))
      return interval;
  }
  return undefined;
}

/**
 * Counts of every window from one timeseries request over their whole span, when the resource has
 * the endpoint and the windows fall on its buckets; `undefined` otherwise, or when the endpoint
 * answers with an error (logged): the windows are then counted one by one.
 */
async function seriesCounts(
  deps: VerifyDeps,
  resource: ResourceDefinition,
  scope: ProjectScope,
  windows: readonly TimeWindow[],
  ctx: CallContext,
): Promise<Map<TimeWindow, number> | undefined> {
  const interval = alignedInterval(windows);
  if (resource.timeseriesPath === undefined || interval === undefined || windows.length < 2) return undefined;
  const span = { fromMs: Math.min(...windows.map((w) => w.fromMs)), toMs: Math.max(...windows.map((w) => w.toMs)) };
  let buckets: readonly Bucket[];
  try {
    buckets = (await readTimeseries(deps.client, scope, span, interval, ctx, resource.timeseriesPath)).buckets;
  } catch (error) {
    deps.logger.warn(
      { resource: resource.name, project: ctx.project, err: (error as Error).message },
      `${resource.timeseriesPath} failed; counting each window with ${resource.countPath ?? 'the count endpoint'}`,
    );
    return undefined;
  }
  const out = new Map<TimeWindow, number>();
  for (const w of windows)
    out.set(
      w,
      buckets.filter((b) => b.startMs >= w.fromMs && b.startMs < w.toMs).reduce((n, b) => n + b.count, 0),
    );
  return out;
}

export interface RepairOptions {
  readonly resources: readonly ResourceDefinition[];
  readonly concurrency: number;
  readonly batchRows: number;
  /** Text each repaired window holds before a write (`--batch-bytes`). */
  readonly batchBytes: number;
  readonly signal?: AbortSignal;
  readonly hooks?: BackfillHooks;
  /** `_run_id` of the rows a repair writes: the run's (`verify --repair`'s, or the sync's that reconciles). */
  readonly runId: string;
  /** Each batch of a (resource, project) once durable: the records its list returned. */
  readonly onStored?: (resource: string, project: string, rows: readonly Row[]) => void;
}

/**
 * Re-read the mismatched windows (the backfill's window walk, forced past the ledger), one
 * single-project walk per project, all in one pool of `concurrency` window slots.
 */
export async function repairWindows(
  mismatched: readonly VerifyWindow[],
  options: RepairOptions,
  deps: RunServices,
): Promise<BackfillStreamResult[]> {
  const slots = new PQueue({ concurrency: options.concurrency });
  // The repair is a run of the engine of its own: its rows' `_synced_at` is its start.
  const run = engineRun(deps, { signal: options.signal });
  const groups = new Map<
    string,
    { resource: ResourceDefinition; project: string; header: string | undefined; windows: TimeWindow[] }
  >();
  for (const w of mismatched) {
    const resource = options.resources.find((r) => r.name === w.resource);
    if (resource === undefined) continue;
    const id = `${w.resource}\u0000${w.project}`;
    const group = groups.get(id) ?? { resource, project: w.project, header: w.header, windows: [] };
    group.windows.push({ fromMs: Date.parse(w.from), toMs: Date.parse(w.to) });
    groups.set(id, group);
  }
  const trackers = new Map<string, SchemaTracker>();
  for (const { resource } of groups.values()) {
    if (!trackers.has(resource.name))
      trackers.set(
        resource.name,
        new SchemaTracker(resource, await deps.destination.describe(resource.name), options.runId),
      );
  }
  return Promise.all(
    [...groups.values()].map((group) =>
      backfillStream(
        {
          resource: group.resource,
          scope: singleProjectScope(group.header),
          tracker: trackers.get(group.resource.name) as SchemaTracker,
          windows: group.windows,
          slots,
          concurrency: options.concurrency,
          force: true,
          batchRows: perWindowBatch(options.batchRows, options.concurrency),
          batchBytes: options.batchBytes,
          hooks: options.hooks,
          ...(options.onStored === undefined
            ? {}
            : { onStored: (rows: readonly Row[]) => options.onStored?.(group.resource.name, group.project, rows) }),
        },
        run,
      ),
    ),
  );
}
