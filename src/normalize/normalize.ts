import { DELETED_AT_COLUMN } from '../core/deletions.js';
import { createHash } from 'node:crypto';
import { bridgeTable } from '../core/bridge.js';
import { DataError, trimBody } from '../core/errors.js';
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

import { SYNCED_AT_COLUMN } from '../core/table-schema.js';
/** Metadata column: the id of the run that last wrote the row (`run_id` of `_query_sync_runs`). */
const RUN_ID_COLUMN = '_run_id';
/** Properties a row built by computed keys keeps as a fast object in V8 (see `normalize`); more, and it is copied. */
const FAST_ROW_PROPERTIES = 16;
export const PROJECT_COLUMN = 'project_id';

/** An ISO-8601 instant with an explicit offset (a real date). A naive date-time stays a string. */
export function isIsoInstant(value: string): boolean {
  return canonicalTimestamp(value) !== undefined;
}

/**
 * Longest column name for a record field. BigQuery allows 300 characters; 13 are kept for the
 * variant suffix (`__v_timestamp`), so a field's variant column is as valid as its column.
 */
const MAX_FIELD_COLUMN_CHARS = 287;
/** BigQuery's limit on a column name (DuckDB has none that matters here). */
const MAX_COLUMN_CHARS = 300;
/**
 * A field name that is a column name as it is, in both destinations: letters, digits and `_`,
 * starting with a letter. (A leading `_` is refused: that namespace is our metadata's, `_synced_at`,
 * and BigQuery reserves `_PARTITION…`, `_TABLE_…`, `_FILE_…`, `_ROW_TIMESTAMP…`, `__ROOT__…`,
 * `_COLIDENTIFIER…`.)
 */
const PLAIN_NAME = /^[A-Za-z][A-Za-z0-9_]*$/;

/** `<cleaned name>__<8 hex of the field name's SHA-256>`: the column of a field renamed (see `columnFor`). */
export function renamedColumn(field: string, attempt = 0): string {
  let base = field.replace(/[^A-Za-z0-9_]/g, '_');
  if (!/^[A-Za-z]/.test(base)) base = `f_${base}`;
  const suffix = `__${createHash('sha256')
    .update(attempt === 0 ? field : `${field}\u0000${attempt}`)
    .digest('hex')
    .slice(0, 8)}`;
  return `${base.slice(0, MAX_FIELD_COLUMN_CHARS - suffix.length)}${suffix}`;
}

/** Something normalize had to say about the data (logged by the walk). */
export interface NormalizeNote {
  readonly level: 'info' | 'warn';
  readonly message: string;
}

/** Lone UTF-16 surrogates: a string no destination can store as it is (UTF-8 cannot encode them). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');
/** `String.prototype.isWellFormed` (ES2024, Node 20): whether a string has no lone surrogate, natively. */
const isWellFormed = (value: string): boolean => (value as unknown as { isWellFormed(): boolean }).isWellFormed();
/**
 * The same in JSON text: JSON.stringify writes a lone surrogate as a `\\udXXX` escape (a pair is
 * written as the character itself), one not preceded by an odd number of backslashes.
 */
const ESCAPED_SURROGATES = /(?<=(?:^|[^\\])(?:\\\\)*)\\ud[89a-f][0-9a-f]{2}/gi;
/** Data notes (warnings) logged one by one per drain; the rest are counted in one line. */
const MAX_NOTES_PER_DRAIN = 5;

/**
 * Turns records of one resource into rows, and owns that table's schema. Pure apart from the
 * schema it grows: a field first seen in a later record becomes a new column; a value that does not
 * fit its column's type goes to a variant column `<column>__v_<type>` (as dlt does), so a sync never
 * fails because the data changed shape and no value is coerced lossily.
 *
 * Column names are ours: `project_id`, `_synced_at` and the key are set by us, and a field's
 * column is its name only when that is a plain name (`PLAIN_NAME`, at most
 * `MAX_FIELD_COLUMN_CHARS`) no other column has, ignoring case. Otherwise (a record's own
 * `project_id` in a one-project read, `_synced_at`, `Plan` beside `plan`, an empty or 400-character
 * name, `a.b`) it is `renamedColumn(field)`. The hash depends on the field name only, and the first
 * field to take a name keeps it: the table's columns (passed in as `existing`) record who came
 * first, so the mapping is the same on every run.
 */
export class SchemaTracker {
  readonly resource: ResourceDefinition;
  private readonly columns = new Map<string, LogicalType>();
  /** Lower-cased column name → who holds it: `meta`, `field:<name>`, `variant:<column>:<type>`, `existing:<column>`. */
  private readonly owners = new Map<string, string>();
  private readonly fieldColumns = new Map<string, string>();
  private notes: NormalizeNote[] = [];

  /** `_run_id` of every row this tracker makes (`undefined`: the column stays empty, e.g. `check`). */
  private readonly runId: string | undefined;

