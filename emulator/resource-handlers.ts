/**
 * Traces, signals, signal groups, users and conversations: lists and single-record gets.
 *
 * Users and conversations are keyed on a time that changes (`last_seen`, `last_message_at`): one
 * updated during a walk moves to its new place, as on any keyset-paginated API, so that walk may miss
 * or repeat it. A sync that windows on that time picks it up on its next run.
 */

import {
  signalGroupRecord,
  signalRecord,
  spanRecord,
  userRecord,
  type ConvoEntry,
  type SignalEntry,
  type SpanEntry,
  type UserEntry,
} from './entries.js';
import { type Handler, type RequestContext, allOf, getById, listBody, singleProject } from './handler-context.js';
import { valueMatches, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './event-handlers.js';
import {
  ApiError,
  badRequest,
  optional,
  parseCursor,
  parseKeyedFilters,
  parseLimit,
  parseOrderBy,
  parseOrderDirection,
  parseStringFilter,
  parseTimeWindow,
  type TimeWindow,
} from './params.js';
import { type SortedList, walk, type Direction, type Entry, type Position } from './sorted-list.js';
import type { ProjectData } from './store.js';
import type { ApiRecord, JsonValue } from './types.js';

/** Traces take larger pages. Source: field notes (clients ask for 500 and 1000). */
const DEFAULT_TRACE_PAGE_SIZE = 100;
/** The spans of one event: the SDK's default `limit` for `/v1/traces?event_id=`. */
const DEFAULT_EVENT_SPANS = 200;
const MAX_TRACE_PAGE_SIZE = 1000;
const NS_PER_MS = 1_000_000n;

/**
 * `event_id` given: the spans of that event, `{"data":[...]}` with no `meta` (the SDK's shape), on
 * both flavors. Without it: 400 naming `event_id` on the real flavor; the spec flavor also lists
 * spans by time window, with cursors. Filters `trace_id`, `span_id`, `span_type`, `status` (field
 * notes) apply to both.
 */
export const listTraces: Handler = (context) => {
  const { params } = context;
  const project = singleProject(context);
  const eventId = optional(params, 'event_id');
  const checks: ((span: SpanEntry) => boolean)[] = [];
  const traceId = optional(params, 'trace_id');
  const spanId = optional(params, 'span_id');
  const spanType = optional(params, 'span_type');
  const status = optional(params, 'status');
  if (traceId !== undefined) checks.push((s) => s.traceId === traceId);
  if (spanId !== undefined) checks.push((s) => s.id === spanId);
  if (spanType !== undefined) checks.push((s) => s.spanType === spanType);
  if (status !== undefined) checks.push((s) => s.status === status);
  // Spans that lag their event (`spanLagMs`) are not served yet, by event or by time.
  if (context.store.spanLagMs > 0) checks.push((s) => context.now >= s.event.visibleFrom + context.store.spanLagMs);
  const predicate = allOf(checks);
  const options = { eventId: context.store.spanEventId, truncLen: parseTruncLen(params) };

  if (eventId !== undefined) {
    // Only visible events are indexed, so spans of a late event stay hidden with it.
    const event = project.eventsById.get(eventId);
    const limit = parseLimit(params, DEFAULT_EVENT_SPANS, MAX_TRACE_PAGE_SIZE);
    const spans = (event === undefined ? [] : context.store.spansAt(event, context.now))
      .filter((s) => !predicate || predicate(s))
      .slice(0, limit);
    return { data: spans.map((s) => spanRecord(s, options)) };
  }
  if (context.flavor === 'real') {
    // Servers the SDK allows that answer otherwise: an empty page, or 422 in the SDK's error shape
    // whose message does not name the parameter (only `details.field` does).
    if (context.store.tracesWithoutEvent === 'empty') return { data: [] };
    if (context.store.tracesWithoutEvent === 'unprocessable')
      throw new ApiError(422, 'unprocessable', 'a required parameter is missing', { field: 'event_id' });
    throw badRequest(
      'event_id is required: traces are read per event (GET /v1/traces?event_id=<event id>)',
      'event_id',
      { code: 'missing_parameter' },
    );
  }
  const cursor = parseCursor(params, 'traces');
  const direction = cursor?.direction ?? context.order;
  const limit = parseLimit(params, DEFAULT_TRACE_PAGE_SIZE, MAX_TRACE_PAGE_SIZE);
  // The window applies to the span start in ms: floor(ns / 1e6) >= L  <=>  ns >= L * 1e6.
  const window = parseTimeWindow(params);
  const page = walk({
    lists: [project.traces],
    direction,
    lower: window.lower === undefined ? undefined : BigInt(window.lower) * NS_PER_MS,
    upper: window.upper === undefined ? undefined : BigInt(window.upper) * NS_PER_MS,
    after: cursor?.position,
    predicate,
    limit,
  });
  return listBody(context, 'traces', direction, page, (s) => spanRecord(s, options));
};

/** `trunc_len`: cut span `input`/`output` to this many characters; absent or empty: whole. */
function parseTruncLen(params: URLSearchParams): number | undefined {
  const raw = optional(params, 'trunc_len');
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw)) throw badRequest(`trunc_len must be a non-negative integer, got "${raw}"`, 'trunc_len');
  return Number(raw);
}

