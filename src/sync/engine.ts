import type { Clock, ColumnDef, ProjectScope, ResourceDefinition } from '../core/types.js';
import { newCallStats } from '../http/client.js';
import { SchemaTracker } from '../normalize/normalize.js';
import { optionalWalk } from './optional.js';
import { TraceQueue } from './traces/queue.js';
import { learnTraceMode } from './traces/probe.js';
import { traceSectionName } from '../state/books/traces.js';
import type { KeepsTraceBook } from '../load/destination-capabilities.js';
import { drainTraces } from './traces/drain.js';
import { forEachScope, singleProjectScope, type ScopeHooks, type ScopeOptions } from './scopes.js';
import { syncStream } from './stream.js';
import type { StreamHooks } from './stream-reader.js';
import type { StreamResult } from './frame.js';
import type { RunServices, SyncRun } from './context.js';

/** What a sync run reads: its resources, in which project scopes (the run's settings are in its context, `SyncRun`). */
export interface SyncTargets extends ScopeOptions {
  /** Every declared resource: traces read without events (`--resources traces`) find the events' table here. @default resources */
  readonly declared?: readonly ResourceDefinition[];
  /**
   * The tables' columns as the run found them when it began (`run/envelope.ts` `startRun`), not asked
   * of the destination again (on BigQuery, a request a table); a table not in it is described.
   */
  readonly described?: ReadonlyMap<string, readonly ColumnDef[] | undefined>;
}

/**
 * How long a run keeps reading per-event traces after its events walks end: a 15-minute schedule
 * then spends most of each interval draining a backlog (400 trace reads a minute) and no run blocks
 * the next for long. What is left waits, durably, for the next run.
 */
const DEFAULT_TRACE_DRAIN_MS = 10 * 60_000;

/** Parent records whose traces are read in one chunk (one write and one state write each). */
const TRACE_CHUNK = 25;

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
  /** A per-event resource's backlog changed: `pending` parents wait for their traces (one request each). */
  readonly onBacklog?: (resource: string, pending: number) => void;
}

/**
 * One sync run: every resource × project scope concurrently, all drawing on one request budget.
 * With `*`, endpoints that accept it get one all-projects walk; the others (declared, or found out
 * by a 400 at run time) get one walk per project: the `--project-ids` list, else the projects in
 * state plus any that this run's all-projects reads discover, started as they are discovered
 * (`forEachScope`).
 */
