import { defineResource } from '../src/core/resource.js';

/**
 * Trace spans, keyed by (project_id, span_id). The `*_ns` fields are nanosecond epochs beyond 2^53:
 * declared int64 so they stay exact. Which field `timestamp[gte]` filters on is not documented: we
 * assume the span start, and cut off on the client by `start_time_ns` either way.
 */
export const traces = defineResource({
  name: 'traces',
  path: '/v1/traces',
  key: 'span_id',
  mode: 'incremental',
  cursorField: 'start_time_ns',
  cursorFormat: 'epoch_ns',
  filterGte: 'timestamp[gte]',
  filterLt: 'timestamp[lt]',
  sortOrder: 'unknown',
  allProjects: false, // field notes: traces reject `*` with 400
  maxPageSize: 1000, // field notes: clients ask traces for 500 and 1000
  columns: { span_id: 'string', start_time_ns: 'int64', end_time_ns: 'int64', duration_ns: 'int64' },
  partitionColumn: 'start_time_ns',
});