function listSignalsOf(
  context: RequestContext,
  lists: readonly SortedList<SignalEntry>[],
  predicate?: (s: SignalEntry) => boolean,
) {
  const { params } = context;
  const cursor = parseCursor(params, 'signals');
  const direction = cursor?.direction ?? parseOrderBy(params, context.order, 'created_at');
  const page = walk({
    lists,
    direction,
    after: cursor?.position,
    predicate,
    limit: parseLimit(params, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE),
  });
  return listBody(context, 'signals', direction, page, signalRecord);
}

export const listSignals: Handler = (context) => listSignalsOf(context, [singleProject(context).signals]);

export const getSignal: Handler = (context) => getById(context, (p) => p.signalsById, 'signal', signalRecord);

export const listSignalGroups: Handler = (context) => {
  const { params } = context;
  const cursor = parseCursor(params, 'signal_groups');
  const direction = cursor?.direction ?? parseOrderBy(params, context.order, 'created_at');
  const page = walk({
    lists: [singleProject(context).signalGroups],
    direction,
    after: cursor?.position,
    limit: parseLimit(params, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE),
  });
  return listBody(context, 'signal_groups', direction, page, signalGroupRecord);
};

export const getSignalGroup: Handler = (context) =>
  getById(context, (p) => p.signalGroupsById, 'signal group', signalGroupRecord);

/** `/v1/signal-groups/{id}/signals`: the group's signals, paged like `/v1/signals`. */
export const listSignalGroupSignals: Handler = (context) => {
  const id = context.id ?? '';
  const project = singleProject(context);
  if (!project.signalGroupsById.has(id))
    throw new ApiError(404, 'not_found', `No signal group with id "${id}" in this project`);
  return listSignalsOf(context, [project.signals], (s) => s.groupId === id);
};

/**
 * The window a user or conversation list walks on its sort field (`last_seen`,
 * `last_message_at`): the field's own `[gte|gt|lte|lt]` filters, and on the spec flavor also
 * `timestamp[...]` (which the real service does not know, and ignores).
 */
function sortWindow(context: RequestContext, field: string): TimeWindow {
  const own = parseTimeWindow(context.params, field);
  if (context.flavor === 'real') return own;
  const legacy = parseTimeWindow(context.params);
  return {
    lower:
      own.lower === undefined
        ? legacy.lower
        : legacy.lower === undefined
          ? own.lower
          : Math.max(own.lower, legacy.lower),
    upper:
      own.upper === undefined
        ? legacy.upper
        : legacy.upper === undefined
          ? own.upper
          : Math.min(own.upper, legacy.upper),
    hasGte: own.hasGte || legacy.hasGte,
  };
}