  constructor(resource: ResourceDefinition, existing?: readonly ColumnDef[], runId?: string) {
    this.resource = resource;
    this.runId = runId;
    this.claim(PROJECT_COLUMN, 'meta', 'string');
    this.claim(SYNCED_AT_COLUMN, 'meta', 'timestamp');
    // After the existing columns would be more natural, but a name must be claimed before fields:
    // a table created before `_run_id` existed gets it by the usual ALTER TABLE ADD COLUMN.
    this.owners.set(RUN_ID_COLUMN, 'meta');
    if (runId !== undefined) this.claim(RUN_ID_COLUMN, 'meta', 'string');
    // Reconcile's deletion mark is set and cleared by reconcile alone: a write leaves it as it is.
    this.owners.set(DELETED_AT_COLUMN, 'meta');
    this.claim(resource.key, `field:${resource.key}`, resource.columns?.[resource.key] ?? 'string');
    this.fieldColumns.set(resource.key, resource.key);
    for (const column of existing ?? []) {
      if (!this.owners.has(column.name.toLowerCase())) this.claim(column.name, `existing:${column.name}`, column.type);
    }
    for (const [name, type] of Object.entries(resource.columns ?? {})) this.add(this.columnFor(name), type);
  }

  get schema(): TableSchema {
    return {
      name: this.resource.name,
      key: [PROJECT_COLUMN, this.resource.key],
      columns: [...this.columns].map(([name, type]) => ({ name, type })),
      versionColumn: this.resource.cursorField,
      partitionColumn: this.resource.partitionColumn,
      fullRefresh: this.resource.mode === 'full',
      ...(this.resource.bridges === undefined
        ? {}
        : {
            bridges: this.resource.bridges.map((b) => ({
              definition: b,
              sourceColumn: this.columnFor(b.field),
              table: bridgeTable(b),
            })),
          }),
    };
  }

  /** Renames and data notes since the last call, for the log. */
  drainNotes(): NormalizeNote[] {
    const out = this.notes;
    this.notes = [];
    const warnings = out.filter((n) => n.level === 'warn');
    if (warnings.length <= MAX_NOTES_PER_DRAIN) return out;
    return [
      ...out.filter((n) => n.level !== 'warn'),
      ...warnings.slice(0, MAX_NOTES_PER_DRAIN),
      {
        level: 'warn',
        message: `… and ${warnings.length - MAX_NOTES_PER_DRAIN} more such values of ${this.resource.name} in this page`,
      },
    ];
  }

  /**
   * One record → one row. `projectId` is the scope's project for one-project reads, `undefined`
   * for all-projects reads (the record's `project_id` is then the row's). Throws `DataError` when
   * the key or the project cannot be found.
   */
  normalize(input: ApiRecord, projectId: string | undefined, syncedAt: string): Row {
    const record = this.resource.transform ? this.resource.transform(input) : input;
    const keyField = this.resource.key;
    const keyText = keyAsText(record[keyField]);
    if (keyText === undefined) {
      throw new DataError(
        `expected every record to carry its key field "${keyField}" (a non-empty string or a number), got ${
          record[keyField] === undefined ? 'none' : stringifyJson(record[keyField])
        } in record ${trimBody(stringifyJson(record), 160)}`,
      );
    }
    const key = this.wellFormed(keyText, keyField, keyText);
    let rowProject = projectId;
    if (rowProject === undefined) {
      const own = record[PROJECT_COLUMN];
      if (typeof own === 'string' && own !== '') rowProject = own;
    }
    if (rowProject === undefined) {
      throw new DataError(
        `expected "${PROJECT_COLUMN}" (a project slug) on a record read across all projects, got ${stringifyJson(record[PROJECT_COLUMN] ?? null)} (key ${key})`,
      );
    }
    const row: Row = { [PROJECT_COLUMN]: rowProject, [keyField]: key };
    let properties = 2;
    // `for … in`, not `Object.entries`: no array of pairs per record (a first sync's garbage). A
    // parsed record's keys are all its own.
    for (const field in record) {
      const value = record[field] as JsonValue;
      if (field === keyField || value === null) continue;
      // The project of an all-projects read is the row's project_id; in a one-project read the
      // scope is, and a record's own project_id is kept only when it says something else.
      if (field === PROJECT_COLUMN && (projectId === undefined || value === projectId)) continue;
      const column = this.columnFor(field);
      const declared = this.columns.get(column);
      const type = declared ?? inferType(value);
      const cell = toCell(type, value);
      if (cell !== undefined) {
        if (declared === undefined) this.add(column, type);
        row[column] = typeof cell === 'string' ? this.wellFormed(cell, field, key, type === 'json') : cell;
        properties += 1;
        continue;
      }
      // Does not fit the column: keep it exact in a variant column of its own type.
      const variantType = inferType(value);
      const variant = this.variantFor(column, variantType);
      const variantCell = toCell(variantType, value) ?? null;
      row[variant] =
        typeof variantCell === 'string'
          ? this.wellFormed(variantCell, field, key, variantType === 'json')
          : variantCell;
      properties += 1;
    }
    row[SYNCED_AT_COLUMN] = syncedAt;
    if (this.runId !== undefined) row[RUN_ID_COLUMN] = this.runId;
    // V8 makes an object given more than about 19 properties by computed keys a hash table
    // ("dictionary mode"): a traces row of 21 columns held about 675 bytes of heap instead of about
    // 305, and every read of a cell (the Appender, `rowBytes`, `dedupeRows`) was a hash lookup. A
    // copy by spread is a fast object again, its properties in place; a row of at most
    // FAST_ROW_PROPERTIES properties is returned as built.
    // Measured in a first sync: docs/benchmarks.md, First sync, fourth step.
    return properties + 2 > FAST_ROW_PROPERTIES ? { ...row } : row;
  }

