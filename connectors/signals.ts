import { defineResource } from '../src/core/resource.js';

/** Signal definitions: no time filter, so re-read in full every sync (a few rows). */
export const signals = defineResource({
  name: 'signals',
  description:
    'One row per signal definition (key: project_id, id), from /v1/signals; group_id and group_name give its signal group.',
  path: '/v1/signals',
  key: 'id',
  mode: 'full',
  params: { order_by: '-timestamp' }, // the SDK's default, sent on every list
  sortOrder: 'desc',
  allProjects: false, // field notes: signals reject `*` with 400
  maxPageSize: 100,
  // Names and descriptions are free text (SDK strings): declared, so type inference never applies to them.
  columns: {
    id: 'string',
    created_at: 'timestamp',
    type: 'string',
    name: 'string',
    description: 'string',
    group_id: 'string',
    group_name: 'string',
    sentiment: 'string',
  },
});
