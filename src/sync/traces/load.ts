import type { ResourceDefinition } from '../../core/types.js';
import type { RateLimits } from '../../http/scheduler/budget.js';
import type { StateDocument } from '../../state/store.js';

/**
 * Can per-event reads keep up? Each event queued costs one request on the traces'
 * endpoint, and that endpoint allows `maxRpm` a minute: 576,000 a day at 400. Where more events a
 * day are queued than that, the backlog only grows; `status`, `plan` and the run summary say so
 * with the daily deficit.
 *
 * The load is counted as events are queued, per UTC day of the event's own time (so a first sync
 * of 30 days counts 30 real days), kept in state for the last `KEEP_DAYS` days. The load reported
 * is the busiest complete day kept; with only today known, today's count so far (a lower bound).
 */

const DAY_MS = 86_400_000;
const MINUTES_PER_DAY = 1440;
/** Days of per-day counts kept in state. */
export const KEEP_DAYS = 8;

/** The state section of a per-event resource's daily load (its persisted name, kept for existing state). */
export const traceLoadSection = (resource: ResourceDefinition): string => `children-daily:${resource.name}`;

/** Events counted per UTC day (`YYYY-MM-DD`), across projects. */
type DailyCounts = Readonly<Record<string, number>>;

/** The state section: events queued per day, and how many of them showed traces by their fields (`--traces traced` would read those). */
export interface LoadSection {
  readonly queued: DailyCounts;
  readonly shown: DailyCounts;
}

/** `counts` plus the events of `ats` (epoch ms; 0 or NaN: unknown, not counted), keeping the last `KEEP_DAYS` days before `nowMs`. */
function addDailyCounts(counts: DailyCounts, ats: readonly number[], nowMs: number): DailyCounts {
  const next: Record<string, number> = { ...counts };
  for (const at of ats) {
    if (!(at > 0)) continue;
    const day = new Date(at).toISOString().slice(0, 10);
    next[day] = (next[day] ?? 0) + 1;
  }
  const oldest = new Date(nowMs - KEEP_DAYS * DAY_MS).toISOString().slice(0, 10);
  for (const day of Object.keys(next)) if (day < oldest) delete next[day];
  return next;
}

/** The section after queuing events at `ats`, of which those at `shownAts` show traces. */
export function addToLoad(
  section: LoadSection | undefined,
  ats: readonly number[],
  shownAts: readonly number[],
  nowMs: number,
): LoadSection {
  return {
    queued: addDailyCounts(section?.queued ?? {}, ats, nowMs),
    shown: addDailyCounts(section?.shown ?? {}, shownAts, nowMs),
  };
}

export interface TraceLoad {
  /** Events queued a day (the busiest complete day kept, else today so far). */
  readonly perDay: number;
  /** Whether `perDay` is today's partial count (a lower bound). */
  readonly partialDay: boolean;
  /** Per-event reads the endpoint's limit allows a day. */
  readonly capacityPerDay: number;
  /** `perDay − capacityPerDay` when positive: what the backlog grows by each day. */
  readonly deficitPerDay: number;
  /** Of `perDay`, the events whose fields showed traces (what `--traces traced` reads). */
  readonly shownPerDay: number;
}

/** The traces' daily load against its endpoint's daily capacity, or `undefined` when nothing was counted. */
export function traceLoad(
  doc: StateDocument,
  resource: ResourceDefinition,
  limits: Pick<RateLimits, 'maxRpm'>,
  nowMs: number,
): TraceLoad | undefined {
  const section = doc.sections[traceLoadSection(resource)] as LoadSection | undefined;
  const counts = section?.queued ?? {};
  const today = new Date(nowMs).toISOString().slice(0, 10);
  const complete = Object.entries(counts).filter(([day]) => day < today);
  const partialDay = complete.length === 0;
  const [day, perDay] = partialDay ? [today, counts[today] ?? 0] : complete.reduce((a, b) => (b[1] > a[1] ? b : a));
  if (perDay === 0) return undefined;
  const capacityPerDay = limits.maxRpm * MINUTES_PER_DAY;
  return {
    perDay,
    partialDay,
    capacityPerDay,
    deficitPerDay: Math.max(0, perDay - capacityPerDay),
    shownPerDay: section?.shown?.[day] ?? 0,
  };
}

/** Plan's note on `--traces traced`: the requests it would save, and what it costs. */
export function tracedSavingLine(resource: ResourceDefinition, load: TraceLoad | undefined): string | undefined {
  if (load === undefined) return undefined;
  const parent = resource.perParent?.parent ?? 'parent';
  const saved = load.perDay - load.shownPerDay;
  const share = Math.round((100 * load.shownPerDay) / load.perDay);
  return (
    `--traces traced would read the ${resource.name} of ${share} % of ${parent} (those whose ${resource.perParent?.shownBy.join(', ') ?? 'fields'} show a trace): ` +
    `${saved.toLocaleString('en-US')} fewer requests a day of ${load.perDay.toLocaleString('en-US')}${load.partialDay ? ' (today so far)' : ''}, ` +
    `but the ${resource.name} of the other ${parent} are never read`
  );
}

/** The line `status`, `plan` and the run summary print when the limit cannot keep up; `undefined` when it can. */
export function deficitLine(
  resource: ResourceDefinition,
  load: TraceLoad | undefined,
  limits: Pick<RateLimits, 'maxRpm'>,
): string | undefined {
  if (load === undefined || load.deficitPerDay === 0) return undefined;
  const parent = resource.perParent?.parent ?? 'parent';
  return (
    `${resource.name} cannot keep up: ${load.perDay.toLocaleString('en-US')} ${parent} a day${load.partialDay ? ' (today so far)' : ''} need one request each, ` +
    `and ${resource.path} allows ${load.capacityPerDay.toLocaleString('en-US')} a day (${limits.maxRpm}/min): the backlog grows by ` +
    `${load.deficitPerDay.toLocaleString('en-US')} a day. Use --traces traced (only events that show a trace) or --traces none, or ask the vendor for a higher limit`
  );
}
