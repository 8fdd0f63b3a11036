import { defineResource } from '../src/core/resource.js';

/** Users change as events arrive: synced on `last_seen`, and a newer copy replaces the row. */
export const users = defineResource({
  name: 'users',
  path: '/v1/users',
  key: 'id',
  mode: 'incremental',
  cursorField: 'last_seen',
  filterGte: 'last_seen[gte]', // SDK: users filter on first_seen/last_seen, not timestamp
  filterLt: 'last_seen[lt]',
  sortOrder: 'desc',
  allProjects: true,
  maxPageSize: 100,
  columns: { id: 'string', first_seen: 'timestamp', last_seen: 'timestamp', event_count: 'int64' },
});
