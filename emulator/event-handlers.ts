/**
 * `/v1/events` and its search, count, timeseries, facets and single-record endpoints.
 */

import type { JsonValue } from './types.js';
import type { EventEntry, JsonObject } from './entries.js';
import { type Handler, type RequestContext, allOf, getById, listBody } from './handler-context.js';
import {
  badRequest,
  optional,
  parseCursor,
  parseKeyedFilters,
  parseLimit,
  parseOrderBy,
  parseStringFilter,
  parseTimeWindow,
  type KeyedFilter,
} from './params.js';
import { count, scan, walk } from './sorted-list.js';

/** Page sizes. Source: field notes ("default 25, maximum 100 on most lists"). */
export const DEFAULT_PAGE_SIZE = 25;
export const MAX_PAGE_SIZE = 100;
const DEFAULT_FACET_LIMIT = 20;
/** Search refuses wider windows; semantic search only covers this much. Source: field notes. */
const SEARCH_MAX_WINDOW_MS = 14 * 86_400_000;
const SEARCH_FIELDS = ['user_input', 'assistant_output'] as const;
type SearchField = (typeof SEARCH_FIELDS)[number];
const INTERVALS = ['minute', 'hour', 'day', 'week', 'month'] as const;
type Interval = (typeof INTERVALS)[number];
/** The SDK's facet fields; `signal_id` is the field notes' name for `signal`, also accepted. */
const FACET_FIELDS = ['event_name', 'user_id', 'signal'] as const;
type FacetField = (typeof FACET_FIELDS)[number];
const COUNT_BY = ['event_id', 'user_id', 'convo_id'] as const;
type CountBy = (typeof COUNT_BY)[number];

type Predicate = (event: EventEntry) => boolean;

/**
 * Filters `user_id`, `event_name`, `convo_id` (each also `[eq|neq|startsWith|endsWith|contains]`),
 * `signal` (`[eq|neq]`), `signal_group`, `properties[key]` and `traits[key]` (each also
 * `[eq|neq|gt|gte|lt|lte]`); undefined if none. Signals are matched only once the event is
 * enriched, as its `signals` field is served.
 */
function eventPredicate(context: RequestContext): Predicate | undefined {
  const { params, store, now } = context;
  const checks: Predicate[] = [];
  const userId = parseStringFilter(params, 'user_id');
  const eventName = parseStringFilter(params, 'event_name');
  const convoId = parseStringFilter(params, 'convo_id');
  // `signal` / `signal[eq]`: the event matched that signal; `signal[neq]`: it did not.
  parseStringFilter(params, 'signal', ['eq', 'neq']);
  const signalEq = [optional(params, 'signal'), optional(params, 'signal[eq]')].filter((v) => v !== undefined);
  const signalNeq = optional(params, 'signal[neq]');
  const group = optional(params, 'signal_group');
  if (userId) checks.push((e) => userId(e.userId));
  if (eventName) checks.push((e) => eventName(e.eventName));
  if (convoId) checks.push((e) => convoId(e.convoId));
  if (signalEq.length > 0 || signalNeq !== undefined) {
    checks.push((e) => {
      const ids = store.isEnriched(e, now) ? e.signalIds : [];
      return signalEq.every((id) => ids.includes(id)) && (signalNeq === undefined || !ids.includes(signalNeq));
    });
  }
  if (group !== undefined) {
    checks.push((e) => {
      if (!store.isEnriched(e, now)) return false;
      const project = store.project(e.project);
      const members = project?.signalIdsByGroup.get(group);
      return members !== undefined && e.signalIds.some((id) => members.has(id));
    });
  }
  for (const filter of parseKeyedFilters(params, 'properties')) {
    checks.push((e) => valueMatches(e.properties, filter));
  }
  for (const filter of parseKeyedFilters(params, 'traits')) {
    checks.push((e) => valueMatches(store.project(e.project)?.generator.traits(e.userId) ?? {}, filter));
  }
  return allOf(checks);
}

