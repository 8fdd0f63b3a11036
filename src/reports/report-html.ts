import { forecastLine, spoken } from './freshness.js';
import type { ReportData, ReportRun } from './report.js';

/**
 * `report --html`: the run history as one self-contained page. The charts are SVG written here,
 * not a chart library: the page needs no network and no script to draw (a library would have to be
 * inlined whole, 50-200 KB, to draw bars and lines), prints and archives as it is, and a test can
 * count its marks. Each mark of data is an element of class `pt` with a `<title>` (its tooltip);
 * a mark of value 0 is not drawn. Pure: data in, text out.
 */

const W = 1000;
const H = 240;
const PAD = { left: 64, right: 16, top: 14, bottom: 34 };
const PALETTE = ['#2563eb', '#16a34a', '#d97706', '#9333ea', '#0891b2', '#db2777', '#65a30d', '#dc2626', '#475569'];
const OK = '#16a34a';
const AMBER = '#d97706';
const RED = '#dc2626';
const GREY = '#64748b';

interface Series {
  readonly name: string;
  readonly color: string;
  /** One value per run (`null`: no mark for that run). */
  readonly values: readonly (number | null)[];
  /** Tooltip text of one value. */
  readonly tip?: (value: number, run: ReportRun) => string;
}

export function reportHtml(data: ReportData): string {
  const runs = data.runs;
  const resources = [...new Set(runs.flatMap((r) => r.streams.map((s) => s.resource)))];
  const color = (name: string): string => PALETTE[resources.indexOf(name) % PALETTE.length] ?? GREY;
  const lag = lagSeries(runs, resources, color);
  const sections = [
    chart(
      'rows',
      'Rows per run, per resource',
      'Rows each run wrote (merged on the key: a row read again counts again).',
      runs,
      resources.map((resource) => ({
        name: resource,
        color: color(resource),
        values: runs.map((run) => sumOf(run, resource, (s) => s.rows)),
      })),
      { stacked: true },
    ),
    chart(
      'lag',
      `Data lag at each run’s end, per resource (${lag.unit})`,
      'How old the newest stored data was when the run ended: its own start after a good run; it grows while runs fail.',
      runs,
      lag.series,
      { line: true },
    ),
    chart(
      'backlog',
      'Per-event backlog (traces read one event at a time)',
      'Events whose traces were still to read at each run’s end, and when the backlog would be whole at the budget.',
      runs,
      [...new Set(runs.flatMap((r) => (r.backlog ?? []).map((b) => b.resource)))].map((resource, i) => ({
        name: resource,
        color: PALETTE[(i + 3) % PALETTE.length] ?? GREY,
        values: runs.map((run) => run.backlog?.find((b) => b.resource === resource)?.pending ?? null),
        tip: (_v, run) => forecastLine(run.backlog?.find((b) => b.resource === resource) ?? emptyForecast(resource)),
      })),
      {
        line: true,
        zero: true,
        empty: 'no resource is read one event at a time on this server (or no run has recorded one yet)',
      },
    ),
    chart(
      'requests',
      'Requests on the busiest endpoint against the limit',
      'Bars: requests the run sent to its busiest endpoint. Ticks: what --max-rpm allows an endpoint over the run’s length (at least one minute).',
      runs,
      [
        {
          name: 'busiest endpoint',
          color: '#2563eb',
          values: runs.map((run) => busiest(run).requests || null),
          tip: (v, run) => `${busiest(run).resource}: ${v.toLocaleString('en-US')} requests`,
        },
        {
          name: 'the limit allows',
          color: '#0f172a',
          values: runs.map((run) => allowance(run)),
        },
      ],
      { ticks: 'the limit allows' },
    ),
    chart(
      'throttled',
      '429s and retries per run',
      'A 429 pauses its endpoint and lowers its rate; many of them mean another client shares the key, or the limits are lower than configured.',
      runs,
      [
        { name: '429s', color: RED, values: runs.map((run) => run.rateLimited || null) },
        { name: 'other retries', color: AMBER, values: runs.map((run) => run.retries - run.rateLimited || null) },
      ],
      { stacked: true, empty: 'no run has been throttled or retried' },
    ),
    chart(
      'reconcile',
      'Reconcile outcomes (windows)',
      'After its writes a sync compares the API’s counts with the warehouse: windows that matched, that differed and were repaired, that still differ.',
      runs,
      [
        {
          name: 'matched',
          color: OK,
          values: runs.map((run) =>
            run.reconcile === undefined ? null : run.reconcile.checked - run.reconcile.differed,
          ),
        },
        {
          name: 'repaired',
          color: AMBER,
          values: runs.map((run) =>
            run.reconcile === undefined ? null : run.reconcile.differed - run.reconcile.remaining,
          ),
        },
        { name: 'still differ', color: RED, values: runs.map((run) => run.reconcile?.remaining ?? null) },
      ],
      { stacked: true, empty: 'no run reconciled (--reconcile off, or only backfills)' },
    ),
    chart(
      'schema',
      'Schema changes per run',
      'Tables created, columns added for new fields, and variant columns for a value of another type.',
      runs,
      (['new table', 'new column', 'variant column'] as const).map((kind, i) => ({
        name: kind,
        color: [GREY, '#2563eb', AMBER][i] ?? GREY,
        values: runs.map(
          (run) => data.schemaChanges.filter((c) => c.runId === run.runId && c.change === kind).length || null,
        ),
      })),
      { stacked: true, empty: 'no schema change in these runs' },
    ),
  ];
  return page(data, [...sections, schemaTable(data), runsTable(runs)]);
}

