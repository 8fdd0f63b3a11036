import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { metricsTable, withMetricsTable } from '../../../scripts/metrics-table.js';
import { METRICS } from '../../../src/monitor/metric-list.js';

const DOCS = join(process.cwd(), 'docs');
const read = (file: string): string => readFileSync(join(DOCS, file), 'utf8');
const NAMES = new Set(METRICS.map((m) => m.name));
/** The query_sync_* names a text uses (a recording of a name we do not publish would alert on nothing). */
const namesIn = (text: string): string[] => [...new Set(text.match(/\bquery_sync_[a-z_]+/g) ?? [])];

describe('docs/monitoring.md, alerts.yml and the Grafana dashboard', () => {
  it('monitoring.md holds the list of metrics as src/monitor/metric-list.ts makes it (else: npm run docs:metrics)', () => {
    const page = read('monitoring.md');
    expect(page, 'docs/monitoring.md is out of date: run npm run docs:metrics and commit it').toBe(
      withMetricsTable(page),
    );
    expect(
      metricsTable()
        .split('\n')
        .filter((l) => l.startsWith('| `query_sync_')),
    ).toHaveLength(METRICS.length);
  });

  it('alerts.yml passes `promtool check rules`, and its unit tests (test/fixtures/monitoring) pass', () => {
    const check = spawnSync('promtool', ['check', 'rules', join(DOCS, 'alerts.yml')], { encoding: 'utf8' });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    const test = spawnSync('promtool', ['test', 'rules', 'test/fixtures/monitoring/alerts-test.yml'], {
      encoding: 'utf8',
    });
    expect(test.status, test.stdout + test.stderr).toBe(0);
  });

  it('the alerts and the dashboard use only metrics a run publishes', () => {
    const dashboard = read('grafana-dashboard.json');
    const parsed = JSON.parse(dashboard) as { panels: { targets: { expr: string }[] }[] };
    expect(parsed.panels.length).toBeGreaterThan(5);
    for (const [file, text] of [
      ['alerts.yml', read('alerts.yml')],
      ['grafana-dashboard.json', dashboard],
      ['monitoring.md', read('monitoring.md')],
    ] as const) {
      const names = namesIn(text);
      expect(names.length, file).toBeGreaterThan(3);
      expect(
        names.filter((n) => !NAMES.has(n)),
        `${file} names metrics no run publishes`,
      ).toEqual([]);
    }
  });
});
