import { defineResource } from '../src/core/resource.js';

/**
 * Conversations change as messages arrive: synced on `last_message_at`, newer copy wins. The SDK
 * offers only `started_at` filters, so the walk reads most-recent-message-first (the service's
 * default order) and stops once it has passed the window's start; a broken order is noticed and the
 * walk then reads the whole list.
 */
export const conversations = defineResource({
  name: 'conversations',
  path: '/v1/conversations',
  key: 'id',
  mode: 'incremental',
  cursorField: 'last_message_at',
  stopPastWindow: true,
  sortOrder: 'desc',
  allProjects: true,
  // Sub-windows on started_at (never after last_message_at), the one time filter the list has; a
  // conversation starts with its first event, so events over time say where they lie.
  split: {
    timeseriesPath: '/v1/events/timeseries',
    timeseriesGte: 'timestamp[gte]',
    timeseriesLt: 'timestamp[lt]',
    exact: false,
    count: { path: '/v1/events/count', param: 'count_by', value: 'convo_id' }, // a conversation's last message is an event
    partGte: 'started_at[gte]',
    partLt: 'started_at[lt]',
  },
  maxPageSize: 100,
  columns: { id: 'string', user_id: 'string', started_at: 'timestamp', last_message_at: 'timestamp', message_count: 'int64' },
  settles: true, // SDK rows carry signals [{id,name,count}]: computed after the messages, like events' enrichment
});
