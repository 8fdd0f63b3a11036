import PQueue from 'p-queue';
import { AuthError } from '../core/errors.js';
import type { ProjectScope, ResourceDefinition } from '../core/types.js';
import { countRecords } from '../extract/count.js';
import { sliceWindows, type TimeWindow } from '../extract/windows.js';
import type { RateLimits } from '../http/scheduler/budget.js';
import { newCallStats, type CallContext } from '../http/client.js';
import { minimumSeconds } from '../http/scheduler/floor.js';
import { readLedger, streamLedger, type BackfillLedger } from '../state/books/ledger.js';
import { streamKey, type StateDocument } from '../state/store.js';
import type { ProgressPlan, ResourcePlan } from './progress.js';
import { initialScopes, type ScopeOptions } from '../sync/scopes.js';
import type { RunServices, SyncSettings } from '../sync/context.js';
import { traceBacklog } from '../sync/traces/queue.js';
import { readsByParent } from '../sync/traces/probe.js';
import { traceLoad, deficitLine, tracedSavingLine, type TraceLoad } from '../sync/traces/load.js';
import { analystMarksOf, planAnalysts, type AnalystMarks, type AnalystPlanInput } from './plan-analysts.js';
import { planReconcile, type ReconcilePlan } from './plan-reconcile.js';
import type { ReconcileMode } from '../core/reconcile-mode.js';
import { ledgerUnits } from '../state/books/ledger.js';
import {
  nextSyncUnits,
  resumedSettleUnit,
  settleWindow,
  withUnitCheckpoint,
  type SyncUnit,
} from '../state/books/sync.js';

/**
 * `plan`: what a backfill or the next sync will cost, before any data is read. Per window it asks
 * the resource's count endpoint (only count requests, through the same scheduler) and turns rows
 * into pages (one request each; an empty window still costs one) and the pages into the least time
 * the rate limits allow (`minimumSeconds`). Resources without a count endpoint are reported as
 * unknown, never guessed.
 */

/** `settle`: the re-read of a window that has settled (late enrichment), once per window. */
type PlanWindowStatus = 'todo' | 'resume' | 'done' | 'settle';

interface PlanWindow {
  readonly from: string;
  readonly to: string;
  readonly status: PlanWindowStatus;
  /** Records in the window (from the count endpoint), when known. */
  readonly rows?: number;
  /** Requests still needed for the window (0 when done). */
  readonly pages?: number;
  /**
   * A resumed window whose rows stored before the interruption are unknown (a sync checkpoint keeps
   * a cursor, not a count): `rows` counts the whole window, an upper bound of what is left.
   */
  readonly rowsUpperBound?: boolean;
}

interface PlanRow {
  readonly resource: string;
  readonly scope: string;
  /** The list endpoint the walk will use (the budget it draws on). */
  readonly endpoint: string;
  readonly windows: readonly PlanWindow[];
  readonly rows?: number;
  readonly pages?: number;
  readonly requests?: number;
  readonly minimumSeconds?: number;
  /** Why the estimate is unknown. */
  readonly unknown?: string;
}

export interface Plan {
  readonly kind: 'backfill' | 'sync';
  readonly from?: string;
  readonly to?: string;
  readonly windowMs?: number;
  readonly limits: RateLimits;
  readonly rows: readonly PlanRow[];
  /** Requests of the rows whose estimate is known, per endpoint. */
  readonly requestsByEndpoint: Readonly<Record<string, number>>;
  /** Least time the limits allow for all known requests, in seconds. */
  readonly minimumSeconds: number;
  /** Count requests this plan made. */
  readonly countRequests: number;
  readonly notes: readonly string[];
  /** The next sync's reconcile step (`sync`, when asked). */
  readonly reconcile?: ReconcilePlan;
}

/**
 * What a plan reads of the state, and nothing more (a plan takes no lease and writes nothing: it
 * reads the file or table as it is): `planStateOf` reads it from a state document.
 */
