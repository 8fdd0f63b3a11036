import { describe, expect, it } from 'vitest';
import { reportHtml } from '../../../src/reports/report-html.js';
import type { ReportData, ReportRun } from '../../../src/reports/report.js';
import { forecastBacklog } from '../../../src/reports/freshness.js';

const HOUR = 3_600_000;
const T0 = Date.parse('2026-11-20T00:00:00Z');

function run(i: number, outcome: 'ok' | 'failed', rows: number, extra: Partial<ReportRun> = {}): ReportRun {
  const streams = ['events', 'traces'].map((resource) => ({
    resource,
    scope: '*',
    outcome,
    rows,
    requests: rows + 1,
    rateLimited: 0,
  }));
  return {
    runId: `run-${i}`,
    command: 'sync',
    startedMs: T0 + i * 6 * HOUR,
    endedMs: T0 + i * 6 * HOUR + 10 * 60_000,
    outcome,
    rows: 2 * rows,
    requests: 2 * (rows + 1),
    retries: 0,
    rateLimited: 0,
    streams,
    maxRpm: 400,
    errors: outcome === 'ok' ? [] : ['[resource events, project *] HTTP 503 <html>busy</html>'],
    ...extra,
  };
}

/** The marks of one chart: `pt` elements inside its svg. */
function marks(html: string, chart: string): number {
  const svg = new RegExp(`<svg data-chart="${chart}"[^>]*>(.*?)</svg>`, 's').exec(html)?.[1] ?? '';
  return (svg.match(/class="pt/g) ?? []).length;
}

describe('the HTML report', () => {
  it('draws one mark per figure, shades failed runs, says lags past three hours in hours, and escapes every text', () => {
    const data: ReportData = {
      warehouse: '/data/<w>.duckdb',
      generatedMs: T0 + 30 * HOUR,
      published: { asOfMs: T0 + 24 * HOUR, publish: 9, runId: 'run-4' },
      totalRuns: 500,
      runs: [
        run(0, 'ok', 100, { reconcile: { checked: 6, differed: 1, remaining: 0 } }),
        run(1, 'failed', 0),
        run(2, 'failed', 0),
        run(3, 'ok', 40, { backlog: [forecastBacklog('traces', 900, 400, { perDay: 700_000, partialDay: false })] }),
        run(4, 'ok', 0, { backlog: [forecastBacklog('traces', 0, 400)] }),
      ],
      schemaChanges: [
        { runId: 'run-0', changedMs: T0, table: 'events', column: 'id', type: 'VARCHAR', change: 'new table' },
        { runId: 'run-3', changedMs: T0, table: 'events', column: 'model', type: 'VARCHAR', change: 'new column' },
      ],
    };
    const html = reportHtml(data);
    // Rows: two resources in each of the two runs that wrote rows.
    expect(marks(html, 'rows')).toBe(4);
    // Lag: both resources at every run from the first good one on (the failed runs' lag grows).
    expect(marks(html, 'lag')).toBe(10);
    expect(html).toContain('Data lag at each run’s end, per resource (hours)');
    // Backlog: the runs that recorded one, zero included (a backlog that emptied is news).
    expect(marks(html, 'backlog')).toBe(2);
    // Requests: a bar and a tick of the limit for each of the five runs.
    expect(marks(html, 'requests')).toBe(10);
    expect(marks(html, 'reconcile')).toBe(2);
    expect(marks(html, 'schema')).toBe(2);
    expect(html.match(/class="failed"/g)?.length).toBe(2 * 6);
    expect(html).toContain('never whole at 400/min: at today&#39;s arrival rate the backlog grows by 124k a day');
    expect(html).toContain('/data/&lt;w&gt;.duckdb');
    expect(html).toContain('HTTP 503 &lt;html&gt;busy&lt;/html&gt;');
    expect(html).not.toContain('<html>busy');
    expect(html).toContain('the newest of 500');
  });

  it('an empty history is a page that says so', () => {
    const html = reportHtml({ warehouse: 'w.duckdb', generatedMs: T0, runs: [], totalRuns: 0, schemaChanges: [] });
    expect(html).not.toContain('<svg');
    expect(html).toContain('no run recorded yet');
  });
});
