import { randomUUID } from 'node:crypto';
import type { Logger } from '../core/log.js';
import type { Clock, ProjectScope, ResourceDefinition } from '../core/types.js';
import { newCallStats, type ApiClient } from '../http/client.js';
import { RequestMemo } from '../extract/memo.js';
import type { Destination } from '../load/destination.js';
import { SchemaTracker } from '../normalize/normalize.js';
import type { StateStore } from '../state/store.js';
import { Capabilities } from './capabilities.js';
import { optionalWalk } from './optional.js';
import { ChildQueue } from './traces/queue.js';
import { learnChildMode } from './traces/probe.js';
import { childSectionName } from '../state/books/traces.js';
import type { ChildSelection } from '../core/types.js';
import type { KeepsChildBook } from '../load/destination-capabilities.js';
import { drainChildren } from './traces/drain.js';
import { forEachScope, singleProjectScope, type ScopeHooks } from './scopes.js';
import { syncStream } from './stream.js';
import type { StreamOptions } from './stream-options.js';
import type { StreamResult } from './frame.js';
import type { SplitLimits } from './split/plan.js';

export interface SyncPlanOptions {
  readonly resources: readonly ResourceDefinition[];
  /** Every declared resource: a child read without its parent (`--resources traces`) finds the parent's table here. @default resources */
  readonly declared?: readonly ResourceDefinition[];
  /** A slug, `*` for all projects, or `undefined` (no header: the service reads `default`). */
  readonly project: string | undefined;
  /** Narrows `*`; also the project list for endpoints that reject `*`. */
  readonly projectIds?: readonly string[];
  readonly lookbackMs: number;
  readonly startMs?: number;
  /** Rows buffered per stream before one write + checkpoint (`--batch-rows`). */
  readonly batchRows: number;
  /** Text buffered before a write (`--batch-bytes`, in bytes). */
  readonly batchBytes: number;
  /** Most sub-windows of one large window walked at once (split walks, `--concurrency`). */
  readonly concurrency: number;
  /** Stop each stream once it has written this many rows (a dry run's sample). @default all */
  readonly sampleRows?: number;
  readonly signal?: AbortSignal;
  /** Re-read windows of resources that settle once they are this old (`--settle`); 0 turns it off. */
  readonly settleMs: number;
  /** Which parents get their per-parent children read (traces per event). @default 'all' */
  readonly children?: ChildSelection;
  /** After the parent walks end, children drain this long at most. @default DEFAULT_CHILD_DRAIN_MS */
  readonly childDrainMs?: number;
  /** `_run_id` of every row written (the run's id in `_query_sync_runs`). @default a new UUID */
  readonly runId?: string;
  /** The configured rate limits (`--max-rps`, `--max-rpm`): splits are sized by them. */
  readonly limits: SplitLimits;
}

/**
 * How long a run keeps reading per-parent children after its parent walks end: a 15-minute schedule
 * then spends most of each interval draining a backlog (400 trace reads a minute) and no run blocks
 * the next for long. What is left waits, durably, for the next run.
 */
const DEFAULT_CHILD_DRAIN_MS = 10 * 60_000;

/** Parent records whose children are read in one chunk (one write and one state write each). */
const CHILD_CHUNK = 25;

export interface SyncDeps {
  readonly client: ApiClient;
  readonly destination: Destination;
  readonly state: StateStore;
  readonly clock: Clock;
  readonly logger: Logger;
  /** What this server offers (`capabilities.ts`); one over `state` for the run when absent. */
  readonly capabilities?: Capabilities;
}

export interface RunSummary {
  readonly startedAt: string;
  readonly seconds: number;
  readonly streams: readonly StreamResult[];
  readonly ok: boolean;
}

/** Progress callbacks of a run (the live display and the progress log lines). */
export interface RunHooks {
  /** A walk of one (resource, scope) starts. */
  readonly onStreamStart?: (resource: string, scope: string) => void;
  /** It ended, whatever the outcome (`scope-rejected`: replaced by per-project walks). */
  readonly onStreamDone?: (result: StreamResult) => void;
  /** After each page of a walk. */
  readonly onPage?: (
    resource: string,
    scope: string,
    page: { readonly records: number; readonly rowsStored: number },
  ) => void;
  /** A per-parent child resource's backlog changed: `pending` parents wait for their children (one request each). */
  readonly onBacklog?: (resource: string, pending: number) => void;
}

