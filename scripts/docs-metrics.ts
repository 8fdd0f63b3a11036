import { readFileSync, writeFileSync } from 'node:fs';
import { withMetricsTable } from './metrics-table.js';

/** `npm run docs:metrics`: rewrites the list of metrics in docs/monitoring.md from src/monitor/metric-list.ts. */
const path = new URL('../../docs/monitoring.md', import.meta.url);
const page = readFileSync(path, 'utf8');
const next = withMetricsTable(page);
if (next === page) process.stdout.write('docs/monitoring.md is up to date\n');
else {
  writeFileSync(path, next);
  process.stdout.write('docs/monitoring.md: the list of metrics rewritten from src/monitor/metric-list.ts\n');
}
