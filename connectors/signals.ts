import { defineResource } from '../src/core/resource.js';

/** Signal definitions: no time filter, so re-read in full every sync (a few rows). */
export const signals = defineResource({
  name: 'signals',
  path: '/v1/signals',
  key: 'id',
  mode: 'full',
  sortOrder: 'desc',
  allProjects: false, // field notes: signals reject `*` with 400
  maxPageSize: 100,
  columns: { id: 'string', created_at: 'timestamp' },
});