export async function runSync(targets: SyncTargets, run: SyncRun, hooks: RunHooks = {}): Promise<RunSummary> {
  const { settings, signal } = run;
  const runStartMs = run.runStartMs;

  // Traces read per event: learn once whether the server lists them by time. The probes go out
  // while the tables are described, and no stream waits for them but the traces' own (their mode)
  // and the events' first stored batch (whether to queue their traces): the other
  // streams' first requests leave at once, not one round trip later.
  const selection = settings.traces ?? 'all';
  let resources = targets.resources;
  const perEvent = targets.resources.filter((r) => r.perParent !== undefined);
  /** Each per-event resource's queue (counting its events from the start), and whether the probe says to use it. */
  const traceQueues = new Map<string, { readonly queue: TraceQueue; readonly byParent: Promise<boolean> }>();
  if (selection === 'none') {
    resources = resources.filter((r) => !perEvent.includes(r));
  } else {
    for (const traces of perEvent) {
      const events = targets.resources.find((r) => r.name === traces.perParent?.parent);
      // The events' table, even when this run does not read events: the owed events are in it.
      const eventTable = events ?? targets.declared?.find((r) => r.name === traces.perParent?.parent);
      const byParent = learnTraceMode(traces, probeScope(targets, run.state.document.projects), run, signal).then(
        (b) => b === true,
      );
      byParent.catch(() => undefined);
      const onBacklog =
        hooks.onBacklog === undefined ? undefined : (pending: number): void => hooks.onBacklog?.(traces.name, pending);
      // Where the warehouse keeps the trace book, the owed events are derived from its tables
      // (every event whose traces were never read, read empty while young, or failed), whoever
      // wrote the events; the state section's queue is then only a leftover of an older version.
      const book = eventTable === undefined ? undefined : bookOf(run);
      if (book !== undefined && run.state.document.sections[traceSectionName(traces)] !== undefined)
        await run.state.updateSection(traceSectionName(traces), () => undefined);
      const queue = new TraceQueue(
        {
          traces,
          events: book === undefined ? events : eventTable,
          selection,
          lookbackMs: settings.lookbackMs,
          settleMs: settings.settleMs,
          ...(onBacklog === undefined ? {} : { onBacklog }),
          ...(book === undefined ? {} : { book }),
          ...(settings.startMs === undefined ? {} : { startMs: settings.startMs }),
        },
        run.state,
        run.clock,
      );
      traceQueues.set(traces.name, { queue, byParent });
    }
  }
  const described = new Map<string, Awaited<ReturnType<RunServices['destination']['describe']>>>();
  for (const resource of resources)
    described.set(
      resource.name,
      targets.described?.has(resource.name) === true
        ? targets.described.get(resource.name)
        : await run.destination.describe(resource.name),
    );
  const queuesOfParent = (
    parent: ResourceDefinition,
  ): { readonly queue: TraceQueue; readonly byParent: Promise<boolean> }[] =>
    [...traceQueues.entries()]
      .filter(([name]) => resources.find((r) => r.name === name)?.perParent?.parent === parent.name)
      .map(([, q]) => q);

  const trackers = new Map<string, SchemaTracker>();
  for (const resource of resources) {
    trackers.set(
      resource.name,
      new SchemaTracker(
        resource,
        described.get(resource.name) ?? (await run.destination.describe(resource.name)),
        run.runId,
      ),
    );
  }
  const walkScope = async (
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
    const queued = traceQueues.get(resource.name);
    let queue: TraceQueue | undefined;
    try {
      queue = queued !== undefined && (await queued.byParent) ? queued.queue : undefined;
    } catch (error) {
      // The probe could not record what it learned (a state write): this stream fails, alone.
      const err = error instanceof Error ? error : new Error(String(error));
      run.logger.error({ resource: resource.name, project: scope.key }, err.message);
      result = { ...failedBeforeStart(resource, err), scope: scope.key };
      hooks.onStreamDone?.(result);
      return result;
    }
    if (queue !== undefined) {
      result = await drainTraces(resource, scope, run, {
        queue,
        tracker,
        drainAfterParentsMs: settings.traceDrainMs ?? DEFAULT_TRACE_DRAIN_MS,
        chunk: TRACE_CHUNK,
        concurrency: settings.concurrency,
        onPage: pageHook,
      });
    } else {
      // Events enqueue their traces' work units with each stored batch (synchronously counted
      // as running before the first await, so no drain ends before its events walks start), once
      // the traces' probe said they are read per event.
      const queues = queuesOfParent(resource);
      for (const q of queues) q.queue.parentStarted();
      const enqueue: NonNullable<StreamHooks['onStored']> = async (rows, state) => {
        await Promise.all(
          queues.map(async (q) => ((await q.byParent.catch(() => false)) ? q.queue.enqueue(rows, state) : undefined)),
        );
      };
      try {
        const walk = (): Promise<StreamResult> =>
          syncStream(resource, scope, tracker, run, {
            onProjects: scopeHooks.onProjects,
            onPage: pageHook,
            onStored: queues.length === 0 ? undefined : enqueue,
          });
        // A resource not every server has is skipped where the server lacks it, not failed.
        result =
          resource.optional === true
            ? await optionalWalk(resource, scope, run.capabilities, run.client, signal, walk)
            : await walk();
      } finally {
        for (const q of queues) q.queue.parentDone();
      }
    }
    hooks.onStreamDone?.(result);
    return result;
  };

  const streams = await forEachScope({ ...targets, resources }, run, walkScope, failedBeforeStart);
  return summarize(runStartMs, streams, run.clock);
}

/** The warehouse's trace book, where it keeps one and the state commits with the rows there. */
export function bookOf(deps: Pick<RunServices, 'destination' | 'state'>): KeepsTraceBook | undefined {
  return deps.state.inWarehouse ? deps.destination.can.traceBook : undefined;
}

/** The scope the one-time probe of a per-event resource is read in (one project: traces refuse `*`). */
export function probeScope(
  options: Pick<ScopeOptions, 'project' | 'projectIds'>,
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
