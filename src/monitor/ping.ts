/**
 * Pings in the healthchecks.io convention (https://healthchecks.io/docs/http_api/), which Cronitor,
 * Better Stack and others accept: `URL/start` when a run starts, `URL` when it succeeds, `URL/fail`
 * on any other end, or with `--ping-exit-code` `URL/<exit code>` (`URL/0` a success). Each carries
 * the run's id (`rid`), so the service pairs a run's start with its end even when two overlap.
 */

export type PingEnd = { readonly start: true } | { readonly exitCode: number };

/** The URL of one ping: the suffix goes after the path, before any query the URL has. */
export function pingUrl(base: string, end: PingEnd, exitCodeMode: boolean, runId: string): string {
  const url = new URL(base);
  const suffix = 'start' in end ? 'start' : exitCodeMode ? String(end.exitCode) : end.exitCode === 0 ? '' : 'fail';
  if (suffix !== '') url.pathname = `${url.pathname.replace(/\/+$/, '')}/${suffix}`;
  url.searchParams.set('rid', runId);
  return url.toString();
}

/** The body of an end ping: the summary's last lines (healthchecks.io keeps the first 100 kB; this stays far below). */
export function pingBody(lines: readonly string[], maxChars = 10_000): string {
  const text = lines.slice(-30).join('\n');
  return text.length <= maxChars ? text : `…${text.slice(-maxChars)}`;
}
