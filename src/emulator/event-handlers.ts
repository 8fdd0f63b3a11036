/**
 * `/v1/events` and its search, count, timeseries, facets and single-record endpoints.
 */

import type { JsonValue } from '../core/types.js';
import { eventRecord, type EventEntry, type JsonObject } from './entries.js';
import { type Handler, type RequestContext, listBody, singleProject } from './handler-context.js';
import {
  ApiError,
  badRequest,
  optional,
  parseCursor,
  parseLimit,
  parseOrderBy,
  parsePropertyFilters,
  parseTimeWindow,
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
const FACET_FIELDS = ['event_name', 'user_id', 'signal_id'] as const;
type FacetField = (typeof FACET_FIELDS)[number];

type Predicate = (event: EventEntry) => boolean;

/** Filters `user_id`, `event_name`, `convo_id`, `signal`, `properties[key]=value`; undefined if none. */
function eventPredicate(params: URLSearchParams): Predicate | undefined {
  const checks: Predicate[] = [];
  const userId = optional(params, 'user_id');
  const eventName = optional(params, 'event_name');
  const convoId = optional(params, 'convo_id');
  const signal = optional(params, 'signal');
  if (userId !== undefined) checks.push((e) => e.userId === userId);
  if (eventName !== undefined) checks.push((e) => e.eventName === eventName);
  if (convoId !== undefined) checks.push((e) => e.convoId === convoId);
  if (signal !== undefined) checks.push((e) => e.signalIds.includes(signal));
  for (const [key, expected] of parsePropertyFilters(params)) {
    checks.push((e) => propertyMatches(e.properties, key, expected));
  }
  return combine(checks);
}

function combine(checks: readonly Predicate[]): Predicate | undefined {
  if (checks.length === 0) return undefined;
  if (checks.length === 1) return checks[0];
  return (e) => checks.every((check) => check(e));
}

function propertyMatches(properties: JsonObject, key: string, expected: string): boolean {
  let value: JsonValue | undefined = properties[key];
  if (value === undefined && key.includes('.')) {
    value = properties;
    for (const part of key.split('.')) {
      if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
      value = (value as JsonObject)[part];
      if (value === undefined) return false;
    }
  }
  if (value === undefined || (value !== null && typeof value === 'object')) return false;
  return String(value) === expected;
}

export const listEvents: Handler = (context) => {
  const { params } = context;
  const cursor = parseCursor(params, 'events');
  const direction = cursor?.direction ?? parseOrderBy(params, context.order);
  const limit = parseLimit(params, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE);
  const window = parseTimeWindow(params);
  const page = walk({
    lists: context.projects.map((p) => p.events),
    direction,
    lower: window.lower,
    upper: window.upper,
    after: cursor?.position,
    predicate: eventPredicate(params),
    limit,
  });
  return listBody(context, 'events', direction, page, eventRecord);
};

export const getEvent: Handler = (context) => {
  const id = context.id ?? '';
  const event = singleProject(context).eventsById.get(id);
  if (!event) throw new ApiError(404, 'not_found', `No event with id "${id}" in this project`);
  return { data: eventRecord(event) };
};

export const searchEvents: Handler = (context) => {
  const { params, now } = context;
  const query = optional(params, 'query');
  if (query === undefined) throw badRequest('query is required');
  const mode = params.get('mode') ?? 'text';
  if (mode !== 'text' && mode !== 'semantic' && mode !== 'regex') {
    throw badRequest(`mode must be text, semantic or regex, got "${mode}"`);
  }
  const fields = parseSearchIn(params.get('search_in'));
  const window = parseTimeWindow(params);
  if (!window.hasGte || window.lower === undefined) throw badRequest('timestamp[gte] is required for search');
  const upper = window.upper ?? now;
  if (upper - window.lower > SEARCH_MAX_WINDOW_MS) {
    throw badRequest('The search window is wider than 14 days; narrow timestamp[gte]/timestamp[lt]', 'window_too_wide');
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
  const filters = eventPredicate(params);
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
  return listBody(context, 'events', direction, page, (e) => ({ ...eventRecord(e), relevance_score: scores.get(e) ?? 0 }));
};

function parseSearchIn(raw: string | null): readonly SearchField[] {
  if (raw === null || raw.trim() === '') return SEARCH_FIELDS;
  const fields = raw.split(',').map((f) => f.trim());
  for (const field of fields) {
    if (!(SEARCH_FIELDS as readonly string[]).includes(field)) {
      throw badRequest(`search_in accepts ${SEARCH_FIELDS.join(', ')}; got "${field}"`);
    }
  }
  return fields as SearchField[];
}

/** Counts occurrences of the query in a text: case-insensitive substring, or a RegExp. */
function matcher(mode: 'text' | 'semantic' | 'regex', query: string, context: RequestContext): (text: string) => number {
  if (mode === 'regex') {
    let pattern: RegExp;
    try {
      pattern = new RegExp(query, 'gi');
    } catch (error) {
      throw badRequest(`query is not a valid regular expression: ${(error as Error).message}`);
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

export const countEvents: Handler = (context) => {
  const window = parseTimeWindow(context.params);
  const lists = context.projects.map((p) => p.events);
  return { data: { total: count(lists, window.lower, window.upper, eventPredicate(context.params)) } };
};

export const eventTimeseries: Handler = (context) => {
  const raw = context.params.get('interval') ?? 'day';
  if (!(INTERVALS as readonly string[]).includes(raw)) {
    throw badRequest(`interval must be one of ${INTERVALS.join(', ')}; got "${raw}"`);
  }
  const interval = raw as Interval;
  const window = parseTimeWindow(context.params);
  const predicate = eventPredicate(context.params);
  const buckets = new Map<number, number>();
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
    },
  );
  flush();
  const data = [...buckets.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([ms, n]) => ({ timestamp: new Date(ms).toISOString(), count: n }));
  return { data };
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

export const eventFacets: Handler = (context) => {
  const raw = context.params.get('field');
  if (raw === null || !(FACET_FIELDS as readonly string[]).includes(raw)) {
    throw badRequest(`field must be one of ${FACET_FIELDS.join(', ')}; got "${raw ?? ''}"`);
  }
  const field = raw as FacetField;
  const limit = parseLimit(context.params, DEFAULT_FACET_LIMIT, MAX_PAGE_SIZE);
  const window = parseTimeWindow(context.params);
  const predicate = eventPredicate(context.params);
  // One lookup per value, counting in place: facets scan every event of the window.
  const counts = new Map<string, { n: number }>();
  const bump = (value: string): void => {
    const counter = counts.get(value);
    if (counter) counter.n++;
    else counts.set(value, { n: 1 });
  };
  scan(
    context.projects.map((p) => p.events),
    window.lower,
    window.upper,
    (e) => {
      if (predicate && !predicate(e)) return;
      if (field === 'event_name') bump(e.eventName);
      else if (field === 'user_id') bump(e.userId);
      else for (const id of e.signalIds) bump(id);
    },
  );
  const data = [...counts.entries()]
    .map(([value, counter]) => ({ value, count: counter.n }))
    .sort((a, b) => b.count - a.count || (a.value < b.value ? -1 : a.value > b.value ? 1 : 0))
    .slice(0, limit);
  return { data };
};
