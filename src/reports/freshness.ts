/**
 * How fresh the warehouse is, and when each per-event backlog will be whole: the facts `status`
 * reads (state and the published copy's manifest, nothing else), a forecast of each backlog at the
 * configured budget, and one pure judgement of those facts against bounds (`evaluateFreshness`),
 * shared by `status --check` and any other caller that must say "stale" (a notification).
 */

const MINUTES_PER_DAY = 1440;

/** One sync stream: how far its rows are stored. */
export interface StreamFreshness {
  readonly resource: string;
  readonly project: string;
  /**
   * What the stream holds up to (ISO): its high-water mark, or, for a stream read whole each run or
   * one event at a time (no mark), the start of its last run when that run succeeded. `undefined`:
   * nothing proves it was ever read whole.
   */
  readonly asOf?: string;
  readonly lastRun?: { readonly at: string; readonly outcome: 'ok' | 'failed'; readonly error?: string };
}

/** A per-event resource's backlog (traces read one event at a time) and when it will be whole. */
export interface BacklogForecast {
  readonly resource: string;
  /** Events whose traces are still to read, across projects. */
  readonly pending: number;
  /** The budget the forecast assumes: requests a minute on the traces' endpoint (`--max-rpm`). */
  readonly ratePerMinute: number;
  /** Events queued a day (the busiest complete day kept, else today so far), when counted. */
  readonly arrivalsPerDay?: number;
  /** `arrivalsPerDay` is today's count so far (a lower bound). */
  readonly partialDay?: boolean;
  /**
   * Seconds until the backlog is empty reading at `ratePerMinute` while parents keep arriving at
   * `arrivalsPerDay`; `null`: never (they arrive faster than the budget reads them).
   */
  readonly wholeInSeconds: number | null;
  /** What the backlog grows by each day (0 when the budget keeps up). */
  readonly growthPerDay: number;
}

/** Everything `evaluateFreshness` judges. */
export interface FreshnessFacts {
  readonly nowMs: number;
  /** The published read copy (DuckDB); absent for a destination without one (BigQuery). */
  readonly published?: { readonly path: string; readonly asOf: string | null };
  readonly streams: readonly StreamFreshness[];
  readonly backlogs: readonly BacklogForecast[];
}

/** The bounds of `status --check`; a bound left out is not checked. */
export interface FreshnessBounds {
  /** Longest lag (now − as-of) of the published copy and of every stream. */
  readonly maxLagMs?: number;
  /** Longest forecast for a per-event backlog to be whole. */
  readonly maxBacklogEtaMs?: number;
}

export interface FreshnessBreach {
  readonly kind: 'published' | 'stream' | 'backlog';
  readonly resource: string;
  readonly project: string;
  /** The lag or the forecast in ms; `null`: unknown (never read) or never (a backlog that only grows). */
  readonly valueMs: number | null;
  readonly boundMs: number;
  /** One line: what, which project, the lag, the bound, what to do. */
  readonly line: string;
}

/** The forecast of a backlog of `pending` parents read at `ratePerMinute`, with `arrivalsPerDay` more arriving. */
export function forecastBacklog(
  resource: string,
  pending: number,
  ratePerMinute: number,
  arrivals?: { readonly perDay: number; readonly partialDay: boolean },
): BacklogForecast {
  const arrivingPerMinute = (arrivals?.perDay ?? 0) / MINUTES_PER_DAY;
  const net = ratePerMinute - arrivingPerMinute;
  const wholeInSeconds = pending <= 0 ? 0 : net <= 0 ? null : Math.ceil((pending / net) * 60);
  return {
    resource,
    pending,
    ratePerMinute,
    ...(arrivals === undefined ? {} : { arrivalsPerDay: arrivals.perDay, partialDay: arrivals.partialDay }),
    wholeInSeconds,
    growthPerDay: Math.max(0, Math.round(-net * MINUTES_PER_DAY)),
  };
}

/**
 * The forecast as a person reads it: "traces: 41,200 events waiting, whole in 1 h 43 min at
 * 400/min (12,000 events arrive a day)", or, where they arrive faster than the budget reads them,
 * "never whole at 400/min: at today's arrival rate the backlog grows by 180k a day: see docs/traces.md".
 */
export function forecastLine(f: BacklogForecast, parent = 'events'): string {
  const waiting = `${f.resource}: ${count(f.pending)} ${parent} waiting`;
  const arrivals =
    f.arrivalsPerDay === undefined
      ? ''
      : ` (${count(f.arrivalsPerDay)} ${parent} arrive a day${f.partialDay === true ? ', today so far' : ''})`;
  if (f.wholeInSeconds === null)
    return (
      `${waiting}, never whole at ${f.ratePerMinute}/min: at today's arrival rate the backlog grows by ` +
      `${short(f.growthPerDay)} a day: see docs/traces.md`
    );
  if (f.pending === 0) return `${f.resource}: whole, no ${parent} waiting${arrivals}`;
  return `${waiting}, whole in ${spoken(f.wholeInSeconds * 1000)} at ${f.ratePerMinute}/min${arrivals}`;
}

/**
 * The breaches of `facts` against `bounds`, one per resource and project that is behind: the
 * published copy older than `maxLagMs`, a stream whose as-of is older (or unknown), a backlog whose
 * forecast passes `maxBacklogEtaMs` (or never drains). Empty: all is well. Pure.
 */