// ---- the facts drawn ----

function sumOf(run: ReportRun, resource: string, f: (s: ReportRun['streams'][number]) => number): number | null {
  const streams = run.streams.filter((s) => s.resource === resource);
  return streams.length === 0 ? null : streams.reduce((n, s) => n + f(s), 0) || null;
}

/**
 * Per resource, at each run's end: the time since the start of the last run that read it whole, in
 * minutes, or in hours once some lag passes three hours (a schedule that stopped for a day).
 */
function lagSeries(
  runs: readonly ReportRun[],
  resources: readonly string[],
  color: (n: string) => string,
): { readonly unit: string; readonly series: Series[] } {
  const lags = resources.map((resource) => {
    let asOf: number | undefined;
    return runs.map((run) => {
      const streams = run.streams.filter((s) => s.resource === resource);
      if (streams.length === 0) return null;
      if (streams.every((s) => s.outcome === 'ok')) asOf = run.startedMs;
      return asOf === undefined ? null : Math.max(0, run.endedMs - asOf);
    });
  });
  const hours = lags.some((values) => values.some((v) => v !== null && v > 3 * 3_600_000));
  const unitMs = hours ? 3_600_000 : 60_000;
  return {
    unit: hours ? 'hours' : 'minutes',
    series: resources.map((resource, i) => ({
      name: resource,
      color: color(resource),
      values: (lags[i] ?? []).map((v) => (v === null ? null : v / unitMs)),
      tip: (v) => `${resource}: ${spoken(v * unitMs)} behind`,
    })),
  };
}

function busiest(run: ReportRun): { resource: string; requests: number } {
  const by = new Map<string, number>();
  for (const s of run.streams) by.set(s.resource, (by.get(s.resource) ?? 0) + s.requests);
  let best = { resource: '-', requests: 0 };
  for (const [resource, requests] of by) if (requests > best.requests) best = { resource, requests };
  return best;
}

/** What the per-endpoint minute limit allows over the run: a sliding minute, so at least one minute's worth. */
function allowance(run: ReportRun): number | null {
  if (run.maxRpm === undefined) return null;
  return Math.round(run.maxRpm * Math.max(1, (run.endedMs - run.startedMs) / 60_000));
}

function emptyForecast(resource: string): Parameters<typeof forecastLine>[0] {
  return { resource, pending: 0, ratePerMinute: 0, wholeInSeconds: 0, growthPerDay: 0 };
}

// ---- drawing ----

interface ChartOptions {
  readonly stacked?: boolean;
  readonly line?: boolean;
  /** Draw a line's zero values (a backlog that emptied is news). */
  readonly zero?: boolean;
  /** The series drawn as a tick over each run rather than a bar. */
  readonly ticks?: string;
  readonly empty?: string;
}

