/**
 * Closed-open time windows `[fromMs, toMs)`: the one place that makes, splits, merges and compares
 * them. Every read of a time-filtered resource is a window (a sync's `[mark − lookback, run start)`,
 * a backfill's slices, the sub-windows of a split walk), and what is finished is a set of windows
 * (Airbyte's concurrent cursor: the state is the set of finished slices; what is left is the gaps).
 *
 * Pure and import-free, so every stage (state, extract, pipeline, plan) can share one answer.
 * Bounds are integer milliseconds: a record at `t` belongs to the window with `fromMs ≤ t < toMs`,
 * so consecutive windows sharing a bound never both hold a record, and no record falls between them.
 */

/** A closed-open time window [fromMs, toMs) on the resource's cursor field. */
export interface TimeWindow {
  readonly fromMs: number;
  readonly toMs: number;
}

/** A window and how many records it holds (a count, or a timeseries bucket). */
export interface WindowCount {
  readonly window: TimeWindow;
  readonly count: number;
}

/** Whether `ms` lies in `window` (closed at the start, open at the end). */
export function inWindow(window: TimeWindow, ms: number): boolean {
  return ms >= window.fromMs && ms < window.toMs;
}

/** Whether `window` holds no instant at all. */
export function isEmptyWindow(window: TimeWindow): boolean {
  return !(window.toMs > window.fromMs);
}

export function sameWindow(a: TimeWindow, b: TimeWindow): boolean {
  return a.fromMs === b.fromMs && a.toMs === b.toMs;
}

/** Order by start, then by end. */
export function compareWindows(a: TimeWindow, b: TimeWindow): number {
  return a.fromMs - b.fromMs || a.toMs - b.toMs;
}

/** [from, to) cut into consecutive windows of `windowMs`, the last one shorter if need be. */
export function sliceWindows(fromMs: number, toMs: number, windowMs: number): TimeWindow[] {
  if (!(windowMs > 0)) throw new RangeError(`expected a positive window length, got ${windowMs}`);
  const out: TimeWindow[] = [];
  for (let start = fromMs; start < toMs; start += windowMs)
    out.push({ fromMs: start, toMs: Math.min(toMs, start + windowMs) });
  return out;
}

/**
 * The window a sync reads: `[mark − lookback, runStart)`, never before `startMs`; all history (or
 * from `startMs`) when there is no mark yet; `undefined` when the mark has reached the run start.
 */
export function syncWindow(
  markMs: number | undefined,
  options: { readonly runStartMs: number; readonly lookbackMs: number; readonly startMs?: number },
): TimeWindow | undefined {
  const toMs = options.runStartMs;
  const startMs = options.startMs ?? 0;
  if (markMs !== undefined) {
    if (markMs >= toMs) return undefined;
    return { fromMs: Math.max(startMs, markMs - options.lookbackMs), toMs };
  }
  return startMs < toMs ? { fromMs: startMs, toMs } : undefined;
}

/**
 * `window` cut into `parts` consecutive sub-windows of (nearly) equal length, on whole
 * milliseconds. Fewer parts when the window is shorter than `parts` ms (a 1-ms window is one
 * part); none when it is empty. The sub-windows cover the window exactly.
 */
export function splitByTime(window: TimeWindow, parts: number): TimeWindow[] {
  assertParts(parts);
  if (isEmptyWindow(window)) return [];
  const length = window.toMs - window.fromMs;
  const n = Math.max(1, Math.min(Math.floor(parts), length));
  const cuts: number[] = [];
  for (let i = 1; i < n; i += 1) cuts.push(window.fromMs + Math.floor((length * i) / n));
  return fromCuts(window, cuts);
}

/**
 * `window` cut into at most `parts` consecutive sub-windows holding about the same number of
 * records, given the counts of consecutive windows that cover it (a timeseries' buckets, or counts
 * of a finer time split). Inside a bucket, records are taken as spread evenly over its time, so a
 * cut may fall inside one; cuts are whole milliseconds. Where the counts say nothing (no records
 * anywhere, or buckets that do not cover the window), it falls back to `splitByTime` for that
 * stretch: a wrong count costs balance, never coverage: the sub-windows always cover the window
 * exactly, without overlap.
 */
