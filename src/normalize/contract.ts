import { DataError } from '../core/errors.js';
import type { ApiRecord, ColumnDef, ResourceDefinition } from '../core/types.js';
import { inferType, PROJECT_COLUMN, toCell } from './normalize.js';

/**
 * Schema contracts (dlt's): what a run may do to the warehouse's tables.
 * - `evolve` (default): new fields become columns, a value of another type a variant column.
 * - `freeze-columns`: a table that exists keeps its columns: a record with a new field, or a value
 *   that would need a variant column, fails its stream with a message naming the field. New tables
 *   may still be created.
 * - `freeze`: the same, and no table may be created either.
 * Checked in the record transform, before normalization, so a refused record is never written and
 * the stream's state does not move past it.
 */
export type SchemaContract = 'evolve' | 'freeze-columns' | 'freeze';

/** `resource` with the contract checked on every record (`existing`: the table's columns, `undefined` when it does not exist). */
export function withContract(
  resource: ResourceDefinition,
  existing: readonly ColumnDef[] | undefined,
  contract: SchemaContract,
): ResourceDefinition {
  if (contract === 'evolve') return resource;
  const own = resource.transform;
  if (existing === undefined) {
    if (contract === 'freeze-columns') return resource;
    return Object.freeze({
      ...resource,
      transform: (): ApiRecord => {
        throw new DataError(
          `the table "${resource.name}" does not exist and --schema-contract freeze allows no new table: create it with a run under "evolve" (or "freeze-columns") first`,
        );
      },
    });
  }
  const columns = new Map(existing.map((c) => [c.name, c.type]));
  return Object.freeze({
    ...resource,
    transform: (input: ApiRecord): ApiRecord => {
      const record = own === undefined ? input : own(input);
      for (const [field, value] of Object.entries(record)) {
        if (value === null || field === PROJECT_COLUMN) continue;
        const type = columns.get(field);
        if (type === undefined) {
          throw new DataError(
            `--schema-contract ${contract}: a record of ${resource.name} (key ${String(record[resource.key])}) has the new field "${field}" (${inferType(value)}), ` +
              `which table "${resource.name}" has no column for; run once with --schema-contract evolve to add it, or exclude it with --exclude-columns ${resource.name}.${field}`,
          );
        }
        if (toCell(type, value) === undefined) {
          throw new DataError(
            `--schema-contract ${contract}: field "${field}" of ${resource.name} (key ${String(record[resource.key])}) is a ${inferType(value)} where column "${field}" is ${type}; ` +
              `under "evolve" it would go to the variant column ${field}__v_${inferType(value)}`,
          );
        }
      }
      return record;
    },
  });
}