export interface PlanState {
  /** The projects known so far. */
  readonly projects: readonly string[];
  /** Each stream's marks and checkpoints, by `streamKey`. */
  readonly streams: StateDocument['streams'];
  /** The backfill ledger: the windows done, and those under way with their checkpoints (a backfill's plan reads it). */
  ledger(): BackfillLedger;
  /** The saved searches' and aggregates' marks. */
  readonly analysts: AnalystMarks;
  /** Whether the server reads `resource` one event at a time, as its probe learned (`undefined`: not yet learned). */
  readsByEvent(resource: ResourceDefinition): boolean | undefined;
  /** Events pending per project in the state's trace queue (where the warehouse's book says nothing). */
  queuedTraces(resource: ResourceDefinition): Readonly<Record<string, number>>;
  /** The daily load of a per-event resource against its endpoint's limit (`undefined`: nothing counted). */
  traceLoad(resource: ResourceDefinition, limits: RateLimits, nowMs: number): TraceLoad | undefined;
}

/** What a plan reads of `doc` (`PlanState`). */
export function planStateOf(doc: StateDocument): PlanState {
  return {
    projects: doc.projects,
    streams: doc.streams,
    ledger: () => readLedger(doc),
    analysts: analystMarksOf(doc),
    readsByEvent: (resource) => readsByParent(doc, resource),
    queuedTraces: (resource) => traceBacklog(doc, resource).pending,
    traceLoad: (resource, limits, nowMs) => traceLoad(doc, resource, limits, nowMs),
  };
}

/**
 * What a plan reads with: the run's client, clock and logger (`RunServices`), what it reads of the
 * state (`PlanState`), the configured limits.
 */
export interface PlanDeps extends Pick<RunServices, 'client' | 'clock' | 'logger'> {
  /** The state as read (no lock taken): marks, checkpoints, ledger, known projects, the per-event backlog. */
  readonly state: PlanState;
  readonly limits: RateLimits;
  /** Count requests in flight at once (the scheduler paces them). @default 8 */
  readonly concurrency?: number;
  /** Per resource read one event at a time: events owed their traces per project (the warehouse's book). @default the state queue's pending */
  readonly owed?: Readonly<Record<string, Readonly<Record<string, number>>>>;
}

export interface BackfillPlanOptions extends ScopeOptions {
  readonly fromMs: number;
  readonly toMs: number;
  readonly windowMs: number;
}

/** The next sync's scope and its settings as the sync reads them (`SyncSettings`: lookback, start, settle). */
export interface SyncPlanInput
  extends ScopeOptions,
    Pick<SyncSettings, 'lookbackMs' | 'startMs' | 'settleMs'>,
    Pick<AnalystPlanInput, 'searches' | 'aggregates' | 'aggregatesInterval'> {
  /** As `sync --reconcile`: its requests are planned too. @default not planned */
  readonly reconcile?: ReconcileMode;
}

interface Target {
  readonly resource: ResourceDefinition;
  readonly scope: ProjectScope;
  readonly windows: readonly {
    readonly window: TimeWindow;
    readonly status: PlanWindowStatus;
    readonly pagesDone: number;
    /** Rows a resumed window stored before (`undefined`: unknown). */
    readonly rowsDone?: number;
  }[];
}

/** Plan a backfill of [from, to): the windows the ledger has done are skipped, as the backfill will. */
export async function planBackfill(options: BackfillPlanOptions, deps: PlanDeps): Promise<Plan> {
  const windows = sliceWindows(options.fromMs, options.toMs, options.windowMs);
  const ledger = deps.state.ledger();
  return build(
    'backfill',
    options,
    deps,
    (resource, scope) =>
      // The backfill's own units, as the ledger has them.
      ledgerUnits(streamLedger(ledger, streamKey(resource.name, scope.key)), windows, false).map(
        ({ window, done, resumed }) => {
          const w = window as TimeWindow;
          if (done === true) return { window: w, status: 'done' as const, pagesDone: 0 };
          return resumed?.cursor === undefined
            ? { window: w, status: 'todo' as const, pagesDone: 0 }
            : { window: w, status: 'resume' as const, pagesDone: resumed.pages, rowsDone: resumed.rows };
        },
      ),
    { from: iso(options.fromMs), to: iso(options.toMs), windowMs: options.windowMs },
  );
}