  /** The column of a record field (see the class comment); the same for the same field every time. */
  columnFor(field: string): string {
    const known = this.fieldColumns.get(field);
    if (known !== undefined) return known;
    const owner = `field:${field}`;
    let reason: string | undefined;
    if (!PLAIN_NAME.test(field))
      reason =
        field === ''
          ? 'an empty field name'
          : /^_/.test(field)
            ? 'names starting with "_" are reserved for our metadata columns'
            : 'not letters, digits and "_" starting with a letter';
    else if (field.length > MAX_FIELD_COLUMN_CHARS) reason = `longer than ${MAX_FIELD_COLUMN_CHARS} characters`;
    let column = field;
    if (reason === undefined) {
      const holder = this.owners.get(field.toLowerCase());
      if (holder !== undefined && holder !== owner && holder !== `existing:${field}`) {
        reason =
          holder === 'meta'
            ? `"${field}" is a column query-sync sets`
            : `another column differs from it only in case (${holderName(holder)})`;
      }
    }
    if (reason !== undefined) {
      for (let attempt = 0; ; attempt += 1) {
        column = renamedColumn(field, attempt);
        const holder = this.owners.get(column.toLowerCase());
        if (holder === undefined || holder === owner || holder === `existing:${column}`) break;
      }
      this.notes.push({
        level: 'info',
        message: `field ${JSON.stringify(field)} of ${this.resource.name} is stored in column "${column}": ${reason}`,
      });
    }
    this.owners.set(column.toLowerCase(), owner);
    this.fieldColumns.set(field, column);
    return column;
  }

  private variantFor(column: string, type: LogicalType): string {
    const owner = `variant:${column}:${type}`;
    for (let attempt = 0; ; attempt += 1) {
      const suffix = `__v_${type}`;
      const name =
        attempt === 0 && column.length + suffix.length <= MAX_COLUMN_CHARS
          ? `${column}${suffix}`
          : `${renamedColumn(`${column}${suffix}`, attempt)}`;
      const holder = this.owners.get(name.toLowerCase());
      if (holder === undefined || holder === owner || holder === `existing:${name}`) {
        this.claim(name, owner, type);
        return name;
      }
    }
  }

  /**
   * A string a destination can store: lone UTF-16 surrogates (a cut emoji) cannot be encoded in
   * UTF-8, which both destinations store, and DuckDB's JSON type refuses them even escaped (a
   * batch holding one would fail on every run). They become U+FFFD, and each such value is
   * reported (resource, record key, field): stored, visibly, and never altered silently.
   */
  private wellFormed(value: string, field: string, key: string, json = false): string {
    // The quick tests first (most values hold neither an escape nor a surrogate): the regular
    // expressions cost a first sync about a twentieth of its main thread.
    const fixed = json
      ? value.indexOf('\\u') < 0 && value.indexOf('\\U') < 0
        ? value
        : value.replace(ESCAPED_SURROGATES, '\\ufffd')
      : isWellFormed(value)
        ? value
        : value.replace(LONE_SURROGATES, '\uFFFD');
    if (fixed === value) return value;
    this.notes.push({
      level: 'warn',
      message: `record ${key} of ${this.resource.name}: field ${JSON.stringify(field)} holds a lone UTF-16 surrogate (not valid Unicode text; a cut emoji?), stored as U+FFFD`,
    });
    return fixed;
  }

  private claim(name: string, owner: string, type: LogicalType): void {
    this.owners.set(name.toLowerCase(), owner);
    this.add(name, type);
  }

  private add(name: string, type: LogicalType): void {
    if (!this.columns.has(name)) this.columns.set(name, type);
  }
}

function holderName(holder: string): string {
  const i = holder.indexOf(':');
  return i < 0 ? holder : `"${holder.slice(i + 1).split(':')[0] ?? ''}"`;
}

/**
 * A key as text, whatever JSON type it came in (`123` and `"123"` are the same key), so a numeric
 * id can never become a NULL key. `undefined` for a missing, empty, boolean or nested key.
 */
export function keyAsText(value: JsonValue | undefined): string | undefined {
  if (typeof value === 'string') return value === '' ? undefined : value;
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
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
