import type { RunFigures } from './figures.js';
import { METRICS } from './metric-list.js';

/** The last success's metric: kept from run to run (`lastSuccessIn`). */
export const LAST_SUCCESS_METRIC = 'query_sync_last_success_timestamp_seconds';

/**
 * The run's figures in Prometheus' text format, made by prom-client (loaded here, when a run has
 * metrics to publish: the other runs never load it). A registry of its own per publication: the
 * figures are whole each time, nothing accumulates between two.
 */
export async function metricsText(figures: RunFigures): Promise<string> {
  const loaded = await import('prom-client');
  // Bundled (dist/bin/cli.js), the CommonJS package comes as its `default`; from node_modules, by name.
  const { Registry, Counter, Gauge } =
    'Registry' in loaded ? loaded : (loaded as unknown as { readonly default: typeof loaded }).default;
  const registry = new Registry();
  for (const spec of METRICS) {
    const samples = spec.samples(figures);
    if (samples.length === 0) continue;
    const options = { name: spec.name, help: spec.help, labelNames: [...spec.labels], registers: [registry] };
    if (spec.type === 'counter') {
      const counter = new Counter(options);
      for (const s of samples) counter.inc({ ...s.labels }, s.value);
    } else {
      const gauge = new Gauge(options);
      for (const s of samples) gauge.set({ ...s.labels }, s.value);
    }
  }
  return registry.metrics();
}

/** The last success's time (ms) in a metrics text (a previous `--metrics-file`), when it holds one. */
export function lastSuccessIn(text: string): number | undefined {
  const line = new RegExp(`^${LAST_SUCCESS_METRIC}(?:\\{[^}]*\\})? ([0-9.e+]+)\\s*$`, 'm').exec(text);
  const seconds = line === null ? Number.NaN : Number(line[1]);
  return Number.isFinite(seconds) && seconds > 0 ? Math.round(seconds * 1000) : undefined;
}
