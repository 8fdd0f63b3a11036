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
  maxPageSize: 100,
  columns: { id: 'string', user_id: 'string', started_at: 'timestamp', last_message_at: 'timestamp', message_count: 'int64' },
});
