import { defineResource } from '../src/core/resource.js';

/** Conversations change as messages arrive: synced on `last_message_at`, newer copy wins. */
export const conversations = defineResource({
  name: 'conversations',
  path: '/v1/conversations',
  key: 'id',
  mode: 'incremental',
  cursorField: 'last_message_at',
  filterGte: 'timestamp[gte]',
  filterLt: 'timestamp[lt]',
  sortOrder: 'desc',
  allProjects: true,
  maxPageSize: 100,
  columns: { id: 'string', user_id: 'string', started_at: 'timestamp', last_message_at: 'timestamp', message_count: 'int64' },
});