/** Whether `object[filter.key]` (a dotted key reaches into nested objects) passes the filter. */
export function valueMatches(object: JsonObject, filter: KeyedFilter): boolean {
  const { key, op, value: expected } = filter;
  let value: JsonValue | undefined = object[key];
  if (value === undefined && key.includes('.')) {
    value = object;
    for (const part of key.split('.')) {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) return op === 'neq';
      value = (value as JsonObject)[part];
      if (value === undefined) return op === 'neq';
    }
  }
  if (value === undefined || (value !== null && typeof value === 'object')) return op === 'neq';
  switch (op) {
    case 'eq':
      return String(value) === expected;
    case 'neq':
      return String(value) !== expected;
    default: {
      const actual = typeof value === 'number' ? value : Number.NaN;
      const bound = Number(expected);
      if (!Number.isFinite(actual) || expected.trim() === '' || !Number.isFinite(bound)) return false;
      if (op === 'gt') return actual > bound;
      if (op === 'gte') return actual >= bound;
      if (op === 'lt') return actual < bound;
      return actual <= bound;
    }
  }
}

export const listEvents: Handler = (context) => {
  const { params } = context;
  const cursor = parseCursor(params, 'events');
  const direction = cursor?.direction ?? parseOrderBy(params, context.order);
  const limit = parseLimit(params, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
  const window = parseTimeWindow(params);
  const filter = eventPredicate(context);
  const unlisted = context.unlistedEvents;
  const predicate: Predicate | undefined =
    unlisted === undefined
      ? filter
      : (e) => !(e.sortKey >= unlisted.fromMs && e.sortKey < unlisted.toMs) && (filter === undefined || filter(e));
  const page = walk({
    lists: context.projects.map((p) => p.events),
    direction,
    lower: window.lower,
    upper: window.upper,
    after: cursor?.position,
    predicate,
    limit,
  });
  return listBody(context, 'events', direction, page, (e) => context.store.eventAt(e, context.now));
};

export const getEvent: Handler = (context) =>
  getById(
    context,
    (p) => p.eventsById,
    'event',
    (e) => context.store.eventAt(e, context.now),
  );

export const searchEvents: Handler = (context) => {
  const { params, now } = context;
  const query = optional(params, 'query');
  if (query === undefined) throw badRequest('query is required', 'query');
  const mode = params.get('mode') ?? 'text';
  if (mode !== 'text' && mode !== 'semantic' && mode !== 'regex') {
    throw badRequest(`mode must be text, semantic or regex, got "${mode}"`, 'mode', {
      allowed: ['text', 'semantic', 'regex'],
    });
  }
  const fields = parseSearchIn(params.get('search_in'));
  const window = parseTimeWindow(params);
  if (!window.hasGte || window.lower === undefined)
    throw badRequest('timestamp[gte] is required for search', 'timestamp[gte]');
  const upper = window.upper ?? now;
  if (upper - window.lower > SEARCH_MAX_WINDOW_MS) {
    throw badRequest('The search window is wider than 14 days; narrow timestamp[gte]/timestamp[lt]', 'timestamp[gte]', {
      code: 'window_too_wide',
    });
  }
  const lower = mode === 'semantic' ? Math.max(window.lower, now - SEARCH_MAX_WINDOW_MS) : window.lower;
  const occurrences = matcher(mode, query, context);
  const scores = new Map<EventEntry, number>();
  const matches: Predicate = (e) => {
    let hits = 0;
    for (const field of fields) hits += occurrences(field === 'user_input' ? e.userInput : e.assistantOutput);
    if (hits === 0) return false;
    scores.set(e, Math.round((1000 * hits) / (hits + 1)) / 1000);
    return true;
  };
  const filters = eventPredicate(context);
  const cursor = parseCursor(params, 'events');
  const direction = cursor?.direction ?? parseOrderBy(params, context.order);
  const page = walk({
    lists: context.projects.map((p) => p.events),
    direction,
    lower,
    upper: window.upper,
    after: cursor?.position,
    predicate: filters ? (e) => filters(e) && matches(e) : matches,
    limit: parseLimit(params, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE),
  });
  return listBody(context, 'events', direction, page, (e) => ({
    ...context.store.eventAt(e, context.now),
    relevance_score: scores.get(e) ?? 0,
  }));
};

function parseSearchIn(raw: string | null): readonly SearchField[] {
  if (raw === null || raw.trim() === '') return SEARCH_FIELDS;
  const fields = raw.split(',').map((f) => f.trim());
  for (const field of fields) {
    if (!(SEARCH_FIELDS as readonly string[]).includes(field)) {
      throw badRequest(`search_in accepts ${SEARCH_FIELDS.join(', ')}; got "${field}"`, 'search_in', {
        allowed: SEARCH_FIELDS,
      });
    }
  }
  return fields as SearchField[];
}

/** Counts occurrences of the query in a text: case-insensitive substring, or a RegExp. */
function matcher(
  mode: 'text' | 'semantic' | 'regex',
  query: string,
  context: RequestContext,
): (text: string) => number {
  if (mode === 'regex') {
    let pattern: RegExp;
    try {
      pattern = new RegExp(query, 'gi');
    } catch (error) {
      throw badRequest(`query is not a valid regular expression: ${(error as Error).message}`, 'query');
    }
    return (text) => text.match(pattern)?.length ?? 0;
  }
  const needle = query.toLowerCase();
  return (text) => {
    const haystack = context.store.lowerCase(text);
    let hits = 0;
    for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + needle.length)) hits++;
    return hits;
  };
}