function chart(
  id: string,
  title: string,
  note: string,
  runs: readonly ReportRun[],
  series: readonly Series[],
  options: ChartOptions = {},
): string {
  const drawn = series.filter((s) => s.values.some((v) => v !== null && (v > 0 || options.zero === true)));
  const head = `<section class="card"><h2>${esc(title)}</h2><p class="note">${esc(note)}</p>`;
  if (drawn.length === 0)
    return `${head}<p class="empty">${esc(options.empty ?? 'no data in these runs')}</p></section>`;
  const n = runs.length;
  const step = (W - PAD.left - PAD.right) / Math.max(n, 1);
  const x = (i: number): number => PAD.left + step * (i + 0.5);
  const totals = runs.map((_, i) =>
    options.stacked === true
      ? drawn.reduce((t, s) => t + (s.values[i] ?? 0), 0)
      : Math.max(0, ...drawn.map((s) => s.values[i] ?? 0)),
  );
  // Counts (429s, windows, changes) get whole ticks: at least 4 on a scale of quarters.
  const counts = drawn.every((s) => s.values.every((v) => v === null || Number.isInteger(v)));
  const top = niceMax(Math.max(...totals, counts ? 4 : 1), counts);
  const y = (v: number): number => H - PAD.bottom - (v / top) * (H - PAD.top - PAD.bottom);
  const parts: string[] = [];
  // A run that failed is shaded in every chart, so a gap in its bars reads as what it is.
  runs.forEach((run, i) => {
    if (run.outcome !== 'ok')
      parts.push(
        `<rect x="${f(x(i) - step / 2)}" y="${PAD.top}" width="${f(step)}" height="${H - PAD.top - PAD.bottom}" class="failed"><title>${esc(`${when(run.startedMs)} · ${run.command} ${run.outcome}`)}</title></rect>`,
      );
  });
  for (let t = 0; t <= 4; t++) {
    const v = (top * t) / 4;
    parts.push(
      `<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${f(y(v))}" y2="${f(y(v))}" class="grid"/>`,
      `<text x="${PAD.left - 6}" y="${f(y(v) + 4)}" class="axis" text-anchor="end">${esc(short(v))}</text>`,
    );
  }
  for (const i of labelIndexes(n))
    parts.push(
      `<text x="${f(x(i))}" y="${H - PAD.bottom + 18}" class="axis" text-anchor="${n > 1 && i === n - 1 ? 'end' : 'middle'}">${esc(when(runs[i]?.startedMs ?? 0))}</text>`,
    );
  const barWidth = Math.max(1.5, Math.min(28, step * 0.7));
  const base = runs.map(() => 0);
  for (const s of drawn) {
    const tip = (i: number, v: number): string =>
      `<title>${esc(`${when(runs[i]?.startedMs ?? 0)} · ${s.tip === undefined ? `${s.name}: ${v.toLocaleString('en-US')}` : s.tip(v, runs[i] as ReportRun)}`)}</title>`;
    if (options.line === true) {
      const points = s.values.flatMap((v, i) => (v === null ? [] : [[x(i), y(v), i, v] as const]));
      if (points.length > 1)
        parts.push(
          `<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${points.map(([px, py]) => `${f(px)},${f(py)}`).join(' ')}"/>`,
        );
      for (const [px, py, i, v] of points)
        if (v > 0 || options.zero === true)
          parts.push(
            `<circle class="pt" data-series="${esc(s.name)}" cx="${f(px)}" cy="${f(py)}" r="3.5" fill="${s.color}">${tip(i, v)}</circle>`,
          );
      continue;
    }
    s.values.forEach((v, i) => {
      if (v === null || v <= 0) return;
      if (options.ticks === s.name) {
        parts.push(
          `<line class="pt tick" data-series="${esc(s.name)}" x1="${f(x(i) - barWidth / 2 - 3)}" x2="${f(x(i) + barWidth / 2 + 3)}" y1="${f(y(v))}" y2="${f(y(v))}" stroke="${s.color}" stroke-width="2.5">${tip(i, v)}</line>`,
        );
        return;
      }
      const from = options.stacked === true ? (base[i] ?? 0) : 0;
      parts.push(
        `<rect class="pt" data-series="${esc(s.name)}" x="${f(x(i) - barWidth / 2)}" y="${f(y(from + v))}" width="${f(barWidth)}" height="${f(Math.max(1, y(from) - y(from + v)))}" fill="${s.color}" rx="1.5">${tip(i, v)}</rect>`,
      );
      if (options.stacked === true) base[i] = from + v;
    });
  }
  const legend =
    drawn.map((s) => `<span class="key"><i style="background:${s.color}"></i>${esc(s.name)}</span>`).join('') +
    (runs.some((r) => r.outcome !== 'ok')
      ? '<span class="key"><i class="failed-key"></i>a run that failed</span>'
      : '');
  return (
    `${head}<svg data-chart="${id}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(title)}">${parts.join('')}</svg>` +
    `<div class="legend">${legend}</div></section>`
  );
}

/** Up to six run indexes to label on the x axis, first and last included. */
function labelIndexes(n: number): number[] {
  if (n <= 6) return [...Array(n).keys()];
  return [...new Set([0, 1, 2, 3, 4, 5].map((k) => Math.round((k * (n - 1)) / 5)))];
}

