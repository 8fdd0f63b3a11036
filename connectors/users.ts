import { defineResource } from '../src/core/resource.js';

/** Users change as events arrive: synced on `last_seen`, and a newer copy replaces the row. */
export const users = defineResource({
  name: 'users',
  description: 'One row per user (key: project_id, id), from /v1/users; the newest copy (last_seen) wins.',
  path: '/v1/users',
  key: 'id',
  mode: 'incremental',
  cursorField: 'last_seen',
  filterGte: 'last_seen[gte]', // SDK: users filter on first_seen/last_seen, not timestamp
  filterLt: 'last_seen[lt]',
  params: { order_by: '-timestamp' }, // the SDK's default, sent on every list
  sortOrder: 'desc',
  allProjects: true,
  // A user's last_seen is one of its events' timestamps: events over time say where users lie.
  split: {
    timeseriesPath: '/v1/events/timeseries',
    timeseriesGte: 'timestamp[gte]',
    timeseriesLt: 'timestamp[lt]',
    countPath: '/v1/events/count',
    exact: false,
    count: { path: '/v1/events/count', param: 'count_by', value: 'user_id' },
  },
  maxPageSize: 100,
  columns: { id: 'string', first_seen: 'timestamp', last_seen: 'timestamp', event_count: 'int64' },
  settles: true, // traits and event_count can be updated after last_seen: re-read once settled
});