export function splitByCounts(window: TimeWindow, parts: number, counts: readonly WindowCount[]): TimeWindow[] {
  assertParts(parts);
  if (isEmptyWindow(window)) return [];
  // Clip the buckets to the window (a bucket's records are spread evenly, so clipping scales its count).
  const buckets: WindowCount[] = [];
  for (const c of [...counts].sort((a, b) => compareWindows(a.window, b.window))) {
    const from = Math.max(window.fromMs, c.window.fromMs);
    const to = Math.min(window.toMs, c.window.toMs);
    if (!(to > from) || !(c.count > 0) || !Number.isFinite(c.count)) continue;
    const share = (to - from) / (c.window.toMs - c.window.fromMs);
    buckets.push({ window: { fromMs: from, toMs: to }, count: c.count * share });
  }
  const total = buckets.reduce((n, b) => n + b.count, 0);
  if (total === 0) return splitByTime(window, parts);
  const n = Math.max(1, Math.min(Math.floor(parts), window.toMs - window.fromMs));
  const cuts: number[] = [];
  let before = 0;
  let next = 1;
  for (const b of buckets) {
    while (next < n && before + b.count >= (total * next) / n) {
      const within = ((total * next) / n - before) / b.count;
      const at = b.window.fromMs + Math.round(within * (b.window.toMs - b.window.fromMs));
      const previous = cuts[cuts.length - 1] ?? window.fromMs;
      // Whole ms, strictly increasing, inside the window: a heavy instant cannot be split further.
      if (at > previous && at < window.toMs) cuts.push(at);
      next += 1;
    }
    before += b.count;
  }
  return fromCuts(window, cuts);
}

/**
 * Like `splitByCounts`, for exact counts (the resource's own timeseries) and a walk that reads
 * `pageSize` records a page: each cut is a bucket edge near its share of the records, chosen so the
 * sub-window before it holds as nearly a whole number of pages as the edges allow. Every sub-window
 * ends with a partial page, so cuts anywhere would cost about one request per sub-window; cuts at
 * whole pages cost none. The sub-windows cover the window exactly, whatever the counts say.
 *
 * With `rᵢ` the records before cut `i` modulo `pageSize` (`r₀ = 0`, the last the total's), the
 * sub-windows read `⌊total / pageSize⌋` pages plus one for every rise `rᵢ > rᵢ₋₁`. Taking at each
 * cut the least waste (the highest remainder not above the last, else the highest) keeps the
 * remainders as high as they can be for the cuts after, so rises are rare (one when no candidate
 * edge is at or below the last remainder).
 * When the total is a whole number of pages, that is none only if every cut is on a whole page,
 * which hour buckets of ~100 records rarely allow: `planSplit` asks finer buckets there.
 *
 * Cuts stay within a share `size / 8` of their target; `wholeWithin` (a share of a sub-window's
 * records, at least 1/8) lets a cut that wastes nothing stray further when none that near does:
 * where a page past a minute's budget costs a minute, a page saved is worth a less even split.
 */