/** The top of a scale of four ticks; for counts, one whose quarters are whole numbers. */
function niceMax(v: number, counts = false): number {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 4, 5, 8, 10]) {
    const top = m * p;
    if (top >= v && (!counts || top % 4 === 0) && (counts || m !== 4) && (counts || m !== 8)) return top;
  }
  return counts ? Math.ceil((10 * p) / 4) * 4 : 10 * p;
}

function short(v: number): string {
  if (v >= 1e6) return `${Number((v / 1e6).toFixed(1))}M`;
  if (v >= 1e4) return `${Number((v / 1e3).toFixed(0))}k`;
  if (v >= 1000) return `${Number((v / 1e3).toFixed(1))}k`;
  const decimals = v < 10 ? 2 : 0;
  return String(Number(v.toFixed(decimals)));
}

const f = (v: number): string => v.toFixed(1);

/** `11-28 16:52` (UTC). */
function when(ms: number): string {
  return new Date(ms).toISOString().slice(5, 16).replace('T', ' ');
}

function esc(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c,
  );
}

// ---- tables and the page ----

function schemaTable(data: ReportData): string {
  const columns = data.schemaChanges.filter((c) => c.change !== 'new table').slice(-30);
  const tables = new Map<string, number>();
  for (const c of data.schemaChanges) if (c.change === 'new table') tables.set(c.table, (tables.get(c.table) ?? 0) + 1);
  if (columns.length === 0 && tables.size === 0) return '';
  const rows = columns
    .map(
      (c) =>
        `<tr><td>${esc(stamp(c.changedMs))}</td><td>${esc(c.change)}</td><td>${esc(c.table)}.${esc(c.column)}</td><td>${esc(c.type)}</td></tr>`,
    )
    .join('');
  const created = [...tables].map(([t, n]) => `${esc(t)} (${n} columns)`).join(', ');
  return (
    `<section class="card"><h2>Schema changes</h2>` +
    (created === '' ? '' : `<p class="note">Tables created in these runs: ${created}.</p>`) +
    (rows === ''
      ? '<p class="empty">No column was added after its table was created.</p>'
      : `<table><thead><tr><th>when</th><th>change</th><th>column</th><th>type</th></tr></thead><tbody>${rows}</tbody></table>`) +
    `</section>`
  );
}

function runsTable(runs: readonly ReportRun[]): string {
  const last = runs.slice(-15).reverse();
  const rows = last
    .map(
      (r) =>
        `<tr class="${r.outcome === 'ok' ? '' : 'bad'}"><td>${esc(stamp(r.startedMs))}</td><td>${esc(r.command)}</td>` +
        `<td><b class="badge ${r.outcome === 'ok' ? 'ok' : 'fail'}">${esc(r.outcome)}</b></td><td class="num">${r.rows.toLocaleString('en-US')}</td>` +
        `<td class="num">${r.requests.toLocaleString('en-US')}</td><td class="num">${r.rateLimited}</td>` +
        `<td class="num">${esc(spoken(r.endedMs - r.startedMs))}</td><td class="err">${esc(errorsCell(r.errors))}</td></tr>`,
    )
    .join('');
  return (
    `<section class="card"><h2>Latest runs</h2><table><thead><tr><th>started (UTC)</th><th>command</th><th>outcome</th>` +
    `<th class="num">rows</th><th class="num">requests</th><th class="num">429s</th><th class="num">took</th><th>errors</th></tr></thead>` +
    `<tbody>${rows}</tbody></table></section>`
  );
}

/** The first error, trimmed (a refused key fails every stream with the same words), and how many more. */
function errorsCell(errors: readonly string[]): string {
  const [first] = errors;
  if (first === undefined) return '';
  const text = first.replace(/^\[resource [^\]]*\] /, '');
  const trimmed = text.length > 160 ? `${text.slice(0, 159)}…` : text;
  return errors.length === 1 ? trimmed : `${trimmed} (+${errors.length - 1} more)`;
}

function stamp(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
}

