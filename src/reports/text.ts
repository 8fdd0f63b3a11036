import { formatReconcilePlan } from './reconcile-lines.js';
import { formatDuration } from '../core/duration.js';
import { forecastLine } from './freshness.js';
import type { CheckReport, CheckResult } from './check.js';
import type { BackfillStreamResult, BackfillSummary } from '../sync/backfill.js';
import type { Plan } from './plan.js';
import type { StreamResult } from '../sync/frame.js';
import type { AnalystStatus, StatusReport } from './status.js';
import type { VerifyReport } from '../reconcile/verify.js';

/**
 * Reports as text for people: what `sync`, `backfill`, `plan`, `check`, `status` and `verify`
 * print. The pipeline builds the reports (data, also printed as JSON with --json); how they read
 * on a terminal is decided here.
 */

/** The report as text: one line per request, then what was learned. */
export function formatCheck(
  report: CheckReport,
  target: { baseUrl: string; project: string | undefined; projectHeader: string | readonly string[] },
): string[] {
  const header = typeof target.projectHeader === 'string' ? target.projectHeader : target.projectHeader.join(' and ');
  const lines = [
    `check ${target.baseUrl} (project ${target.project ?? '(none: the service reads "default")'}, header ${header})`,
  ];
  const width = Math.max(...report.results.map((r) => r.endpoint.length), 10);
  const scopeWidth = Math.max(...report.results.map((r) => r.scope.length), 7);
  for (const r of report.results) {
    const head = `${r.endpoint.padEnd(width)}  ${r.scope.padEnd(scopeWidth)}  `;
    lines.push(head + describe(r));
  }
  if (report.results.some((r) => r.outcome === 'key-rejected')) {
    lines.push(
      'key: REJECTED (401): use the Organization API Key (the write key used for ingestion is not accepted); nothing else was checked',
    );
  } else if (report.keyAccepted) {
    lines.push('key: accepted');
  } else {
    lines.push('key: not checked: the first request failed (see above); nothing else was checked');
  }
  if (report.allProjects.accepted.length + report.allProjects.refused.length > 0) {
    lines.push(
      `accept "*": ${report.allProjects.accepted.join(', ') || 'none'}; refuse "*" (read one project at a time): ${report.allProjects.refused.join(', ') || 'none'}`,
    );
  }
  if (report.projects.length > 0) lines.push(`projects: ${report.projects.join(', ')}`);
  if (report.capabilities.length > 0) {
    lines.push(
      'this server offers (optional parts of the API; sync skips or replaces what it lacks, see docs/server-differences.md):',
    );
    for (const c of report.capabilities) {
      const said = c.offered === true ? 'yes' : c.offered === false ? 'NO ' : '?  ';
      const recorded =
        c.recorded === undefined
          ? ''
          : `  [state: ${c.recorded.offered ? 'offered' : 'absent'} since ${c.recorded.learnedAt}]`;
      lines.push(`  ${said} ${c.capability}${c.offered === true ? '' : `: ${c.evidence}`}${recorded}`);
    }
  }
  lines.push(`check ${report.ok ? 'ok' : 'FAILED'} (${report.requests} request${report.requests === 1 ? '' : 's'})`);
  return lines;
}