export function splitIntoPages(
  window: TimeWindow,
  parts: number,
  counts: readonly WindowCount[],
  pageSize: number,
  wholeWithin = 1 / 8,
): TimeWindow[] {
  assertParts(parts);
  if (isEmptyWindow(window)) return [];
  const edges: { ms: number; before: number }[] = [];
  let total = 0;
  for (const c of [...counts].sort((a, b) => compareWindows(a.window, b.window))) {
    const from = Math.max(window.fromMs, c.window.fromMs);
    const to = Math.min(window.toMs, c.window.toMs);
    if (!(to > from) || !(c.count > 0) || !Number.isFinite(c.count)) continue;
    total += c.count;
    if (to < window.toMs) edges.push({ ms: to, before: total });
  }
  if (total === 0) return splitByTime(window, parts);
  const n = Math.max(1, Math.min(Math.floor(parts), window.toMs - window.fromMs));
  const size = total / n;
  const waste = (records: number): number => (pageSize - (records % pageSize)) % pageSize;
  const cuts: number[] = [];
  let prevMs = window.fromMs;
  let prevBefore = 0;
  for (let i = 1; i < n; i += 1) {
    const target = size * i;
    const open = edges.filter((e) => e.ms > prevMs && e.before > prevBefore && e.before < total);
    if (open.length === 0) break;
    const near = open.filter((e) => Math.abs(e.before - target) <= size / 8);
    const nearest = (
      edges: readonly (typeof open)[number][],
      key: (x: (typeof open)[number]) => [number, number],
    ): (typeof open)[number] =>
      edges.reduce((best, e) => {
        const [a1, a2] = key(e);
        const [b1, b2] = key(best);
        return a1 < b1 || (a1 === b1 && a2 < b2) ? e : best;
      });
    const distance = (x: (typeof open)[number]): [number, number] => [Math.abs(x.before - target), 0];
    let pick =
      near.length > 0
        ? nearest(near, (x) => [waste(x.before - prevBefore), Math.abs(x.before - target)])
        : nearest(open, distance);
    if (near.length > 0 && waste(pick.before - prevBefore) > 0) {
      const whole = open.filter(
        (e) => waste(e.before - prevBefore) === 0 && Math.abs(e.before - target) <= size * Math.max(1 / 8, wholeWithin),
      );
      if (whole.length > 0) pick = nearest(whole, distance);
    }
    cuts.push(pick.ms);
    prevMs = pick.ms;
    prevBefore = pick.before;
  }
  return fromCuts(window, cuts);
}

/**
 * Pages the sub-windows `parts` of a split cost, read `pageSize` records a page, by the exact
 * `counts` (records spread evenly inside a bucket a cut falls in): what `splitIntoPages` minimises.
 */
export function splitPages(parts: readonly TimeWindow[], counts: readonly WindowCount[], pageSize: number): number {
  let pages = 0;
  for (const part of parts) {
    let records = 0;
    for (const c of counts) {
      const from = Math.max(part.fromMs, c.window.fromMs);
      const to = Math.min(part.toMs, c.window.toMs);
      if (to > from) records += (c.count * (to - from)) / (c.window.toMs - c.window.fromMs);
    }
    pages += Math.ceil(Math.round(records * 1e6) / 1e6 / pageSize);
  }
  return pages;
}

/**
 * Split `window` into `parts` sub-windows of about equal records, using `count` (one request each,
 * e.g. `/v1/events/count`) on a finer time split of `parts × resolution` slices. The counts are asked
 * at once; the caller's scheduler paces them.
 */
export async function splitBalanced(
  window: TimeWindow,
  parts: number,
  count: (window: TimeWindow) => Promise<number>,
  resolution = 4,
): Promise<TimeWindow[]> {
  assertParts(parts);
  if (parts <= 1 || isEmptyWindow(window)) return splitByTime(window, parts);
  const slices = splitByTime(window, Math.max(1, Math.floor(parts * resolution)));
  const counts = await Promise.all(slices.map(async (w) => ({ window: w, count: await count(w) })));
  return splitByCounts(window, parts, counts);
}

/**
 * Where the records of `window` lie, from few counts: the counts of suffixes `[toMs − L·2^k, toMs)`,
 * doubling from `L = length / 2^levels`, until a suffix holds all `total` records (or is the whole
 * window). Their differences are consecutive buckets for `splitByCounts`: fine near the end, where
 * data is newest and usually densest, coarse further back. A first sync's window starts at the
 * epoch, decades before the first record; an even time split of it would put nearly every
 * sub-window where there is nothing, and this finds the data in about `log2(span / data)` counts,
 * plus `refine` halvings of the oldest bucket that holds records.
 */