function cards(data: ReportData): string {
  const last = data.runs[data.runs.length - 1];
  const p = data.published;
  const card = (label: string, value: string, sub: string, tone = ''): string =>
    `<div class="stat ${tone}"><div class="label">${esc(label)}</div><div class="value">${esc(value)}</div><div class="sub">${esc(sub)}</div></div>`;
  const backlog = last?.backlog ?? [];
  return (
    `<div class="stats">` +
    card(
      'Published copy',
      p === undefined ? 'none yet' : `${spoken(Math.max(0, data.generatedMs - p.asOfMs))} old`,
      p === undefined ? 'a sync publishes at its end' : `as of ${stamp(p.asOfMs)} UTC · publish ${p.publish}`,
      p === undefined ? 'warn' : '',
    ) +
    card(
      'Last run',
      last === undefined ? 'none' : last.outcome,
      last === undefined
        ? 'no run recorded'
        : `${last.command} ${stamp(last.startedMs)} UTC, took ${spoken(last.endedMs - last.startedMs)}`,
      last === undefined || last.outcome !== 'ok' ? 'warn' : 'good',
    ) +
    card(
      'Runs',
      data.runs.length.toLocaleString('en-US'),
      data.totalRuns > data.runs.length ? `the newest of ${data.totalRuns.toLocaleString('en-US')}` : 'all recorded',
    ) +
    card(
      'Backlog',
      backlog.length === 0 ? 'none' : backlog.map((b) => b.pending.toLocaleString('en-US')).join(' + '),
      backlog.length === 0 ? 'nothing read one event at a time' : backlog.map((b) => forecastLine(b)).join('; '),
      backlog.some((b) => b.wholeInSeconds === null) ? 'warn' : '',
    ) +
    `</div>`
  );
}

const STYLE = `
:root{color-scheme:light;--ink:#0f172a;--muted:#64748b;--line:#e2e8f0;--bg:#f8fafc}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1120px;margin:0 auto;padding:28px 24px 48px}
header h1{font-size:22px;margin:0 0 4px}header p{margin:0;color:var(--muted)}
.stats{display:grid;grid-template-columns:repeat(4,1fr);gap:12px;margin:20px 0}
.stat{background:#fff;border:1px solid var(--line);border-radius:10px;padding:12px 14px;border-top:3px solid #94a3b8}
.stat.good{border-top-color:#16a34a}.stat.warn{border-top-color:#dc2626}
.stat .label{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.stat .value{font-size:22px;font-weight:600;margin:2px 0}.stat .sub{color:var(--muted);font-size:12px}
.card{background:#fff;border:1px solid var(--line);border-radius:10px;padding:14px 16px;margin:0 0 14px}
.card h2{font-size:15px;margin:0 0 2px}.note{color:var(--muted);margin:0 0 6px;font-size:12.5px}
.empty{color:var(--muted);font-style:italic;margin:8px 0}
svg{width:100%;height:auto;display:block}
.grid{stroke:#eef2f7;stroke-width:1}.axis{fill:#64748b;font-size:11px}
.pt:hover{opacity:.75}.failed{fill:#fee2e2;opacity:.7}.key i.failed-key{background:#fecaca}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;color:#334155}
.key i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
table{width:100%;border-collapse:collapse;font-size:12.5px}th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line)}
th{color:var(--muted);font-weight:500}.num{text-align:right;font-variant-numeric:tabular-nums}
.err{color:#b91c1c;max-width:360px}.badge{font-weight:600}.badge.ok{color:#15803d}.badge.fail{color:#b91c1c}
footer{color:var(--muted);font-size:12px;margin-top:18px}
@media (max-width:760px){.stats{grid-template-columns:repeat(2,1fr)}}
`;

/**
 * Counts each chart's drawn marks once the page has laid out (`body[data-rendered]`), so a test in
 * a headless browser can tell a page that drew from one that only parsed.
 */
const RENDERED = `addEventListener('load',()=>{const o={};for(const s of document.querySelectorAll('svg[data-chart]'))o[s.dataset.chart]=[...s.querySelectorAll('.pt')].filter(e=>{const b=e.getBoundingClientRect();return b.width>0||b.height>0}).length;document.body.dataset.rendered=JSON.stringify(o)})`;

function page(data: ReportData, sections: readonly string[]): string {
  const first = data.runs[0];
  const span =
    first === undefined
      ? 'no run recorded yet'
      : `${data.runs.length} run${data.runs.length === 1 ? '' : 's'} from ${stamp(first.startedMs)} to ${stamp(data.runs[data.runs.length - 1]?.startedMs ?? first.startedMs)} UTC`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>query-sync report · ${esc(data.warehouse)}</title><style>${STYLE}</style></head>
<body><main><header><h1>query-sync · runs of ${esc(data.warehouse)}</h1><p>${esc(span)} · written ${esc(stamp(data.generatedMs))} UTC</p></header>
${cards(data)}
${sections.join('\n')}
<footer>Written by <code>query-sync report --html</code> from <code>_query_sync_runs</code>, <code>_query_sync_schema_changes</code> and <code>_query_sync_published</code>. Times are UTC; hover a mark for its figures.</footer>
</main><script>${RENDERED}</script></body></html>
`;
}
