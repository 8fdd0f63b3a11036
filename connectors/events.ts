import { defineResource } from '../src/core/resource.js';

/**
 * Free text (SDK: strings with no format): declared, so a first value that happens to look like an
 * instant ("what time is it?" → "2026-11-20T10:00:00Z") never makes the column a TIMESTAMP.
 */
const EVENT_TEXT = { user_input: 'string', assistant_output: 'string', model: 'string' } as const;

/** Events: the bulk of the data. Newest first on the real service; keyed by (project_id, id). */
export const events = defineResource({
  name: 'events',
  description:
    'One row per event (key: project_id, id), from /v1/events. Re-read once settled, so late enrichment (signals, topics, tool_calls) is kept.',
  path: '/v1/events',
  key: 'id',
  mode: 'incremental',
  cursorField: 'timestamp',
  filterGte: 'timestamp[gte]',
  filterLt: 'timestamp[lt]',
  params: { order_by: '-timestamp' },
  sortOrder: 'desc',
  allProjects: true,
  timeseriesPath: '/v1/events/timeseries', // SDK: { data: { buckets: [{ timestamp, count }], total } }, interval minute…month
  countPath: '/v1/events/count', // field notes: returns { data: { total } }; unfiltered by signal (signal counts under-count)
  split: {
    timeseriesPath: '/v1/events/timeseries',
    timeseriesGte: 'timestamp[gte]',
    timeseriesLt: 'timestamp[lt]',
    countPath: '/v1/events/count',
    exact: true,
  },
  maxPageSize: 100, // field notes: "maximum 100 on most lists"
  columns: {
    id: 'string',
    timestamp: 'timestamp',
    user_id: 'string',
    convo_id: 'string',
    event_name: 'string',
    received_at: 'timestamp',
    ...EVENT_TEXT,
  },
  partitionColumn: 'timestamp',
  settles: true, // SDK: signals, topics, attachments, error_spans, tool_calls "may be absent for very recent events"
  arrivalField: 'received_at',
  // SDK: signals [{id, name, score}]; one row per matched signal, replaced with its event.
  bridges: [
    {
      table: 'event_signals',
      field: 'signals',
      parentColumn: 'event_id',
      elementColumn: 'signal',
      elementFields: [
        { column: 'signal_id', field: 'id', type: 'string' },
        { column: 'signal_name', field: 'name', type: 'string' },
        { column: 'score', field: 'score', type: 'float64' },
      ],
    },
  ],
});