function describe(r: CheckResult): string {
  switch (r.outcome) {
    case 'ok': {
      if (r.total !== undefined) return `ok  total ${r.total}`;
      const fields = Object.entries(r.fields ?? {}).map(([name, type]) => `${name}:${type}`);
      const problems = (r.problems ?? []).map((p) => `  PROBLEM: ${p}`).join('');
      const shape = r.records === 0 ? 'no records yet (shape unknown)' : `${fields.length} fields ${fields.join(' ')}`;
      return `ok  ${r.records} record${r.records === 1 ? '' : 's'}${r.hasMore ? ' (more follow)' : ''}; ${shape}${problems}`;
    }
    case 'refuses-all-projects':
      return 'refuses "*" (400): read one project at a time';
    case 'not-offered':
      return `not offered: ${r.message ?? ''}`;
    case 'key-rejected':
      return `KEY REJECTED: ${r.message ?? ''}`;
    case 'project-refused':
      return `PROJECT REFUSED: ${r.message ?? ''}`;
    case 'failed':
      return `FAILED: ${r.message ?? ''}`;
  }
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
      const per = Object.entries(b.pending)
        .filter(([, n]) => n > 0)
        .map(([p, n]) => `${p} ${n}`)
        .join(', ');
      lines.push(
        `  read one parent record at a time on this server; backlog ${b.total}${per === '' ? '' : ` (${per})`}` +
          `, drains in ${formatSeconds(b.etaSeconds)} at ${b.ratePerMinute}/min; ${b.remembered} done records remembered` +
          (b.recheck > 0 ? `; ${b.recheck} answered empty while young, asked again at settle` : ''),
      );
      lines.push(`  forecast ${forecastLine(b.forecast)}`);
      if (b.deficit !== undefined) lines.push(`  WARNING: ${b.deficit}`);
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
        const pending =
          s.sync.pending === undefined
            ? ''
            : `  resumes [${s.sync.pending.from}, ${s.sync.pending.to})${s.sync.pending.checkpoint ? ' at a checkpoint' : ''}`;
        lines.push(
          `  sync     ${s.project.padEnd(12)} mark ${s.sync.highWaterMark ?? 'none'}  ${last}${pending}${rows}`,
        );
        if (s.sync.settled !== undefined)
          lines.push(`           ${''.padEnd(12)} settled (re-read after enrichment) up to ${s.sync.settled}`);
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
        const running =
          b.running.length === 0
            ? ''
            : `  running ${b.running.map((x) => `[${x.from}, ${x.to}) rows=${x.rows}`).join(' ')}`;
        const run =
          b.lastRun === undefined ? '' : `  last run ${b.lastRun.at} ${b.lastRun.outcome} rows=${b.lastRun.rows}`;
        const full = b.fullRead === undefined ? '' : `full read ${b.fullRead.at} rows=${b.fullRead.rows}`;
        const windows =
          requested === ''
            ? ''
            : `requested ${requested}  done ${b.windowsDone} windows (${b.rowsDone} rows)  gaps ${gaps}`;
        lines.push(`  backfill ${s.project.padEnd(12)} ${windows}${running}${full}${run}`.trimEnd());
      }
    }
  }
  if (report.analysts !== undefined) lines.push(...formatAnalystStatus(report.analysts));
  return lines;
}

/** Saved searches and aggregates: how far each has been read, and their tables' rows. */
function formatAnalystStatus(a: AnalystStatus): string[] {
  const lines: string[] = [];
  const table = (name: string): string => {
    const t = a.tables[name];
    const byProject =
      t?.byProject === undefined || Object.keys(t.byProject).length === 0
        ? ''
        : ` (${Object.entries(t.byProject)
            .map(([p, n]) => `${p} ${n}`)
            .join(', ')})`;
    return `${name}: table ${t?.rows ?? '?'} rows${byProject}`;
  };
  if (a.searches.length > 0) {
    lines.push('', table('search_results'));
    const width = Math.max(12, ...a.searches.map((s) => s.search.length + 1 + s.project.length));
    for (const s of a.searches) {
      const what =
        s.query === undefined ? '' : `  query ${JSON.stringify(s.query)}${s.mode === undefined ? '' : ` (${s.mode})`}`;
      lines.push(`  search   ${`${s.search}@${s.project}`.padEnd(width)} read up to ${s.mark}${what}`);
    }
  }
  if (a.aggregates.length > 0) {
    lines.push('', `${table('event_counts')}; ${table('event_facets')}`);
    for (const g of a.aggregates)
      lines.push(
        `  counts   ${g.project.padEnd(12)} ${g.interval === 'day' ? 'daily' : 'hourly'} counts refreshed ${g.refreshed} (the last 7 days are counted again each sync)`,
      );
  }
  return lines;
}