/**
 * One sync run: every resource × project scope concurrently, all drawing on one request budget.
 * With `*`, endpoints that accept it get one all-projects walk; the others (declared, or found out
 * by a 400 at run time) get one walk per project: the `--project-ids` list, else the projects in
 * state plus any that this run's all-projects reads discover, started as they are discovered
 * (`forEachScope`).
 */
export async function runSync(options: SyncPlanOptions, given: SyncDeps, hooks: RunHooks = {}): Promise<RunSummary> {
  // One capabilities book for the run: what one stream learns, the others use (and it is logged once).
  const caps = given.capabilities ?? new Capabilities(given);
  // Identical aggregate requests (split planning's timeseries for events, users, conversations) go out
  // once: one memo for this run, in its streams' deps.
  const deps: SyncDeps & { readonly aggregates: RequestMemo } = {
    ...given,
    capabilities: caps,
    aggregates: new RequestMemo(given.client),
  };
  const runStartMs = deps.clock.now();
  const streamOptions: StreamOptions = {
    runStartMs,
    lookbackMs: options.lookbackMs,
    startMs: options.startMs,
    batchRows: Math.min(options.batchRows, options.sampleRows ?? Infinity),
    batchBytes: options.batchBytes,
    syncedAt: new Date(runStartMs).toISOString(),
    signal: options.signal,
    settleMs: options.settleMs,
    concurrency: options.concurrency,
    limits: options.limits,
    ...(options.sampleRows === undefined ? {} : { sampleRows: options.sampleRows }),
  };

  // Per-parent children (traces per event): learn once whether the server lists them by time. The
  // probes go out while the tables are described, and no stream waits for them but the child's own
  // (its mode) and the parent's first stored batch (whether to queue its children): the other
  // streams' first requests leave at once, not one round trip later.
  const selection = options.children ?? 'all';
  let resources = options.resources;
  const children = options.resources.filter((r) => r.perParent !== undefined);
  /** Each child's queue (counting its parents from the start), and whether the probe says to use it. */
  const childQueues = new Map<string, { readonly queue: ChildQueue; readonly byParent: Promise<boolean> }>();
  if (selection === 'none') {
    resources = resources.filter((r) => !children.includes(r));
  } else {
    for (const child of children) {
      const parent = options.resources.find((r) => r.name === child.perParent?.parent);
      // The parent's table, even when this run does not read the parent: the owed parents are in it.
      const parentTable = parent ?? options.declared?.find((r) => r.name === child.perParent?.parent);
      const byParent = learnChildMode(
        child,
        probeScope(options, deps.state.document.projects),
        deps,
        options.signal,
      ).then((b) => b === true);
      byParent.catch(() => undefined);
      const onBacklog =
        hooks.onBacklog === undefined ? undefined : (pending: number): void => hooks.onBacklog?.(child.name, pending);
      // Where the warehouse keeps the children book, the owed parents are derived from its tables
      // (every parent whose children were never read, read empty while young, or failed), whoever
      // wrote the parents; the state section's queue is then only a leftover of an older version.
      const book = parentTable === undefined ? undefined : bookOf(deps);
      if (book !== undefined && deps.state.document.sections[childSectionName(child)] !== undefined)
        await deps.state.updateSection(childSectionName(child), () => undefined);
      const queue = new ChildQueue(
        {
          child,
          parent: book === undefined ? parent : parentTable,
          selection,
          lookbackMs: options.lookbackMs,
          settleMs: streamOptions.settleMs ?? 0,
          ...(onBacklog === undefined ? {} : { onBacklog }),
          ...(book === undefined ? {} : { book }),
          ...(options.startMs === undefined ? {} : { startMs: options.startMs }),
        },
        deps.state,
        deps.clock,
      );
      childQueues.set(child.name, { queue, byParent });
    }
  }
  const described = new Map<string, Awaited<ReturnType<Destination['describe']>>>();
  for (const resource of resources) described.set(resource.name, await deps.destination.describe(resource.name));
  const queuesOfParent = (
    parent: ResourceDefinition,
  ): { readonly queue: ChildQueue; readonly byParent: Promise<boolean> }[] =>
    [...childQueues.entries()]
      .filter(([name]) => resources.find((r) => r.name === name)?.perParent?.parent === parent.name)
      .map(([, q]) => q);

  const trackers = new Map<string, SchemaTracker>();
  const runId = options.runId ?? randomUUID();
  for (const resource of resources) {
    trackers.set(
      resource.name,
      new SchemaTracker(
        resource,
        described.get(resource.name) ?? (await deps.destination.describe(resource.name)),
        runId,
      ),
    );
  }
  const run = async (
    resource: ResourceDefinition,
    scope: ProjectScope,
    scopeHooks: ScopeHooks,
  ): Promise<StreamResult> => {
    hooks.onStreamStart?.(resource.name, scope.key);
    const onPage = hooks.onPage;
    const pageHook =
      onPage === undefined
        ? undefined
        : (page: { readonly records: number; readonly rowsStored: number }): void =>
            onPage(resource.name, scope.key, page);
    const tracker = trackers.get(resource.name) as SchemaTracker;
    let result: StreamResult;
    const child = childQueues.get(resource.name);
    let queue: ChildQueue | undefined;
    try {
      queue = child !== undefined && (await child.byParent) ? child.queue : undefined;
    } catch (error) {
      // The probe could not record what it learned (a state write): this child fails, alone.
      const err = error instanceof Error ? error : new Error(String(error));
      deps.logger.error({ resource: resource.name, project: scope.key }, err.message);
      result = { ...failedBeforeStart(resource, err), scope: scope.key };
      hooks.onStreamDone?.(result);
      return result;
    }
    if (queue !== undefined) {
      result = await drainChildren(resource, scope, deps, {
        queue,
        tracker,
        syncedAt: streamOptions.syncedAt,
        drainAfterParentsMs: options.childDrainMs ?? DEFAULT_CHILD_DRAIN_MS,
        chunk: CHILD_CHUNK,
        ...(options.concurrency === undefined ? {} : { concurrency: options.concurrency }),
        signal: options.signal,
        onPage: pageHook,
      });
    } else {
      // Parents enqueue their children's work units with each stored batch (synchronously counted
      // as running before the first await, so no drain ends before its parents start), once the
      // child's probe said it is read per parent.
      const queues = queuesOfParent(resource);
      for (const q of queues) q.queue.parentStarted();
      const enqueue: NonNullable<StreamOptions['onStored']> = async (rows, state) => {
        await Promise.all(
          queues.map(async (q) => ((await q.byParent.catch(() => false)) ? q.queue.enqueue(rows, state) : undefined)),
        );
      };
      try {
        const walk = (): Promise<StreamResult> =>
          syncStream(resource, scope, tracker, deps, {
            ...streamOptions,
            onProjects: scopeHooks.onProjects,
            onPage: pageHook,
            onStored: queues.length === 0 ? undefined : enqueue,
          });
        // A resource not every server has is skipped where the server lacks it, not failed.
        result =
          resource.optional === true
            ? await optionalWalk(resource, scope, caps, deps.client, options.signal, walk)
            : await walk();
      } finally {
        for (const q of queues) q.queue.parentDone();
      }
    }
    hooks.onStreamDone?.(result);
    return result;
  };

  const streams = await forEachScope({ ...options, resources }, deps, run, failedBeforeStart);
  return summarize(runStartMs, streams, deps.clock);
}

