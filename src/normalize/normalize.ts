import { DataError } from '../core/errors.js';
import { stringifyJson } from '../core/json.js';
import { canonicalTimestamp } from './timestamp.js';
import type {
  ApiRecord,
  CellValue,
  ColumnDef,
  JsonValue,
  LogicalType,
  ResourceDefinition,
  Row,
  TableSchema,
} from '../core/types.js';

/** Metadata column: when this run wrote the row (ISO instant). */
export const SYNCED_AT_COLUMN = '_synced_at';
export const PROJECT_COLUMN = 'project_id';

/** An ISO-8601 instant with an explicit offset (a real date). A naive date-time stays a string. */
export function isIsoInstant(value: string): boolean {
  return canonicalTimestamp(value) !== undefined;
}

/**
 * Turns records of one resource into rows, and owns that table's schema. Pure apart from the
 * schema it grows: a field first seen in a later record becomes a new column; a value that does not
 * fit its column's type goes to a variant column `<field>__v_<type>` (as dlt does), so a sync never
 * fails because the data changed shape and no value is coerced lossily.
 */
export class SchemaTracker {
  readonly resource: ResourceDefinition;
  private readonly columns = new Map<string, LogicalType>();

  constructor(resource: ResourceDefinition, existing?: readonly ColumnDef[]) {
    this.resource = resource;
    this.add(PROJECT_COLUMN, 'string');
    this.add(resource.key, resource.columns?.[resource.key] ?? 'string');
    for (const column of existing ?? []) this.add(column.name, column.type);
    for (const [name, type] of Object.entries(resource.columns ?? {})) this.add(name, type);
    this.add(SYNCED_AT_COLUMN, 'timestamp');
  }

  get schema(): TableSchema {
    return {
      name: this.resource.name,
      key: [PROJECT_COLUMN, this.resource.key],
      columns: [...this.columns].map(([name, type]) => ({ name, type })),
      versionColumn: this.resource.cursorField,
      partitionColumn: this.resource.partitionColumn,
      fullRefresh: this.resource.mode === 'full',
    };
  }

  /**
   * One record → one row. `projectId` is used when the record carries no `project_id`
   * (single-project reads). Throws `DataError` when the key or the project cannot be found.
   */
  normalize(input: ApiRecord, projectId: string | undefined, syncedAt: string): Row {
    const record = this.resource.transform ? this.resource.transform(input) : input;
    const key = record[this.resource.key];
    if (key === undefined || key === null || key === '') {
      throw new DataError(
        `expected every record to carry its key field "${this.resource.key}", got a record with fields [${Object.keys(record).join(', ')}]`,
      );
    }
    const rowProject = typeof record[PROJECT_COLUMN] === 'string' ? (record[PROJECT_COLUMN] as string) : projectId;
    if (rowProject === undefined || rowProject === '') {
      throw new DataError(`expected "${PROJECT_COLUMN}" on a record read across all projects, got none (key ${String(key)})`);
    }
    const row: Row = { [PROJECT_COLUMN]: rowProject };
    for (const [field, value] of Object.entries(record)) {
      if (field === PROJECT_COLUMN || value === null) continue;
      const declared = this.columns.get(field);
      const type = declared ?? inferType(value);
      const cell = toCell(type, value);
      if (cell !== undefined) {
        if (declared === undefined) this.add(field, type);
        row[field] = cell;
        continue;
      }
      // Does not fit the column: keep it exact in a variant column of its own type.
      const variantType = inferType(value);
      const variant = `${field}__v_${variantType}`;
      this.add(variant, variantType);
      row[variant] = toCell(variantType, value) ?? null;
    }
    row[SYNCED_AT_COLUMN] = syncedAt;
    return row;
  }

  private add(name: string, type: LogicalType): void {
    if (!this.columns.has(name)) this.columns.set(name, type);
  }
}

export function inferType(value: JsonValue): LogicalType {
  if (typeof value === 'boolean') return 'bool';
  if (typeof value === 'bigint') return 'int64';
  if (typeof value === 'number') return Number.isInteger(value) ? 'int64' : 'float64';
  if (typeof value === 'string') return isIsoInstant(value) ? 'timestamp' : 'string';
  return 'json';
}

/** The cell for `value` in a column of `type`, or `undefined` when it does not fit. */
export function toCell(type: LogicalType, value: JsonValue): CellValue | undefined {
  if (value === null) return null;
  switch (type) {
    case 'string':
      return typeof value === 'string' ? value : undefined;
    case 'int64':
      if (typeof value === 'bigint') return value;
      return typeof value === 'number' && Number.isInteger(value) ? BigInt(value) : undefined;
    case 'float64':
      return typeof value === 'number' ? value : undefined;
    case 'bool':
      return typeof value === 'boolean' ? value : undefined;
    case 'timestamp':
      // One canonical UTC form, so both destinations store the same instant (see timestamp.ts).
      return typeof value === 'string' ? canonicalTimestamp(value) : undefined;
    case 'json':
      return stringifyJson(value);
  }
}

/**
 * The cursor field of a record as epoch milliseconds, for the client-side window cut-off.
 * `undefined` when the record has no usable cursor value.
 */
export function cursorMillis(resource: ResourceDefinition, record: ApiRecord): number | undefined {
  if (resource.cursorField === undefined) return undefined;
  const value = record[resource.cursorField];
  if ((resource.cursorFormat ?? 'iso') === 'epoch_ns') {
    if (typeof value === 'bigint') return Number(value / 1_000_000n);
    if (typeof value === 'number') return Math.floor(value / 1_000_000);
    if (typeof value === 'string' && /^\d+$/.test(value)) return Number(BigInt(value) / 1_000_000n);
    return undefined;
  }
  if (typeof value !== 'string') return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}
