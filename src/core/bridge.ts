import type { BridgeDefinition, TableSchema } from './types.js';

/** Position of the element in its array (0-based): with the parent's key, a bridge row's key. */
const BRIDGE_ORDINAL_COLUMN = 'ordinal';

/**
 * The table of a bridge: (`project_id`, parent key, `ordinal`) as key, the element's declared
 * fields, the whole element as JSON, and the parent row's `_synced_at` and `_run_id`.
 */
export function bridgeTable(bridge: BridgeDefinition): TableSchema {
  return {
    name: bridge.table,
    key: ['project_id', bridge.parentColumn, BRIDGE_ORDINAL_COLUMN],
    columns: [
      { name: 'project_id', type: 'string' },
      { name: bridge.parentColumn, type: 'string' },
      { name: BRIDGE_ORDINAL_COLUMN, type: 'int64' },
      ...bridge.elementFields.map((f) => ({ name: f.column, type: f.type })),
      { name: bridge.elementColumn, type: 'json' },
      { name: '_synced_at', type: 'timestamp' },
      { name: '_run_id', type: 'string' },
    ],
  };
}
