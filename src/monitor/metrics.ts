import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';
import type { RunFigures } from './figures.js';
import { METRICS } from './metric-list.js';

/** The last success's metric: kept from run to run (`lastSuccessIn`). */
export const LAST_SUCCESS_METRIC = 'query_sync_last_success_timestamp_seconds';

/**
 * The run's figures in Prometheus' text format, made by prom-client. A registry of its own per
 * publication: the figures are whole each time, nothing accumulates between two.
 */
export async function metricsText(figures: RunFigures): Promise<string> {
  const { Registry, Counter, Gauge } = promClient();
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

/**
 * prom-client's registry, Counter and Gauge, loaded when a run first publishes metrics (the other
 * runs never load it), from their own files: its index also loads histograms, summaries, the
 * Pushgateway client, the default process metrics, cluster support and OpenTelemetry's API, which
 * cost 400-700 ms of a start on a busy two-core machine against 30-40 ms for these three (measured:
 * docs/benchmarks.md, monitoring). Its package has no `exports` map: these paths are its files.
 */
function promClient(): Pick<typeof PromClient, 'Registry' | 'Counter' | 'Gauge'> {
  const require = createRequire(import.meta.url);
  return {
    Registry: require('prom-client/lib/registry') as typeof PromClient.Registry,
    Counter: require('prom-client/lib/counter') as typeof PromClient.Counter,
    Gauge: require('prom-client/lib/gauge') as typeof PromClient.Gauge,
  };
}