/** A page of a list of every project in scope walked by its sort key within `window`, as the list envelope. */
function windowPage<E extends Entry & { readonly sortKey: number }>(
  context: RequestContext,
  resource: string,
  listOf: (project: ProjectData) => SortedList<E>,
  walked: {
    readonly direction: Direction;
    readonly window: TimeWindow;
    readonly after: Position | undefined;
    readonly checks: readonly ((entry: E) => boolean)[];
  },
  toRecord: (entry: E) => ApiRecord,
): JsonValue {
  const page = walk<E>({
    lists: context.projects.map(listOf),
    direction: walked.direction,
    lower: walked.window.lower,
    upper: walked.window.upper,
    after: walked.after,
    predicate: allOf(walked.checks),
    limit: parseLimit(context.params, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE),
  });
  return listBody(context, resource, walked.direction, page, toRecord);
}

function inWindow(window: TimeWindow, ms: number): boolean {
  return (window.lower === undefined || ms >= window.lower) && (window.upper === undefined || ms < window.upper);
}

/** Users: sorted by `last_seen`; filters `user_id` (with operators), `first_seen[...]`, `last_seen[...]`, `traits[key]`. */
export const listUsers: Handler = (context) => {
  const { params } = context;
  const cursor = parseCursor(params, 'users');
  const direction: Direction =
    cursor?.direction ??
    (params.get('order_by') !== null
      ? parseOrderBy(params, context.order, 'last_seen')
      : parseOrderDirection(params, context.order));
  const window = sortWindow(context, 'last_seen');
  const firstSeen = parseTimeWindow(params, 'first_seen');
  const userId = parseStringFilter(params, 'user_id');
  const traits = parseKeyedFilters(params, 'traits');
  const checks: ((u: UserEntry) => boolean)[] = [];
  if (userId) checks.push((u) => userId(u.id));
  if (firstSeen.lower !== undefined || firstSeen.upper !== undefined)
    checks.push((u) => inWindow(firstSeen, u.firstSeen));
  for (const filter of traits) checks.push((u) => valueMatches(u.traits, filter));
  return windowPage(
    context,
    'users',
    (p) => p.users,
    { direction, window, after: cursor?.position, checks },
    userRecord,
  );
};

export const getUser: Handler = (context) => getById(context, (p) => p.usersById, 'user', userRecord);

/**
 * Conversations: most recent message first by default (the configured `order`); filters `user_id`
 * (with operators) and `started_at[...]`; the spec flavor also windows `last_message_at` with
 * `timestamp[...]`, which the real service ignores.
 */
export const listConversations: Handler = (context) => {
  const { params } = context;
  const cursor = parseCursor(params, 'conversations');
  const direction = cursor?.direction ?? parseOrderBy(params, context.order, 'last_message_at');
  // The real service has no filter on `last_message_at`; the spec flavor keeps `timestamp[...]` on it.
  const window: TimeWindow =
    context.flavor === 'real' ? { lower: undefined, upper: undefined, hasGte: false } : parseTimeWindow(params);
  const startedAt = parseTimeWindow(params, 'started_at');
  const userId = parseStringFilter(params, 'user_id');
  const checks: ((c: ConvoEntry) => boolean)[] = [];
  if (userId) checks.push((c) => userId(c.userId));
  if (startedAt.lower !== undefined || startedAt.upper !== undefined)
    checks.push((c) => inWindow(startedAt, c.startedAt));
  return windowPage(
    context,
    'conversations',
    (p) => p.convos,
    { direction, window, after: cursor?.position, checks },
    (c) => context.store.convoAt(c, context.now),
  );
};

export const getConversation: Handler = (context) =>
  getById(
    context,
    (p) => p.convosById,
    'conversation',
    (c) => context.store.convoAt(c, context.now),
  );
