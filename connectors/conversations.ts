import { defineResource } from '../src/core/resource.js';

/**
 * Conversations change as messages arrive: synced on `last_message_at`, newer copy wins. The SDK
 * offers only `started_at` filters, so the walk reads most-recent-message-first and stops once it
 * has passed the window's start, where the records proved that order; unproven or broken, the walk
 * reads the whole list.
 */
export const conversations = defineResource({
  name: 'conversations',
  description:
    'One row per conversation (key: project_id, id), from /v1/conversations; the newest copy (last_message_at) wins.',
  path: '/v1/conversations',
  key: 'id',
  mode: 'incremental',
  cursorField: 'last_message_at',
  stopPastWindow: true,
  // What the SDK sends on every list (its default; the values a list accepts are not documented).
  // The order really served is learned from the records (docs/list-semantics.md): the walk stops
  // early only once they told last_message_at apart from started_at.
  params: { order_by: '-timestamp' },
  orderCandidates: ['started_at'],
  sortOrder: 'desc',
  allProjects: true,
  // Sub-windows on started_at (never after last_message_at), the one time filter the list has; a
  // conversation starts with its first event, so events over time say where they lie.
  split: {
    timeseriesPath: '/v1/events/timeseries',
    timeseriesGte: 'timestamp[gte]',
    timeseriesLt: 'timestamp[lt]',
    countPath: '/v1/events/count', // where the timeseries is unusable: counts over ranges place the cuts
    exact: false,
    count: { path: '/v1/events/count', param: 'count_by', value: 'convo_id' }, // a conversation's last message is an event
    partGte: 'started_at[gte]',
    partLt: 'started_at[lt]',
  },
  maxPageSize: 100,
  columns: {
    id: 'string',
    user_id: 'string',
    started_at: 'timestamp',
    last_message_at: 'timestamp',
    message_count: 'int64',
  },
  settles: true, // SDK rows carry signals [{id,name,count}]: computed after the messages, like events' enrichment
});