/**
 * The events a count includes: those `predicate` keeps, less those indexed within the store's count
 * lag (a rollup that trails the list, `EmulatorOptions.countLagMs`).
 */
function counted(context: RequestContext, predicate: Predicate | undefined): Predicate | undefined {
  const { store, now } = context;
  if (store.countLagMs === 0) return predicate;
  return (e) => store.isCounted(e, now) && (predicate === undefined || predicate(e));
}

/** `count_by` (`event_id` | `user_id` | `convo_id`): count events, or distinct users or conversations. */
function parseCountBy(params: URLSearchParams): CountBy {
  const raw = optional(params, 'count_by') ?? 'event_id';
  if (!(COUNT_BY as readonly string[]).includes(raw)) {
    throw badRequest(`count_by must be one of ${COUNT_BY.join(', ')}; got "${raw}"`, 'count_by', { allowed: COUNT_BY });
  }
  return raw as CountBy;
}

/** A counter of events, or of distinct users or conversations among them. */
function counter(countBy: CountBy): { add: (e: EventEntry) => void; total: () => number } {
  if (countBy === 'event_id') {
    let n = 0;
    return { add: () => void n++, total: () => n };
  }
  const seen = new Set<string>();
  return {
    add: (e) => void seen.add(`${e.project}|${countBy === 'user_id' ? e.userId : e.convoId}`),
    total: () => seen.size,
  };
}

export const countEvents: Handler = (context) => {
  const window = parseTimeWindow(context.params);
  const countBy = parseCountBy(context.params);
  const lists = context.projects.map((p) => p.events);
  const predicate = counted(context, eventPredicate(context));
  if (countBy === 'event_id') return { data: { total: count(lists, window.lower, window.upper, predicate) } };
  const distinct = counter(countBy);
  scan(lists, window.lower, window.upper, (e) => {
    if (!predicate || predicate(e)) distinct.add(e);
  });
  return { data: { total: distinct.total() } };
};

/** `{"data":{"buckets":[{timestamp,count}],"total"},"meta":{"interval"}}` (the SDK's shape). */
export const eventTimeseries: Handler = (context) => {
  const raw = context.params.get('interval') ?? 'day';
  if (!(INTERVALS as readonly string[]).includes(raw)) {
    throw badRequest(`interval must be one of ${INTERVALS.join(', ')}; got "${raw}"`, 'interval', {
      allowed: INTERVALS,
    });
  }
  const served = context.variant?.timeseriesIntervals;
  if (served !== undefined && !served.has(raw)) {
    throw badRequest(`interval "${raw}" is not supported; use one of ${[...served].join(', ')}`, 'interval', {
      allowed: [...served],
    });
  }
  const interval = raw as Interval;
  const window = parseTimeWindow(context.params);
  const predicate = counted(context, eventPredicate(context));
  const buckets = new Map<number, number>();
  let total = 0;
  // Events arrive in time order per project, so count runs of one bucket and touch the map per run.
  let runStart = 0;
  let runEnd = 0;
  let runCount = 0;
  const flush = (): void => {
    if (runCount > 0) buckets.set(runStart, (buckets.get(runStart) ?? 0) + runCount);
    runCount = 0;
  };
  scan(
    context.projects.map((p) => p.events),
    window.lower,
    window.upper,
    (e) => {
      if (predicate && !predicate(e)) return;
      if (runCount === 0 || e.sortKey < runStart || e.sortKey >= runEnd) {
        flush();
        runStart = bucketStart(e.sortKey, interval);
        runEnd = bucketStart(bucketEndHint(runStart, interval), interval);
      }
      runCount++;
      total++;
    },
  );
  flush();
  const data = [...buckets.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([ms, n]) => ({ timestamp: new Date(ms).toISOString(), count: n }));
  // Another shape the spec does not rule out: one row per bucket, no total.
  if (context.variant?.timeseriesShape === 'rows') {
    const rows: JsonValue = { data: data.map((b) => ({ bucket: b.timestamp, events: b.count })) };
    return rows;
  }
  return { data: { buckets: data, total }, meta: { interval } };
};

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;

