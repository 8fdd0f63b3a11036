import type { ResourceDefinition } from '../core/types.js';
import { ledgerGaps, readLedger, streamLedger, type BackfillRunRecord, type Interval, type StreamLedger } from '../state/ledger.js';
import type { Lateness, LastRun, StateDocument } from '../state/store.js';
import { formatDuration } from '../core/duration.js';
import { DEFAULT_RATE_LIMITS } from '../http/budget.js';
import { childBacklog, readsByParent } from './children.js';
import { formatSeconds } from './plan.js';

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

export interface SyncStreamStatus {
  readonly highWaterMark?: string;
  /** Settle mark: records before it were read again once settled (late enrichment). */
  readonly settled?: string;
  /** How late records arrived (receipt − own time) in the last run that read any. */
  readonly lateness?: Lateness;
  /** A window a killed sync left mid-way (it resumes there). */
  readonly pending?: { readonly from: string; readonly to: string; readonly checkpoint: boolean };
  readonly lastRun?: LastRun;
}

export interface BackfillStreamStatus {
  readonly requested: readonly Interval[];
  readonly windowsDone: number;
  readonly rowsDone: number;
  readonly gaps: readonly Interval[];
  readonly running: readonly { readonly from: string; readonly to: string; readonly rows: number; readonly checkpoint: boolean }[];
  readonly fullRead?: StreamLedger['fullRead'];
  readonly lastRun?: BackfillRunRecord;
}

export interface ScopeStatus {
  readonly project: string;
  /** Rows of this project (or of every project, for `*`) in the table, when known. */
  readonly tableRows?: number;
  readonly sync?: SyncStreamStatus;
  readonly backfill?: BackfillStreamStatus;
}

/** A per-parent child's backlog (traces read one event at a time). */
export interface ChildBacklogStatus {
  /** Parent records whose children are still to read, per project. */
  readonly pending: Readonly<Record<string, number>>;
  readonly total: number;
  /** Done records kept to avoid reading them twice (within the re-read horizon). */
  readonly remembered: number;
  /** Least time to drain it at `ratePerMinute` (the endpoint's default limit). */
  readonly etaSeconds: number;
  readonly ratePerMinute: number;
}

export interface ResourceStatus {
  readonly resource: string;
  /** What was learned about the server for this resource: read by time, or one parent at a time. */
  readonly readBy?: 'time' | 'parent';
  readonly backlog?: ChildBacklogStatus;
  readonly tableRows?: number;
  readonly rowsByProject?: Readonly<Record<string, number>>;
  readonly scopes: readonly ScopeStatus[];
}

export interface StatusReport {
  readonly state: string;
  readonly projects: readonly string[];
  readonly warehouse: WarehouseStatus;
  readonly resources: readonly ResourceStatus[];
}

export function buildStatus(
  statePath: string,
  doc: StateDocument,
  resources: readonly ResourceDefinition[],
  warehouse: WarehouseStatus,
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
        windowsDone: stream.done.length,
        rowsDone: stream.done.reduce((n, d) => n + d.rows, 0),
        gaps: ledgerGaps(stream),
        running: stream.running.map((r) => ({ from: r.from, to: r.to, rows: r.rows, checkpoint: r.cursor !== undefined })),
        fullRead: stream.fullRead,
        lastRun: stream.lastRun,
      };
    }
    const table = warehouse.tables[resource.name] ?? {};
    const byParent = resource.perParent === undefined ? undefined : readsByParent(doc, resource);
    let backlog: ChildBacklogStatus | undefined;
    if (byParent === true) {
      const b = childBacklog(doc, resource);
      const total = Object.values(b.pending).reduce((n, x) => n + x, 0);
      const rate = DEFAULT_RATE_LIMITS.maxRpm;
      backlog = { pending: b.pending, total, remembered: b.done, etaSeconds: Math.ceil((total / rate) * 60), ratePerMinute: rate };
    }
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
  return { state: statePath, projects: doc.projects, warehouse, resources: out };
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

