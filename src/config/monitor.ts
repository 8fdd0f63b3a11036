import { basename } from 'node:path';
import { parseDuration } from '../core/duration.js';
import { ConfigError } from '../core/errors.js';
import { splitList } from './values.js';
import { DEFAULT_MONITOR_TIMEOUT, DEFAULT_NOTIFY_ON, DEFAULT_PUSHGATEWAY_JOB, NOTIFY_KINDS } from './options.js';
import type { Reader } from './reader.js';
import type { BigQueryConfig } from './parts.js';

/** What `--notify-on` names. */
type NotifyKind = (typeof NOTIFY_KINDS)[number];

/**
 * A run's monitoring (docs/monitoring.md), as `src/monitor/` takes it: each mechanism present only
 * when asked for. The URLs are kept whole here and never logged whole (their paths carry tokens).
 */
export interface MonitorConfig {
  /** The warehouse's name, stable from run to run: the Pushgateway's default instance, and what notifications name. */
  readonly name: string;
  readonly metricsFile?: string;
  readonly pushgateway?: { readonly url: string; readonly job: string; readonly instance: string };
  readonly ping?: { readonly url: string; readonly exitCode: boolean };
  readonly notify?: { readonly url: string; readonly on: readonly NotifyKind[] };
  /** A stream whose mark lags now by more than this after the run is stale. */
  readonly maxLagMs?: number;
  /** The longest one push, ping or notification takes, its retry included. */
  readonly timeoutMs: number;
}

/** The monitoring settings, `undefined` when no mechanism is asked for (the run then loads none of it). */
export function resolveMonitor(
  read: Reader,
  warehouse: {
    readonly destination: 'duckdb' | 'bigquery';
    readonly duckdbPath: string;
    readonly bigquery?: BigQueryConfig;
  },
): MonitorConfig | undefined {
  const url = (flag: string): string | undefined => {
    const text = read.text(flag)?.trim();
    if (text === undefined || text === '') return undefined;
    let parsed: URL;
    try {
      parsed = new URL(text);
    } catch {
      // The value itself is not repeated: a webhook URL is a secret.
      throw new ConfigError(`${read.label(flag)}: expected an http(s) URL such as https://hc-ping.com/<uuid>`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
      throw new ConfigError(`${read.label(flag)}: expected http or https, got "${parsed.protocol}"`);
    return text.replace(/\/+$/, '');
  };
  const metricsFile = read.text('metrics-file');
  const pushgateway = url('pushgateway');
  const ping = url('ping-url');
  const notify = url('notify-url');
  const maxLagMs = read.duration('max-lag');
  if (maxLagMs !== undefined && maxLagMs <= 0)
    throw new ConfigError(`${read.label('max-lag')}: expected a positive duration such as 2h`);
  const timeoutMs = read.duration('monitor-timeout') ?? parseDuration(DEFAULT_MONITOR_TIMEOUT);
  if (timeoutMs <= 0)
    throw new ConfigError(`${read.label('monitor-timeout')}: expected a positive duration such as 5s`);
  if (metricsFile === undefined && pushgateway === undefined && ping === undefined && notify === undefined)
    return undefined;
  const on = splitList(read.text('notify-on') ?? DEFAULT_NOTIFY_ON);
  const unknown = on.filter((k) => !(NOTIFY_KINDS as readonly string[]).includes(k));
  if (unknown.length > 0)
    throw new ConfigError(
      `${read.label('notify-on')}: expected a comma-separated list of ${NOTIFY_KINDS.join(', ')}, got "${unknown.join(', ')}"`,
    );
  const name = warehouseName(warehouse);
  return {
    name,
    ...(metricsFile === undefined || metricsFile === '' ? {} : { metricsFile }),
    ...(pushgateway === undefined
      ? {}
      : {
          pushgateway: {
            url: pushgateway,
            job: read.text('pushgateway-job') ?? DEFAULT_PUSHGATEWAY_JOB,
            instance: read.text('pushgateway-instance') ?? name,
          },
        }),
    ...(ping === undefined ? {} : { ping: { url: ping, exitCode: read.bool('ping-exit-code') ?? false } }),
    ...(notify === undefined ? {} : { notify: { url: notify, on: on as NotifyKind[] } }),
    ...(maxLagMs === undefined ? {} : { maxLagMs }),
    timeoutMs,
  };
}

/**
 * A name for the warehouse that stays the same from run to run and host to host (a Kubernetes pod's
 * name changes every run, and would leave a Pushgateway group behind each time).
 */
function warehouseName(w: Parameters<typeof resolveMonitor>[1]): string {
  if (w.destination === 'bigquery' && w.bigquery !== undefined) return `${w.bigquery.projectId}.${w.bigquery.dataset}`;
  return basename(w.duckdbPath).replace(/\.duckdb$/, '') || 'warehouse';
}