/** Start of the UTC bucket holding `ms`; weeks start on Monday (1970-01-01 was a Thursday). */
export function bucketStart(ms: number, interval: Interval): number {
  switch (interval) {
    case 'minute':
      return Math.floor(ms / MINUTE_MS) * MINUTE_MS;
    case 'hour':
      return Math.floor(ms / HOUR_MS) * HOUR_MS;
    case 'day':
      return Math.floor(ms / DAY_MS) * DAY_MS;
    case 'week': {
      const day = Math.floor(ms / DAY_MS);
      return (day - ((((day + 3) % 7) + 7) % 7)) * DAY_MS;
    }
    case 'month': {
      const date = new Date(ms);
      return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
    }
  }
}

/** A time inside the bucket after the one starting at `start`. */
function bucketEndHint(start: number, interval: Interval): number {
  switch (interval) {
    case 'minute':
      return start + MINUTE_MS;
    case 'hour':
      return start + HOUR_MS;
    case 'day':
      return start + DAY_MS;
    case 'week':
      return start + 7 * DAY_MS;
    case 'month':
      return start + 32 * DAY_MS;
  }
}

/**
 * Facets over a window given as `timestamp.gte`/`timestamp.lt` (the SDK's names) or
 * `timestamp[gte|gt|lte|lt]`; `count_by` counts events, or distinct users or conversations.
 */
export const eventFacets: Handler = (context) => {
  const raw = context.params.get('field') ?? '';
  const field: FacetField | undefined =
    raw === 'signal_id' && context.flavor === 'spec'
      ? 'signal'
      : (FACET_FIELDS as readonly string[]).includes(raw)
        ? (raw as FacetField)
        : undefined;
  if (field === undefined) {
    throw badRequest(`field must be one of ${FACET_FIELDS.join(', ')}; got "${raw}"`, 'field', {
      allowed: FACET_FIELDS,
    });
  }
  const limit = parseLimit(context.params, DEFAULT_FACET_LIMIT, MAX_PAGE_SIZE);
  const dotted = parseTimeWindow(context.params, 'timestamp', '.');
  const bracketed = parseTimeWindow(context.params);
  const lower = maxDefined(dotted.lower, bracketed.lower);
  const upper = minDefined(dotted.upper, bracketed.upper);
  const countBy = parseCountBy(context.params);
  const predicate = eventPredicate(context);
  const { store, now } = context;
  // One counter per value: facets scan every event of the window.
  const counts = new Map<string, ReturnType<typeof counter>>();
  const bump = (value: string, e: EventEntry): void => {
    let tally = counts.get(value);
    if (!tally) {
      tally = counter(countBy);
      counts.set(value, tally);
    }
    tally.add(e);
  };
  scan(
    context.projects.map((p) => p.events),
    lower,
    upper,
    (e) => {
      if (predicate && !predicate(e)) return;
      if (field === 'event_name') bump(e.eventName, e);
      else if (field === 'user_id') bump(e.userId, e);
      else if (store.isEnriched(e, now)) for (const id of e.signalIds) bump(id, e);
    },
  );
  const data = [...counts.entries()]
    .map(([value, tally]) => ({ value, count: tally.total() }))
    .sort((a, b) => b.count - a.count || (a.value < b.value ? -1 : a.value > b.value ? 1 : 0))
    .slice(0, limit);
  return { data };
};

function maxDefined(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.max(a, b);
}

function minDefined(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}