export async function suffixCounts(
  window: TimeWindow,
  total: number,
  count: (window: TimeWindow) => Promise<number>,
  levels = 10,
  refine = 3,
): Promise<WindowCount[]> {
  if (isEmptyWindow(window) || !(total > 0)) return [];
  const length = window.toMs - window.fromMs;
  let span = Math.max(1, Math.floor(length / 2 ** levels));
  const buckets: WindowCount[] = [];
  let inner = window.toMs;
  let seen = 0;
  for (;;) {
    const from = Math.max(window.fromMs, window.toMs - span);
    const n = from === window.fromMs ? total : await count({ fromMs: from, toMs: window.toMs });
    buckets.push({ window: { fromMs: from, toMs: inner }, count: Math.max(0, n - seen) });
    seen = Math.max(seen, n);
    inner = from;
    if (from === window.fromMs) break;
    if (n >= total) {
      // Nothing lies before: say so, so the buckets cover the window.
      buckets.push({ window: { fromMs: window.fromMs, toMs: from }, count: 0 });
      break;
    }
    span *= 2;
  }
  buckets.reverse();
  // The oldest bucket with records is the coarsest guess of where the data starts: halve it a few
  // times (one count each), so no sub-window is cut where there is nothing.
  for (let i = 0; i < refine; i += 1) {
    const at = buckets.findIndex((b) => b.count > 0);
    const oldest = buckets[at];
    if (oldest === undefined || oldest.window.toMs - oldest.window.fromMs < 2) break;
    const mid = oldest.window.fromMs + Math.floor((oldest.window.toMs - oldest.window.fromMs) / 2);
    const newer = Math.min(oldest.count, await count({ fromMs: mid, toMs: oldest.window.toMs }));
    buckets.splice(
      at,
      1,
      { window: { fromMs: oldest.window.fromMs, toMs: mid }, count: oldest.count - newer },
      { window: { fromMs: mid, toMs: oldest.window.toMs }, count: newer },
    );
  }
  return buckets;
}

/** Sorted, non-overlapping, adjacent ones joined; empty windows dropped. */
export function mergeWindows(windows: readonly TimeWindow[]): TimeWindow[] {
  const sorted = windows.filter((w) => !isEmptyWindow(w)).sort(compareWindows);
  const out: { fromMs: number; toMs: number }[] = [];
  for (const w of sorted) {
    const last = out[out.length - 1];
    if (last !== undefined && w.fromMs <= last.toMs) last.toMs = Math.max(last.toMs, w.toMs);
    else out.push({ fromMs: w.fromMs, toMs: w.toMs });
  }
  return out;
}

/** The parts of `from` not covered by `minus`. */
export function subtractWindows(from: readonly TimeWindow[], minus: readonly TimeWindow[]): TimeWindow[] {
  const cut = mergeWindows(minus);
  const out: TimeWindow[] = [];
  for (const w of mergeWindows(from)) {
    let start = w.fromMs;
    for (const c of cut) {
      if (c.toMs <= start || c.fromMs >= w.toMs) continue;
      if (c.fromMs > start) out.push({ fromMs: start, toMs: c.fromMs });
      start = Math.max(start, c.toMs);
      if (start >= w.toMs) break;
    }
    if (start < w.toMs) out.push({ fromMs: start, toMs: w.toMs });
  }
  return out;
}

/** What of `window` the finished windows leave to read (Airbyte's "gaps after the finished slices"). */
export function gapsOf(window: TimeWindow, finished: readonly TimeWindow[]): TimeWindow[] {
  return subtractWindows([window], finished);
}

/** Whether `window` lies wholly inside the finished windows (however they were sliced). */
export function isCovered(window: TimeWindow, finished: readonly TimeWindow[]): boolean {
  return gapsOf(window, finished).length === 0;
}

/**
 * The end of the finished stretch that starts at `fromMs`: everything in [fromMs, result) is
 * finished. A mark may move there, and no further, however many later sub-windows are done.
 */
export function finishedThrough(fromMs: number, finished: readonly TimeWindow[]): number {
  let end = fromMs;
  for (const w of mergeWindows(finished)) {
    if (w.fromMs > end) break;
    end = Math.max(end, w.toMs);
  }
  return end;
}

function fromCuts(window: TimeWindow, cuts: readonly number[]): TimeWindow[] {
  const bounds = [window.fromMs, ...cuts, window.toMs];
  const out: TimeWindow[] = [];
  for (let i = 1; i < bounds.length; i += 1) out.push({ fromMs: bounds[i - 1] as number, toMs: bounds[i] as number });
  return out;
}

function assertParts(parts: number): void {
  if (!(parts >= 1) || !Number.isFinite(parts)) throw new RangeError(`expected at least one part, got ${parts}`);
}