/**
 * Plan the next sync from state: the units the sync will read, from the same producer functions
 * (a split or pending window resumed, the next window, the settle re-reads), each unit's book
 * applied as if it were done to find the next.
 */
export async function planSync(options: SyncPlanInput, deps: PlanDeps): Promise<Plan> {
  const runStartMs = deps.clock.now();
  const windowOptions = { runStartMs, lookbackMs: options.lookbackMs, startMs: options.startMs };
  const reconcile =
    options.reconcile === undefined
      ? undefined
      : planReconcile({ ...options, mode: options.reconcile }, deps.state, runStartMs);
  const plan = await build(
    'sync',
    options,
    deps,
    (resource, scope) => {
      const out: { window: TimeWindow; status: PlanWindowStatus; pagesDone: number }[] = [];
      const before = deps.state.streams[streamKey(resource.name, scope.key)] ?? {};
      let st = before;
      let readFromMs: number | undefined;
      // The sync's own order (`nextSyncUnits`), each unit applied as done: a split under way (its
      // parts at once), then a window left mid-way (pending) and the next one: at most two windows.
      let windows = 0;
      for (
        let next = nextSyncUnits(st, windowOptions);
        next !== undefined && windows < 2;
        next = nextSyncUnits(st, windowOptions)
      ) {
        const units = next.kind === 'split' ? next.parts : [next.unit];
        for (const unit of units)
          out.push({ window: unit.window, status: unit.cursor === undefined ? 'todo' : 'resume', pagesDone: 0 });
        if (next.kind === 'split') readFromMs = (units[0] as SyncUnit & { kind: 'part' }).split.fromMs;
        else {
          windows += 1;
          readFromMs = Math.min(readFromMs ?? next.unit.window.fromMs, next.unit.window.fromMs);
        }
        st = units.reduce((s, unit) => withUnitCheckpoint(s, unit, null), st);
      }
      const settleMs = options.settleMs;
      if (resource.settles === true && settleMs > 0) {
        let settling = before;
        const resumed = resumedSettleUnit(settling);
        if (resumed !== undefined) {
          out.push({ window: resumed.window, status: 'settle', pagesDone: 0 });
          settling = withUnitCheckpoint(settling, resumed, null);
        }
        const next = settleWindow(settling, { ...windowOptions, settleMs }, before.mark, readFromMs);
        if (next.window !== undefined) out.push({ window: next.window, status: 'settle', pagesDone: 0 });
      }
      return out;
    },
    {},
    planAnalysts(options, deps.state, runStartMs, deps.limits),
  );
  if (reconcile === undefined) return plan;
  // The reconcile step's requests are the run's too: counted with the others, per endpoint.
  const requestsByEndpoint: Record<string, number> = { ...plan.requestsByEndpoint };
  for (const [endpoint, n] of Object.entries(reconcile.requestsByEndpoint))
    requestsByEndpoint[endpoint] = (requestsByEndpoint[endpoint] ?? 0) + n;
  return { ...plan, requestsByEndpoint, reconcile };
}

