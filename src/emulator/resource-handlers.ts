/**
 * Traces, signals, users and conversations: lists and single-record gets.
 *
 * Users and conversations are keyed on a time that changes (`last_seen`, `last_message_at`): one
 * updated during a walk moves to its new place, as on any keyset-paginated API, so that walk may miss
 * or repeat it. A sync that windows on that time picks it up on its next run.
 */

import { convoRecord, signalRecord, spanRecord, userRecord, type ConvoEntry, type SpanEntry, type UserEntry } from './entries.js';
import { type Handler, listBody, singleProject } from './handler-context.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from './event-handlers.js';
import { ApiError, optional, parseCursor, parseLimit, parseOrderDirection, parseTimeWindow } from './params.js';
import { SortedList, walk } from './sorted-list.js';

/** Traces take larger pages. Source: field notes (clients ask for 500 and 1000). */
const DEFAULT_TRACE_PAGE_SIZE = 100;
const MAX_TRACE_PAGE_SIZE = 1000;
const NS_PER_MS = 1_000_000n;

export const listTraces: Handler = (context) => {
  const { params } = context;
  const project = singleProject(context);
  const cursor = parseCursor(params, 'traces');
  const direction = cursor?.direction ?? context.order;
  const limit = parseLimit(params, DEFAULT_TRACE_PAGE_SIZE, MAX_TRACE_PAGE_SIZE);
  // The window applies to the span start in ms: floor(ns / 1e6) >= L  <=>  ns >= L * 1e6.
  const window = parseTimeWindow(params);
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
  let lists: SortedList<SpanEntry>[] = [project.traces];
  if (eventId !== undefined) {
    // Only visible events are indexed, so spans of a late event stay hidden with it.
    const event = project.eventsById.get(eventId);
    lists = event ? [new SortedList([...event.spans])] : [];
  }
  const page = walk({
    lists,
    direction,
    lower: window.lower === undefined ? undefined : BigInt(window.lower) * NS_PER_MS,
    upper: window.upper === undefined ? undefined : BigInt(window.upper) * NS_PER_MS,
    after: cursor?.position,
    predicate: checks.length === 0 ? undefined : (s) => checks.every((check) => check(s)),
    limit,
  });
  return listBody(context, 'traces', direction, page, spanRecord);
};

export const listSignals: Handler = (context) => {
  const { params } = context;
  const cursor = parseCursor(params, 'signals');
  const direction = cursor?.direction ?? context.order;
  const page = walk({
    lists: [singleProject(context).signals],
    direction,
    after: cursor?.position,
    limit: parseLimit(params, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE),
  });
  return listBody(context, 'signals', direction, page, signalRecord);
};

export const getSignal: Handler = (context) => {
  const id = context.id ?? '';
  const signal = singleProject(context).signalsById.get(id);
  if (!signal) throw new ApiError(404, 'not_found', `No signal with id "${id}" in this project`);
  return { data: signalRecord(signal) };
};

export const listUsers: Handler = (context) => {
  const { params } = context;
  const cursor = parseCursor(params, 'users');
  const direction = cursor?.direction ?? parseOrderDirection(params, context.order);
  const window = parseTimeWindow(params);
  const userId = optional(params, 'user_id');
  const page = walk<UserEntry>({
    lists: context.projects.map((p) => p.users),
    direction,
    lower: window.lower,
    upper: window.upper,
    after: cursor?.position,
    predicate: userId === undefined ? undefined : (u) => u.id === userId,
    limit: parseLimit(params, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE),
  });
  return listBody(context, 'users', direction, page, userRecord);
};

export const getUser: Handler = (context) => {
  const id = context.id ?? '';
  const user = singleProject(context).usersById.get(id);
  if (!user) throw new ApiError(404, 'not_found', `No user with id "${id}" in this project`);
  return { data: userRecord(user) };
};

export const listConversations: Handler = (context) => {
  const { params } = context;
  const cursor = parseCursor(params, 'conversations');
  const direction = cursor?.direction ?? context.order;
  const window = parseTimeWindow(params);
  const userId = optional(params, 'user_id');
  const page = walk<ConvoEntry>({
    lists: context.projects.map((p) => p.convos),
    direction,
    lower: window.lower,
    upper: window.upper,
    after: cursor?.position,
    predicate: userId === undefined ? undefined : (c) => c.userId === userId,
    limit: parseLimit(params, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE),
  });
  return listBody(context, 'conversations', direction, page, convoRecord);
};

export const getConversation: Handler = (context) => {
  const id = context.id ?? '';
  const convo = singleProject(context).convosById.get(id);
  if (!convo) throw new ApiError(404, 'not_found', `No conversation with id "${id}" in this project`);
  return { data: convoRecord(convo) };
};