/** One line per window (mismatches flagged), the resources not verifiable, and a total. */
export function formatVerify(report: VerifyReport, options: { readonly onlyMismatches?: boolean } = {}): string[] {
  const lines: string[] = [];
  for (const w of report.windows) {
    if (options.onlyMismatches === true && w.match) continue;
    const diff = w.warehouse - w.api;
    const verdict = w.match ? 'ok' : `MISMATCH (warehouse ${diff > 0 ? '+' : ''}${diff})`;
    lines.push(
      `${w.resource.padEnd(13)} ${w.project.padEnd(12)} ${w.from} → ${w.to}  api=${w.api} warehouse=${w.warehouse}  ${verdict}`,
    );
  }
  for (const n of report.notVerifiable) lines.push(`${n.resource.padEnd(13)} ${'-'.padEnd(12)} ${n.reason}`);
  const matches = report.windows.length - report.mismatches;
  lines.push(
    `verify: ${report.windows.length} windows checked, ${matches} match, ${report.mismatches} mismatch${report.mismatches === 1 ? '' : 'es'}`,
  );
  return lines;
}

/** Widths of the resource and scope columns of summary lines. */
export interface StreamColumns {
  readonly resource: number;
  readonly scope: number;
}

/** Columns wide enough for every stream's names (a search's `name@project` is often longer than a resource). */
export function streamColumns(streams: readonly Pick<StreamResult, 'resource' | 'scope'>[]): StreamColumns {
  return {
    resource: Math.max(13, ...streams.map((s) => s.resource.length)),
    scope: Math.max(12, ...streams.map((s) => s.scope.length)),
  };
}

/** One summary line of a stream; `extra` fields (e.g. a backfill's windows) come after the scope. */
export function formatStreamLine(
  s: StreamResult,
  extra: readonly string[] = [],
  columns: StreamColumns = { resource: 13, scope: 12 },
): string {
  return [
    `${s.resource.padEnd(columns.resource)} ${s.scope.padEnd(columns.scope)}`,
    ...extra,
    `rows=${s.rows}`,
    `pages=${s.pages}`,
    `requests=${s.stats.requests}`,
    `retries=${s.stats.retries}`,
    `429s=${s.stats.rateLimited}`,
    `waited=${(s.stats.waitedMs / 1000).toFixed(1)}s`,
    `backoff=${(s.stats.backoffMs / 1000).toFixed(1)}s`,
    `seconds=${s.seconds.toFixed(1)}`,
    ...(s.lists?.foreignRowsDropped === undefined ? [] : [`foreign_rows_dropped=${s.lists.foreignRowsDropped}`]),
    s.outcome === 'ok'
      ? s.lacking === undefined
        ? s.owed === undefined || s.owed === 0
          ? 'ok'
          : `ok, ${s.owed} still owed (their parents' ${s.resource} are read by later runs)`
        : `skipped: ${s.lacking}`
      : `FAILED: ${s.error?.message ?? 'unknown error'}${s.owed === undefined || s.owed === 0 ? '' : ` (${s.owed} still owed)`}`,
  ].join(' ');
}

/**
 * What the run's verdict line adds when per-event traces are still owed (`''` when none):
 * a run that leaves some owed never says `ok` alone.
 */
export function owedVerdict(streams: readonly Pick<StreamResult, 'resource' | 'owed'>[]): string {
  const byResource = new Map<string, number>();
  for (const s of streams)
    if ((s.owed ?? 0) > 0) byResource.set(s.resource, (byResource.get(s.resource) ?? 0) + (s.owed ?? 0));
  if (byResource.size === 0) return '';
  const parts = [...byResource].map(
    ([resource, n]) => `${n.toLocaleString('en-US')} records still owe their ${resource}`,
  );
  return `, ${parts.join(', ')} (the next runs read them; status shows the drain ETA)`;
}

/** One line per resource and project scope, and a last line for the run. */
export function formatBackfillSummary(summary: BackfillSummary): string[] {
  const lines = formatBackfillStreams(summary.streams);
  const owed = (summary.owed ?? []).map((o) =>
    o.total === undefined
      ? `${o.resource} are read one ${o.parent} record at a time on this server: not backfilled, sync reads them`
      : `${o.total.toLocaleString('en-US')} ${o.parent} records owe their ${o.resource} (read one at a time on this server): the next sync reads them`,
  );
  lines.push(
    `backfill ${summary.from} → ${summary.to} ${summary.ok ? 'ok' : 'FAILED'} in ${summary.seconds.toFixed(1)} s` +
      (owed.length === 0 ? '' : `; ${owed.join('; ')}`),
  );
  return lines;
}

