import type { MarkFigures } from './figures.js';

/**
 * The streams whose data is older than `maxLagMs`: the mark (every record before it is stored) lags
 * now by more. One small function on purpose: the freshness check `status --check` evaluates (the
 * published copy, the marks, the backlog's forecast) is the fuller rule, and this is the place to
 * point at it.
 */
export function staleStreams(
  marks: readonly MarkFigures[],
  nowMs: number,
  maxLagMs: number | undefined,
): { readonly resource: string; readonly project: string; readonly lagMs: number; readonly markMs: number }[] {
  if (maxLagMs === undefined) return [];
  return marks
    .map((m) => ({ ...m, lagMs: nowMs - m.markMs }))
    .filter((m) => m.lagMs > maxLagMs)
    .map(({ resource, project, lagMs, markMs }) => ({ resource, project, lagMs, markMs }));
}