export function evaluateFreshness(facts: FreshnessFacts, bounds: FreshnessBounds): FreshnessBreach[] {
  const out: FreshnessBreach[] = [];
  const { maxLagMs, maxBacklogEtaMs } = bounds;
  const lagOf = (iso: string | null | undefined): number | null =>
    iso === null || iso === undefined ? null : Math.max(0, facts.nowMs - Date.parse(iso));
  if (maxLagMs !== undefined && facts.published !== undefined) {
    const lag = lagOf(facts.published.asOf);
    if (lag === null || lag > maxLagMs)
      out.push({
        kind: 'published',
        resource: 'published copy',
        project: '*',
        valueMs: lag,
        boundMs: maxLagMs,
        line:
          lag === null
            ? `STALE published copy ${facts.published.path}: none yet (bound --max-lag ${spoken(maxLagMs)}): a sync publishes at its end; run query-sync sync, or query-sync publish`
            : `STALE published copy ${facts.published.path}: as of ${facts.published.asOf}, lag ${spoken(lag)} > --max-lag ${spoken(maxLagMs)}: ` +
              `is the sync still scheduled? Its last runs: query-sync status; query-sync publish publishes what the last run stored`,
      });
  }
  if (maxLagMs !== undefined && facts.streams.length === 0)
    out.push({
      kind: 'stream',
      resource: 'all resources',
      project: '*',
      valueMs: null,
      boundMs: maxLagMs,
      line: `STALE: no stream was ever synced in this state (bound --max-lag ${spoken(maxLagMs)}): run query-sync sync (are --state and --duckdb-path the sync's?)`,
    });
  if (maxLagMs !== undefined) {
    for (const s of facts.streams) {
      const lag = lagOf(s.asOf);
      if (lag !== null && lag <= maxLagMs) continue;
      const last =
        s.lastRun === undefined
          ? 'no run recorded'
          : `last run ${s.lastRun.at} ${s.lastRun.outcome}${s.lastRun.error === undefined ? '' : ` (${s.lastRun.error})`}`;
      const todo =
        s.lastRun?.outcome === 'failed'
          ? `fix what failed and run query-sync sync --resources ${s.resource}`
          : `run query-sync sync --resources ${s.resource} (is the schedule running?)`;
      out.push({
        kind: 'stream',
        resource: s.resource,
        project: s.project,
        valueMs: lag,
        boundMs: maxLagMs,
        line:
          lag === null
            ? `STALE ${s.resource} ${s.project}: never read whole (${last}; bound --max-lag ${spoken(maxLagMs)}): ${todo}`
            : `STALE ${s.resource} ${s.project}: stored up to ${s.asOf}, lag ${spoken(lag)} > --max-lag ${spoken(maxLagMs)} (${last}): ${todo}`,
      });
    }
  }
  if (maxBacklogEtaMs !== undefined) {
    for (const b of facts.backlogs) {
      const eta = b.wholeInSeconds === null ? null : b.wholeInSeconds * 1000;
      if (eta !== null && eta <= maxBacklogEtaMs) continue;
      out.push({
        kind: 'backlog',
        resource: b.resource,
        project: '*',
        valueMs: eta,
        boundMs: maxBacklogEtaMs,
        line:
          `BACKLOG ${forecastLine(b)}` +
          (eta === null ? '' : ` > --max-backlog-eta ${spoken(maxBacklogEtaMs)}`) +
          `: read fewer (--traces traced or none), or ask the vendor for a higher limit (docs/traces.md)`,
      });
    }
  }
  return out;
}

/** The one line of a check that found nothing behind. */
export function freshLine(facts: FreshnessFacts, bounds: FreshnessBounds): string {
  const lags = [
    ...(facts.published?.asOf == null ? [] : [facts.nowMs - Date.parse(facts.published.asOf)]),
    ...facts.streams.flatMap((s) => (s.asOf === undefined ? [] : [facts.nowMs - Date.parse(s.asOf)])),
  ];
  const worst = lags.length === 0 ? undefined : Math.max(0, ...lags);
  const never = facts.backlogs.some((b) => b.wholeInSeconds === null);
  const eta = Math.max(0, ...facts.backlogs.map((b) => b.wholeInSeconds ?? 0));
  const parts = [
    `${facts.streams.length} stream${facts.streams.length === 1 ? '' : 's'}`,
    ...(facts.published === undefined ? [] : ['the published copy']),
  ].join(' and ');
  return (
    `FRESH: ${parts} within ${bounds.maxLagMs === undefined ? 'no lag bound' : `--max-lag ${spoken(bounds.maxLagMs)}`}` +
    (worst === undefined ? '' : ` (oldest ${spoken(worst)})`) +
    (facts.backlogs.length === 0
      ? ''
      : `; backlog${facts.backlogs.length === 1 ? '' : 's'} ${never ? 'never whole' : `whole in ${spoken(eta * 1000)}`}` +
        (bounds.maxBacklogEtaMs === undefined ? '' : ` ≤ --max-backlog-eta ${spoken(bounds.maxBacklogEtaMs)}`))
  );
}

/** `1 h 43 min`, `12 min`, `40 s`, `2 d 3 h`: how a person says a duration. */
export function spoken(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const min = Math.round(s / 60);
  if (min < 60) return `${min} min`;
  const h = Math.floor(min / 60);
  if (h < 48) return min % 60 === 0 ? `${h} h` : `${h} h ${min % 60} min`;
  const d = Math.floor(h / 24);
  return h % 24 === 0 ? `${d} d` : `${d} d ${h % 24} h`;
}

const count = (n: number): string => n.toLocaleString('en-US');

/** `180k`, `1.2M`, `950`. */
function short(n: number): string {
  if (n >= 1_000_000) return `${Number((n / 1_000_000).toFixed(1))}M`;
  if (n >= 10_000) return `${Math.round(n / 1000)}k`;
  return count(n);
}
