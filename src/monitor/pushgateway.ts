import { LAST_SUCCESS_METRIC } from './metrics.js';
import type { MonitorHttp, Sent } from './send.js';

/**
 * The Prometheus Pushgateway (https://github.com/prometheus/pushgateway): a run's metrics are PUT
 * to its group `job/<job>/instance/<instance>`, replacing the group whole, so nothing of an earlier
 * run is left beside them (a resource no longer synced, an old reconcile figure). The last
 * success is carried over by the run itself (`monitor.ts`), read back from the group when no
 * metrics file holds it.
 */

export interface PushgatewayTarget {
  readonly url: string;
  readonly job: string;
  readonly instance: string;
}

/** The group's URL; a value with a `/` (or empty) goes base64url-encoded, as the Pushgateway reads `label@base64`. */
export function groupUrl(t: PushgatewayTarget): string {
  const part = (label: string, value: string): string =>
    value === '' || value.includes('/')
      ? `${label}@base64/${Buffer.from(value).toString('base64url') || '='}`
      : `${label}/${encodeURIComponent(value)}`;
  return `${t.url}/metrics/${part('job', t.job)}/${part('instance', t.instance)}`;
}

/** Replace the group with `text` (Prometheus' text format). */
export function push(http: MonitorHttp, t: PushgatewayTarget, text: string, budgetMs?: number): Promise<Sent> {
  return http.send({
    method: 'PUT',
    url: groupUrl(t),
    body: text,
    contentType: 'text/plain; version=0.0.4; charset=utf-8',
    ...(budgetMs === undefined ? {} : { budgetMs }),
  });
}

/** The last success the group holds (ms), read from the Pushgateway's API; undefined when none or unreadable. */
export async function lastSuccessPushed(http: MonitorHttp, t: PushgatewayTarget): Promise<number | undefined> {
  const got = await http.send({ method: 'GET', url: `${t.url}/api/v1/metrics`, readBody: true });
  if (!got.ok || got.text === undefined) return undefined;
  try {
    const groups = (JSON.parse(got.text) as { data?: unknown }).data;
    if (!Array.isArray(groups)) return undefined;
    for (const g of groups as Record<string, { metrics?: { value?: string }[] } | Record<string, string>>[]) {
      const labels = g.labels as Record<string, string> | undefined;
      if (labels?.job !== t.job || labels.instance !== t.instance) continue;
      const family = g[LAST_SUCCESS_METRIC] as { metrics?: { value?: string }[] } | undefined;
      const seconds = Number(family?.metrics?.[0]?.value);
      return Number.isFinite(seconds) && seconds > 0 ? Math.round(seconds * 1000) : undefined;
    }
  } catch {
    // Not the Pushgateway's JSON: nothing carried over.
  }
  return undefined;
}