async function build(
  kind: Plan['kind'],
  options: ScopeOptions,
  deps: PlanDeps,
  windowsOf: (resource: ResourceDefinition, scope: ProjectScope) => Target['windows'],
  range: { from?: string; to?: string; windowMs?: number },
  /** Rows known without counting that follow the resources' (saved searches, aggregates). */
  extraRows: readonly PlanRow[] = [],
): Promise<Plan> {
  const { targets, unknownRows, notes } = planTargets(options, deps, windowsOf);
  const queue = new PQueue({ concurrency: deps.concurrency ?? 8 });
  const counted = await Promise.all(targets.map((target) => countTarget(target, deps, queue)));
  const countRequests = counted.reduce((n, c) => n + c.countRequests, 0);

  const order = new Map(options.resources.map((r, i) => [r.name, i]));
  const all = [
    ...[...counted.map((c) => c.row), ...unknownRows].sort(
      (a, b) => (order.get(a.resource) ?? 0) - (order.get(b.resource) ?? 0) || a.scope.localeCompare(b.scope),
    ),
    ...extraRows,
  ];
  const requestsByEndpoint: Record<string, number> = {};
  for (const row of all)
    if (row.requests !== undefined)
      requestsByEndpoint[row.endpoint] = (requestsByEndpoint[row.endpoint] ?? 0) + row.requests;
  if (all.some((r) => r.windows.some((w) => w.status === 'resume'))) {
    notes.push(
      'windows marked "resume" continue from a checkpoint; their pages are the count minus the pages already read',
    );
  }
  if (options.project === '*' && options.projectIds === undefined) {
    notes.push('with "*", resources read one project at a time also get walks for projects discovered during the run');
  }
  return {
    kind,
    ...range,
    limits: deps.limits,
    rows: all,
    requestsByEndpoint,
    minimumSeconds: minimumSeconds(requestsByEndpoint, deps.limits),
    countRequests,
    notes,
  };
}

/**
 * What the plan covers: a target (resource, scope, its units) per stream to count, and the rows
 * known without counting: a resource with no project yet, and per-event traces (their backlog).
 */
function planTargets(
  options: ScopeOptions,
  deps: PlanDeps,
  windowsOf: (resource: ResourceDefinition, scope: ProjectScope) => Target['windows'],
): { targets: Target[]; unknownRows: PlanRow[]; notes: string[] } {
  const notes: string[] = [];
  const targets: Target[] = [];
  const unknownRows: PlanRow[] = [];
  for (const resource of options.resources) {
    const scopes = initialScopes(resource, options, deps.state.projects);
    if (scopes === undefined) {
      unknownRows.push({
        resource: resource.name,
        scope: '*',
        endpoint: resource.path,
        windows: [],
        unknown: `${resource.path} is read one project at a time and no project is known yet (pass --project-ids, or run a sync first)`,
      });
      continue;
    }
    const byParent = resource.perParent !== undefined && deps.state.readsByEvent(resource) === true;
    if (!byParent) {
      for (const scope of scopes)
        targets.push({ resource, scope, windows: resource.mode === 'full' ? [] : windowsOf(resource, scope) });
      continue;
    }
    // Per-event traces: one request per owed parent record (the warehouse's book, else the state queue).
    const fromBook = deps.owed?.[resource.name];
    const pending = fromBook ?? deps.state.queuedTraces(resource);
    for (const scope of scopes) {
      const requests = pending[scope.fallbackProjectId ?? scope.key] ?? 0;
      unknownRows.push({
        resource: resource.name,
        scope: scope.key,
        endpoint: resource.path,
        windows: [],
        rows: undefined,
        pages: requests,
        requests,
        minimumSeconds: minimumSeconds({ [resource.path]: requests }, deps.limits),
      });
    }
    notes.push(
      `${resource.name} are read one ${resource.perParent?.parent ?? 'parent'} record at a time on this server: the requests shown are ` +
        (fromBook === undefined
          ? 'the backlog in state; '
          : `the ${Object.values(fromBook)
              .reduce((a, b) => a + b, 0)
              .toLocaleString(
                'en-US',
              )} ${resource.perParent?.parent ?? 'parent'} records of the warehouse that owe their ${resource.name}, drained in at least ${Math.ceil(Object.values(fromBook).reduce((a, b) => a + b, 0) / deps.limits.maxRpm)} min at ${deps.limits.maxRpm}/min; `) +
        `the sync adds one per new record it selects (--traces)`,
    );
    const load = deps.state.traceLoad(resource, deps.limits, deps.clock.now());
    for (const line of [tracedSavingLine(resource, load), deficitLine(resource, load, deps.limits)])
      if (line !== undefined) notes.push(line);
  }
  return { targets, unknownRows, notes };
}

