import { defineResource } from '../src/core/resource.js';

/**
 * Trace spans, keyed by (project_id, span_id). The `*_ns` fields are nanosecond epochs beyond 2^53:
 * declared int64 so they stay exact. The real service reads spans one event at a time
 * (`event_id` required, no cursor); a server that lists them by time (the spec) is walked by
 * window, on `start_time_ns`. Which one answers is found out once and kept in state.
 */
export const traces = defineResource({
  name: 'traces',
  description: 'One row per trace span (key: project_id, span_id), from /v1/traces.',
  path: '/v1/traces',
  key: 'span_id',
  mode: 'incremental',
  cursorField: 'start_time_ns',
  cursorFormat: 'epoch_ns',
  filterGte: 'timestamp[gte]',
  filterLt: 'timestamp[lt]',
  sortOrder: 'unknown',
  allProjects: false, // field notes: traces reject `*` with 400
  // Where the server lists spans by time: a span starts with its event, so events over time say where spans lie.
  split: {
    timeseriesPath: '/v1/events/timeseries',
    timeseriesGte: 'timestamp[gte]',
    timeseriesLt: 'timestamp[lt]',
    countPath: '/v1/events/count',
    exact: false,
  },
  maxPageSize: 1000, // field notes: clients ask traces for 500 and 1000
  perParent: { parent: 'events', param: 'event_id', shownBy: ['tool_calls', 'error_spans', 'model'] },
  columns: {
    span_id: 'string',
    start_time_ns: 'int64',
    end_time_ns: 'int64',
    duration_ns: 'int64',
    // Free text and names (SDK strings): declared, so a value that looks like an instant stays text.
    trace_id: 'string',
    parent_span_id: 'string',
    span_name: 'string',
    span_type: 'string',
    status: 'string',
    input: 'string',
    output: 'string',
    model: 'string',
    provider: 'string',
  },
  partitionColumn: 'start_time_ns',
});
