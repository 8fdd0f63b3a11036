import type { DeletionChange, WindowCount } from '../../src/load/destination.js';

/** Event `e2` of `window`'s project deleted at the source, with its spans and signal rows (the loaders' deletion tests). */
export function deletionOfE2(
  action: DeletionChange['action'],
  window: WindowCount,
  atIso: string,
  runId = 'run-1',
): DeletionChange {
  return {
    action,
    projectId: window.projectId,
    ids: ['e2'],
    parent: { ...window, table: 'events', key: 'id' },
    followers: [
      { table: 'traces', column: 'event_id' },
      { table: 'event_signals', column: 'event_id' },
    ],
    atIso,
    runId,
  };
}
