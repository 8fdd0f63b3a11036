import { defineResource } from '../src/core/resource.js';

/**
 * Signal groups (SDK: `/v1/signal-groups`; not in the spec). A few rows: re-read in full every sync.
 * Membership needs no table of its own: each signal row carries its `group_id` (and `group_name`),
 * and a signal belongs to at most one group, so `/v1/signal-groups/{id}/signals` would repeat the
 * signals list at one request per group per sync.
 */
export const signalGroups = defineResource({
  name: 'signal_groups',
  description: 'One row per signal group (key: project_id, id), from /v1/signal-groups.',
  path: '/v1/signal-groups',
  key: 'id',
  mode: 'full',
  params: { order_by: '-timestamp' }, // the SDK's default, sent on every list
  sortOrder: 'desc',
  allProjects: false, // as signals: read one project at a time
  optional: true, // a server built from the spec has no /v1/signal-groups: skipped there, not failed
  maxPageSize: 100,
  // Names and descriptions are free text (SDK strings): declared, so type inference never applies to them.
  columns: {
    id: 'string',
    created_at: 'timestamp',
    updated_at: 'timestamp',
    signal_count: 'int64',
    name: 'string',
    description: 'string',
    org_id: 'string',
  },
});