/** One stream's row of the plan: each unit counted (at most `queue`'s concurrency at once), its pages and floor. */
async function countTarget(
  target: Target,
  deps: PlanDeps,
  queue: PQueue,
): Promise<{ row: PlanRow; countRequests: number }> {
  const { resource, scope } = target;
  const base = { resource: resource.name, scope: scope.key, endpoint: resource.path };
  const plainWindows = target.windows.map((w) => ({
    from: iso(w.window.fromMs),
    to: iso(w.window.toMs),
    status: w.status,
  }));
  if (resource.mode === 'full')
    return {
      row: {
        ...base,
        windows: [],
        unknown: `full refresh: read once, no count endpoint is documented for ${resource.path}`,
      },
      countRequests: 0,
    };
  if (resource.countPath === undefined)
    return {
      row: { ...base, windows: plainWindows, unknown: `no count endpoint is documented for ${resource.path}` },
      countRequests: 0,
    };
  const ctx: CallContext = {
    resource: resource.name,
    project: scope.key,
    lane: `plan|${resource.name}|${scope.key}`,
    stats: newCallStats(),
  };
  try {
    const windows = await Promise.all(
      target.windows.map(async (w): Promise<PlanWindow> => {
        const from = iso(w.window.fromMs);
        const to = iso(w.window.toMs);
        if (w.status === 'done') return { from, to, status: 'done', pages: 0 };
        const count = await queue.add(() => countRecords(deps.client, resource, scope, w.window, ctx));
        const pages = Math.max(1, Math.max(1, Math.ceil(count / resource.maxPageSize)) - w.pagesDone);
        // Rows still to read, as pages are: a resumed window's rows stored before are not planned again.
        const rows = Math.max(0, count - (w.rowsDone ?? 0));
        const upper = w.status === 'resume' && w.rowsDone === undefined;
        return { from, to, status: w.status, rows, pages, ...(upper ? { rowsUpperBound: true } : {}) };
      }),
    );
    const todo = windows.filter((w) => w.status !== 'done');
    const requests = todo.reduce((n, w) => n + (w.pages ?? 0), 0);
    const row = {
      ...base,
      windows,
      rows: todo.reduce((n, w) => n + (w.rows ?? 0), 0),
      pages: requests,
      requests,
      minimumSeconds: minimumSeconds({ [resource.path]: requests }, deps.limits),
    };
    return { row, countRequests: ctx.stats.requests };
  } catch (error) {
    if (error instanceof AuthError) throw error; // a bad key or project: the whole plan fails
    return {
      row: { ...base, windows: plainWindows, unknown: `the count request failed: ${(error as Error).message}` },
      countRequests: ctx.stats.requests,
    };
  }
}

/** What the progress display needs of a plan: per resource, the known rows, pages and floors. */
export function toProgressPlan(plan: Plan): ProgressPlan {
  const resources: Record<string, ResourcePlan> = {};
  const byResource = new Map<string, PlanRow[]>();
  for (const row of plan.rows) byResource.set(row.resource, [...(byResource.get(row.resource) ?? []), row]);
  for (const [resource, rows] of byResource) {
    if (rows.some((r) => r.requests === undefined)) continue;
    const requests = rows.reduce((n, r) => n + (r.requests ?? 0), 0);
    resources[resource] = {
      rows: rows.reduce((n, r) => n + (r.rows ?? 0), 0),
      pages: requests,
      minimumSeconds: minimumSeconds({ [rows[0]?.endpoint ?? resource]: requests }, plan.limits),
      ...(rows.some((r) => r.windows.some((w) => w.rowsUpperBound === true)) ? { resumed: true } : {}),
    };
  }
  return { resources, minimumSeconds: plan.minimumSeconds };
}

const iso = (ms: number): string => new Date(ms).toISOString();
