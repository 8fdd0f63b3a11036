import { ConfigError } from '../core/errors.js';
import type { ResourceDefinition } from '../core/types.js';
import { streamKey, type StateDocument } from '../state/store.js';
import { reconcileRange, reconcileRequests } from '../reconcile/differences.js';
import type { ReconcileMode } from '../core/reconcile-mode.js';
import { notReconcilable, touchedFrom } from '../reconcile/step.js';
import { allProjectsScope } from '../sync/scopes.js';
import { verifyProjects } from '../reconcile/verify.js';

/**
 * What the next sync's reconcile step costs (`plan`): per resource and project, the requests it
 * sends when the API and the warehouse agree (one hourly timeseries for the recent two days, one
 * count for anything older the run reads). A difference adds warehouse counts and, for an older
 * range, up to `MAX_NARROWING_COUNTS` counts, then the re-read of the hours that differ.
 */
export interface ReconcilePlan {
  readonly mode: ReconcileMode;
  readonly requestsPerRun: number;
  /** The same requests per endpoint (added to the plan's own). */
  readonly requestsByEndpoint: Readonly<Record<string, number>>;
  readonly scopes: readonly {
    readonly resource: string;
    readonly project: string;
    readonly requests: number;
    readonly from?: string;
    readonly to?: string;
  }[];
  readonly notChecked: readonly string[];
}

export function planReconcile(
  options: {
    readonly mode: ReconcileMode;
    readonly resources: readonly ResourceDefinition[];
    readonly project: string | undefined;
    readonly projectIds?: readonly string[];
    readonly lookbackMs: number;
    readonly startMs?: number;
  },
  /** The state as a plan reads it: the projects known and each stream's marks. */
  state: Pick<StateDocument, 'projects' | 'streams'>,
  runStartMs: number,
): ReconcilePlan {
  if (options.mode === 'off')
    return { mode: 'off', requestsPerRun: 0, requestsByEndpoint: {}, scopes: [], notChecked: [] };
  const byEndpoint: Record<string, number> = {};
  const add = (endpoint: string | undefined): void => {
    if (endpoint !== undefined) byEndpoint[endpoint] = (byEndpoint[endpoint] ?? 0) + 1;
  };
  let projects: ReturnType<typeof verifyProjects>;
  try {
    projects = verifyProjects({
      project: options.project,
      projectIds: options.projectIds,
      knownProjects: state.projects,
    });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    projects = [];
  }
  const allKey = allProjectsScope(options.projectIds).key;
  const scopes: ReconcilePlan['scopes'][number][] = [];
  const notChecked: string[] = [];
  for (const resource of options.resources) {
    if (notReconcilable(resource) !== undefined) {
      notChecked.push(resource.name);
      continue;
    }
    for (const project of projects) {
      const key = [streamKey(resource.name, project.slug), streamKey(resource.name, allKey)].find(
        (k) => state.streams[k] !== undefined,
      );
      // The sync about to run ends its window at its start: the mark it leaves.
      const range = reconcileRange({
        runStartMs,
        markMs: runStartMs,
        lookbackMs: options.lookbackMs,
        startMs: options.startMs,
        touchedFromMs: touchedFrom(key === undefined ? undefined : state.streams[key], options),
      });
      if (range?.recent !== undefined)
        add(resource.split?.exact === true ? resource.split.timeseriesPath : resource.countPath);
      if (range?.older !== undefined) add(resource.countPath);
      const from = range?.older?.fromMs ?? range?.recent?.fromMs;
      const to = range?.recent?.toMs;
      scopes.push({
        resource: resource.name,
        project: project.slug,
        requests: reconcileRequests(range),
        ...(from === undefined || to === undefined
          ? {}
          : { from: new Date(from).toISOString(), to: new Date(to).toISOString() }),
      });
    }
  }
  return {
    mode: options.mode,
    requestsPerRun: scopes.reduce((n, s) => n + s.requests, 0),
    requestsByEndpoint: byEndpoint,
    scopes,
    notChecked,
  };
}