/** One line per resource and project scope. */
export function formatBackfillStreams(
  streams: readonly BackfillStreamResult[],
  columns = streamColumns(streams),
): string[] {
  return streams.map((s) => formatStreamLine(s, [`windows=${s.windows}`, `skipped=${s.skipped}`], columns));
}

/** Most windows listed per row in the text output (`--json` lists every one). */
const MAX_WINDOW_LINES = 60;

/** The plan as a table per resource and project, then each row's window breakdown. */
export function formatPlan(plan: Plan): string[] {
  const lines: string[] = [];
  const limits = `limits ${plan.limits.maxRpm}/min per endpoint, ${plan.limits.maxRps}/s combined`;
  if (plan.kind === 'backfill') {
    const windowCount = plan.rows.reduce((n, r) => Math.max(n, r.windows.length), 0);
    lines.push(
      `plan: backfill [${plan.from}, ${plan.to}) in ${formatWindowLength(plan.windowMs ?? 0)} windows (${windowCount}); ${limits}`,
    );
  } else {
    lines.push(`plan: next sync (from state); ${limits}`);
  }
  const header = ['resource', 'project', 'windows', 'rows', 'pages', 'requests', 'minimum'];
  const table: string[][] = [header];
  for (const row of plan.rows) {
    const todo = row.windows.filter((w) => w.status !== 'done').length;
    const windows = row.windows.length === 0 ? '-' : `${todo}/${row.windows.length}`;
    if (row.unknown !== undefined) {
      table.push([row.resource, row.scope, windows, `unknown: ${row.unknown}`]);
      continue;
    }
    table.push([
      row.resource,
      row.scope,
      windows,
      row.rows === undefined ? '?' : String(row.rows),
      String(row.pages ?? 0),
      String(row.requests ?? 0),
      formatSeconds(row.minimumSeconds ?? 0),
    ]);
  }
  lines.push(...alignTable(table));
  const endpoints = Object.entries(plan.requestsByEndpoint);
  const requests = endpoints.map(([e, n]) => `${n} requests to ${e}`).join(', ');
  lines.push(
    `total (known estimates): ${requests === '' ? 'no requests' : requests}; ` +
      `minimum ${formatSeconds(plan.minimumSeconds)} under the limits` +
      (plan.rows.some((r) => r.unknown !== undefined) ? ' (plus the resources marked unknown)' : '') +
      `; this plan made ${plan.countRequests} count requests`,
  );
  if (plan.reconcile !== undefined) lines.push(...formatReconcilePlan(plan.reconcile));
  for (const note of plan.notes) lines.push(`note: ${note}`);
  for (const row of plan.rows) {
    if (row.unknown !== undefined || row.windows.length === 0) continue;
    lines.push('', `windows of ${row.resource} ${row.scope}:`);
    for (const w of row.windows.slice(0, MAX_WINDOW_LINES)) {
      const tag =
        w.status === 'resume' ? '  (resume)' : w.status === 'settle' ? '  (settle re-read: late enrichment)' : '';
      const rows = `${w.rowsUpperBound === true ? '≤' : ''}${w.rows ?? '?'}`;
      const what = w.status === 'done' ? 'done (in the ledger)' : `rows ${rows}  pages ${w.pages ?? '?'}${tag}`;
      lines.push(`  ${w.from} → ${w.to}  ${what}`);
    }
    if (row.windows.length > MAX_WINDOW_LINES)
      lines.push(`  … ${row.windows.length - MAX_WINDOW_LINES} more windows (--json lists them all)`);
  }
  return lines;
}

function alignTable(rows: readonly string[][]): string[] {
  const widths: number[] = [];
  for (const row of rows) {
    // A long last cell (an "unknown" reason) does not widen the column.
    row.forEach((cell, i) => {
      if (i < row.length - 1 || row.length === rows[0]?.length) widths[i] = Math.max(widths[i] ?? 0, cell.length);
    });
  }
  return rows.map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd(),
  );
}

/** `1d`, `6h`, `15m`, else the general format. */
function formatWindowLength(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return formatDuration(ms);
}

/** Whole seconds: `0s`, `9s`, `1m09s`, `2h05m`. */
function formatSeconds(seconds: number): string {
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
