/**
 * The floor of the rate limits: the least time in which the limits allow a given number of requests
 * per endpoint. Pure, so `plan`, progress ETAs and the pacing benchmarks share one answer.
 *
 * Model (spec, section Limits; the same sliding windows the emulator enforces): a request started at
 * `t` counts in a window of length `w` while `t > now − w`, so it frees its place at `t + w`.
 * Requests take no time and may start together (40 at one instant is within 40 per second). The
 * result is the start time of the last request of the earliest schedule: with 800 requests to one
 * endpoint at 400/min and 40/s, 40 start at each of 0, 1, …, 9 s, the 401st at 60 s, the 800th at
 * 69 s. Requests are placed greedily, each at the earliest instant the limits allow, taking on a tie
 * the endpoint with the most requests left (the one that bounds the end). For one endpoint this is
 * optimal; across endpoints the per-minute windows are independent and only the per-second window
 * is shared, where filling the busiest endpoint first is what shortens the end.
 */

import { SEARCH_ENDPOINT, type RateLimits } from './budget.js';

const MINUTE_MS = 60_000;
const SECOND_MS = 1_000;

interface Lane {
  readonly endpoint: string;
  readonly total: number;
  readonly perMinute: number;
  readonly isSearch: boolean;
  /** Start times (ms) of this endpoint's requests placed so far. */
  readonly starts: Float64Array;
  placed: number;
}

/**
 * Least time, in seconds, in which `limits` allow `requestsByEndpoint[e]` requests to each endpoint
 * `e` (a path template such as `/v1/events`; `/v1/events/search` gets the search limits). 0 when
 * every request may start at once; non-positive and non-finite counts are ignored (rounded up
 * otherwise).
 */
export function minimumSeconds(
  requestsByEndpoint: Readonly<Record<string, number>>,
  limits: RateLimits,
  /**
   * Lengthen the windows as the scheduler does (`DEFAULT_SAFETY_MARGINS`), to see how much of a
   * run's time the margins cost. @default none: the floor of the limits themselves
   */
  marginsMs: { readonly minuteMs: number; readonly secondMs: number } = { minuteMs: 0, secondMs: 0 },
): number {
  const minuteMs = MINUTE_MS + marginsMs.minuteMs;
  const secondMs = SECOND_MS + marginsMs.secondMs;
  const lanes: Lane[] = [];
  for (const [endpoint, raw] of Object.entries(requestsByEndpoint)) {
    if (!Number.isFinite(raw) || raw <= 0) continue;
    const total = Math.ceil(raw);
    const isSearch = endpoint === SEARCH_ENDPOINT;
    lanes.push({
      endpoint,
      total,
      perMinute: isSearch ? limits.searchRpm : limits.maxRpm,
      isSearch,
      starts: new Float64Array(total),
      placed: 0,
    });
  }
  const total = lanes.reduce((n, lane) => n + lane.total, 0);
  if (total === 0) return 0;
  const perSecond = Math.max(1, Math.floor(limits.maxRps));
  const gate = Math.max(1, Math.floor(limits.searchGateRps));
  /** Start times of every request placed so far, non-decreasing. */
  const all = new Float64Array(total);
  let placed = 0;
  let last = 0;

  const earliest = (lane: Lane): number => {
    let t = last;
    const perMinute = Math.max(1, Math.floor(lane.perMinute));
    if (lane.placed >= perMinute) t = Math.max(t, (lane.starts[lane.placed - perMinute] ?? 0) + minuteMs);
    if (placed >= perSecond) t = Math.max(t, (all[placed - perSecond] ?? 0) + secondMs);
    // A search starts only while fewer than `gate` requests started in the last second.
    if (lane.isSearch && placed >= gate) t = Math.max(t, (all[placed - gate] ?? 0) + secondMs);
    return t;
  };

  while (placed < total) {
    let best: Lane | undefined;
    let bestAt = Number.POSITIVE_INFINITY;
    for (const lane of lanes) {
      if (lane.placed === lane.total) continue;
      const at = earliest(lane);
      const left = lane.total - lane.placed;
      if (at < bestAt || (at === bestAt && best !== undefined && left > best.total - best.placed)) {
        best = lane;
        bestAt = at;
      }
    }
    if (best === undefined) break;
    best.starts[best.placed] = bestAt;
    best.placed += 1;
    all[placed] = bestAt;
    placed += 1;
    last = bestAt;
  }
  return last / 1000;
}