/** The report as text: a block per resource, a line per sync stream and per backfill. */
export function formatStatus(report: StatusReport): string[] {
  const lines: string[] = [];
  const w = report.warehouse;
  lines.push(
    `state ${report.state} · warehouse ${w.location} (${w.destination})${w.available ? '' : ` — counts unavailable: ${w.reason ?? 'unknown'}`}` +
      ` · projects ${report.projects.length === 0 ? '(none recorded)' : report.projects.join(', ')}`,
  );
  for (const r of report.resources) {
    const byProject =
      r.rowsByProject === undefined || Object.keys(r.rowsByProject).length === 0
        ? ''
        : ` (${Object.entries(r.rowsByProject)
            .map(([p, n]) => `${p} ${n}`)
            .join(', ')})`;
    lines.push('', `${r.resource}: table ${r.tableRows === undefined ? '?' : r.tableRows} rows${byProject}`);
    if (r.readBy === 'time') lines.push('  this server lists them by time (window walk)');
    if (r.backlog !== undefined) {
      const b = r.backlog;
      const per = Object.entries(b.pending).filter(([, n]) => n > 0).map(([p, n]) => `${p} ${n}`).join(', ');
      lines.push(
        `  read one parent record at a time on this server; backlog ${b.total}${per === '' ? '' : ` (${per})`}` +
          `, drains in ${formatSeconds(b.etaSeconds)} at ${b.ratePerMinute}/min; ${b.remembered} done records remembered`,
      );
    }
    if (r.scopes.length === 0) lines.push('  never synced or backfilled');
    for (const s of r.scopes) {
      const rows = s.tableRows === undefined ? '' : `  table rows ${s.tableRows}`;
      if (s.sync !== undefined) {
        const run = s.sync.lastRun;
        const last =
          run === undefined
            ? 'no run recorded'
            : `last run ${run.at} ${run.outcome} rows=${run.rows} ${run.seconds.toFixed(1)}s${run.error === undefined ? '' : ` (${run.error})`}`;
        const pending = s.sync.pending === undefined ? '' : `  resumes [${s.sync.pending.from}, ${s.sync.pending.to})${s.sync.pending.checkpoint ? ' at a checkpoint' : ''}`;
        lines.push(`  sync     ${s.project.padEnd(12)} mark ${s.sync.highWaterMark ?? 'none'}  ${last}${pending}${rows}`);
        if (s.sync.settled !== undefined) lines.push(`           ${''.padEnd(12)} settled (re-read after enrichment) up to ${s.sync.settled}`);
        const late = s.sync.lateness;
        if (late !== undefined) {
          lines.push(
            `           ${''.padEnd(12)} arrival delay (received_at − timestamp) over ${late.records} records of the run at ${late.at}: ` +
              `p50 ${formatDuration(late.p50Ms)}, p99 ${formatDuration(late.p99Ms)}, max ${formatDuration(late.maxMs)} (set --lookback above p99)`,
          );
        }
      }
      if (s.backfill !== undefined) {
        const b = s.backfill;
        const requested = b.requested.map((i) => `[${i.from}, ${i.to})`).join(' ');
        const gaps = b.gaps.length === 0 ? 'none' : b.gaps.map((i) => `[${i.from}, ${i.to})`).join(' ');
        const running = b.running.length === 0 ? '' : `  running ${b.running.map((x) => `[${x.from}, ${x.to}) rows=${x.rows}`).join(' ')}`;
        const run = b.lastRun === undefined ? '' : `  last run ${b.lastRun.at} ${b.lastRun.outcome} rows=${b.lastRun.rows}`;
        const full = b.fullRead === undefined ? '' : `full read ${b.fullRead.at} rows=${b.fullRead.rows}`;
        const windows = requested === '' ? '' : `requested ${requested}  done ${b.windowsDone} windows (${b.rowsDone} rows)  gaps ${gaps}`;
        lines.push(`  backfill ${s.project.padEnd(12)} ${windows}${running}${full}${run}`.trimEnd());
      }
    }
  }
  return lines;
}