/** The warehouse's children book, where it keeps one and the state commits with the rows there. */
export function bookOf(deps: Pick<SyncDeps, 'destination' | 'state'>): KeepsChildBook | undefined {
  return deps.state.inWarehouse ? deps.destination.can.childBook : undefined;
}

/** The scope the one-time probe of a child resource is read in (one project: children refuse `*`). */
export function probeScope(
  options: Pick<SyncPlanOptions, 'project' | 'projectIds'>,
  knownProjects: readonly string[],
): ProjectScope {
  if (options.project !== '*') return singleProjectScope(options.project);
  return singleProjectScope(options.projectIds?.[0] ?? knownProjects[0]);
}

/** The result of a stream that could not start (e.g. `*` refused and no project known). */
export function failedBeforeStart(resource: ResourceDefinition, error: Error): StreamResult {
  return {
    resource: resource.name,
    scope: '*',
    outcome: 'failed',
    rows: 0,
    pages: 0,
    windows: 0,
    seconds: 0,
    stats: newCallStats(),
    error,
  };
}

function summarize(runStartMs: number, streams: StreamResult[], clock: Clock): RunSummary {
  return {
    startedAt: new Date(runStartMs).toISOString(),
    seconds: (clock.now() - runStartMs) / 1000,
    streams,
    ok: streams.every((s) => s.outcome === 'ok'),
  };
}
