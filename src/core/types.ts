/**
 * Shared types. This module imports nothing of ours: every other layer may depend on it.
 */

/** A JSON value as parsed losslessly: integers beyond 2^53 arrive as `bigint`. */
export type JsonValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | readonly JsonValue[]
  | { readonly [key: string]: JsonValue };

/** One record exactly as the API returned it. */
export type ApiRecord = { readonly [key: string]: JsonValue };

/**
 * The logical column types of the warehouse. Each destination maps them to its own SQL types
 * (see `column-types.ts`), so the two destinations agree on meaning.
 */
export type LogicalType = 'string' | 'int64' | 'float64' | 'bool' | 'timestamp' | 'json';

export interface ColumnDef {
  readonly name: string;
  readonly type: LogicalType;
}

/**
 * A normalized cell. `timestamp` cells are ISO-8601 strings with an offset, `json` cells are JSON
 * text (bigints kept exact), `int64` cells are `bigint`.
 */
export type CellValue = string | number | bigint | boolean | null;

/** One warehouse row: column name → cell. */
export type Row = Record<string, CellValue>;

/** Order in which a list endpoint returns records, when known. */
type SortOrder = 'desc' | 'asc' | 'unknown';

/** How the value of a resource's cursor field is written. */
type CursorFormat = 'iso' | 'epoch_ns';

/**
 * The declaration of one API resource, kept in `connectors/`. Everything that can differ on the
 * real service (field names, parameters, order, scope support, page sizes) lives here, so fixing
 * it is a one-line change there, never a change in `src/`.
 */
export interface ResourceDefinition {
  /** Resource and table name, e.g. `events`. */
  readonly name: string;
  /** What one row of the table is, its key and where it comes from: for readers (dbt's `sources.yml`). */
  readonly description?: string;
  /** List path, e.g. `/v1/events`. */
  readonly path: string;
  /** The record's key field (`id`, or `span_id` for traces). Rows are keyed by (`project_id`, key). */
  readonly key: string;
  /**
   * `incremental`: read windows of `cursorField` with the filters below and keep a high-water mark.
   * `full`: re-read everything every sync (for resources without a time filter).
   */
  readonly mode: 'incremental' | 'full';
  /** The record field the time window applies to (client-side cut-off uses it too). */
  readonly cursorField?: string;
  /** How `cursorField` values are written. @default 'iso' */
  readonly cursorFormat?: CursorFormat;
  /** Query parameter for the window's lower bound (inclusive), e.g. `timestamp[gte]`. */
  readonly filterGte?: string;
  /** Query parameter for the window's upper bound (exclusive), e.g. `timestamp[lt]`. */
  readonly filterLt?: string;
  /** Extra query parameters sent on every list request (e.g. an `order_by`). */
  readonly params?: Readonly<Record<string, string>>;
  /** The order the server is believed to use. Correctness never depends on it. */
  readonly sortOrder: SortOrder;
  /** Whether the all-projects scope (`*`) is accepted by this endpoint. */
  readonly allProjects: boolean;
  /**
   * Not every server has this endpoint (signal groups: in the SDK, not in the spec). A 404 or 405 on
   * it is learned once (kept in state, asked again a day later) and the resource skipped, not failed.
   */
  readonly optional?: boolean;
  /** Name of the page-size parameter. @default 'limit' */
  readonly pageSizeParam?: string;
  /**
   * An endpoint answering `{ "data": { "total": N } }` for the list's filters (the window bounds and
   * the project scope), e.g. `/v1/events/count`. `plan` estimates and `verify` reconciles only the
   * resources that have one.
   */
  readonly countPath?: string;
  /**
   * How a large window is cut into sub-windows walked at once (split walks): where the records lie
   * in time comes from a timeseries endpoint (`/v1/events/timeseries`), the resource's own
   * (`exact`: its counts are this resource's records) or a proxy (users' `last_seen`, spans and
   * conversations' `started_at` are events' times). Absent: a window is always one walk.
   */
  readonly split?: SplitDeclaration;
  /**
   * An endpoint answering counts per UTC bucket for the same filters (`/v1/events/timeseries`):
   * `verify` reconciles a whole range of day- or hour-aligned windows in one request with it.
   */
  readonly timeseriesPath?: string;
  /** Largest page the endpoint allows; a sync asks for this many (or a page cap it learned, docs/list-semantics.md). */
  readonly maxPageSize: number;
  /**
   * Other fields the list could be sorted by (conversations: `started_at`). A walk that stops by
   * order (`stopPastWindow`) trusts the order only once records told the cursor field apart from these.
   */
  readonly orderCandidates?: readonly string[];
  /** Column types known up front; other fields are inferred from their values. */
  readonly columns?: Readonly<Record<string, LogicalType>>;
  /** Column the table is partitioned on by day: BigQuery's partitions and the published copy's Parquet files (`publish/partitions.ts`). */
  readonly partitionColumn?: string;
  /**
   * The list has no filter on `cursorField` (conversations: only `started_at` filters, yet they
   * change as messages arrive). The walk relies on `sortOrder: 'desc'` instead and stops once a page
   * has passed the window's start; the order is checked record by record, and a walk that sees it
   * broken reads to the end (a full walk), so correctness never rests on the assumption.
   */
  readonly stopPastWindow?: boolean;
  /**
   * Records are enriched after they first appear (fields "may be absent for very recent events"):
   * each window is read once more when it has settled (`--settle`).
   */
  readonly settles?: boolean;
  /** Field holding when the service received the record (`status` shows how late records arrive). */
  readonly arrivalField?: string;
  /**
   * Read per parent record where the server cannot list by time: `param` takes the parent's key.
   * Only `traces` is (its parent: `events`), so the code calls such a resource a per-event resource
   * and its rows traces. Which events are read is a setting (`--traces`); `shownBy` names the
   * event's fields whose presence shows it has traces (the `traced` setting).
   */
  readonly perParent?: PerParentReads;
  /** Optional pure record transform applied before normalization. */
  readonly transform?: (record: ApiRecord) => ApiRecord;
  /**
   * Tables with one row per element of an array field (`event_signals` from `events.signals`),
   * written in the same write as the records and replaced with them (see `BridgeDefinition`).
   */
  readonly bridges?: readonly BridgeDefinition[];
}

/**
 * A bridge table: one row per element of an array field of each record, so analysts join instead
 * of unnesting JSON. The destination derives its rows from the parent rows as stored, in the same
 * write: the rows of every parent key in the batch are deleted, then the arrays unnested again, so
 * a record re-read with fewer elements keeps exactly its new ones.
 */
export interface BridgeDefinition {
  /** Table name, e.g. `event_signals`. */
  readonly table: string;
  /** The parent's array field, e.g. `signals`. */
  readonly field: string;
  /** Column holding the parent's key, e.g. `event_id`. */
  readonly parentColumn: string;
  /** Column holding the whole element as JSON (whatever else it carries), e.g. `signal`. */
  readonly elementColumn: string;
  /** Columns taken from each (object) element: column name, element field, type. */
  readonly elementFields: readonly { readonly column: string; readonly field: string; readonly type: LogicalType }[];
}

/** A bridge as a destination writes it: its table, and the parent column the array is stored in. */
export interface BridgeSchema {
  readonly definition: BridgeDefinition;
  /** The parent table's column holding the array (its field's column, see `SchemaTracker.columnFor`). */
  readonly sourceColumn: string;
  readonly table: TableSchema;
}

/** See `ResourceDefinition.split`. */
export interface SplitDeclaration {
  /** Answers `{ "data": { "buckets": [{ "timestamp", "count" }], "total" } }` for `interval` and the time filters below. */
  readonly timeseriesPath: string;
  /** The timeseries' time filters (inclusive lower, exclusive upper). */
  readonly timeseriesGte: string;
  readonly timeseriesLt: string;
  /** The timeseries counts this resource's records in the list's window (so cuts can fill whole pages). */
  readonly exact: boolean;
  /**
   * The count endpoint of what the timeseries counts, with the same time filters
   * (`/v1/events/count`): where a server's timeseries is absent, refuses, or answers in another
   * shape, counts over time ranges place the cuts instead (`extract/count-ranges.ts`).
   */
  readonly countPath?: string;
  /**
   * Where the timeseries is a proxy: a count of the resource's records in a window ending now, e.g.
   * `/v1/events/count?count_by=user_id` (users seen since the window's start are those whose
   * `last_seen` is in it), `{ path, param, value }`. It sizes the split; the timeseries places the cuts.
   */
  readonly count?: { readonly path: string; readonly param: string; readonly value: string };
  /**
   * Filters of the sub-windows when they are not `filterGte`/`filterLt`: a field never later than
   * `cursorField` (conversations: `started_at[…]`, while the window is on `last_message_at`). The
   * sub-windows then cover [0, window end) of that field, and each walk still cuts rows to the window.
   */
  readonly partGte?: string;
  readonly partLt?: string;
}
/** Which events get their traces read: all, those whose fields show some, or none. */
export type TraceSelection = 'all' | 'traced' | 'none';

/** How a per-event resource is read one parent record (an event) at a time (see `ResourceDefinition.perParent`). */
interface PerParentReads {
  /** The parent resource, e.g. `events`. */
  readonly parent: string;
  /** Query parameter naming the parent, e.g. `event_id`. */
  readonly param: string;
  /** Event fields whose non-empty value shows that traces exist, e.g. `tool_calls`. */
  readonly shownBy: readonly string[];
}

/** Which projects one walk reads, and how rows get their `project_id`. */
export interface ProjectScope {
  /** Stable key used in state and in summaries, e.g. `default`, `alpha`, `*`, `*[a,b]`. */
  readonly key: string;
  /** Value of the project header; `undefined` means the header is not sent. */
  readonly header: string | undefined;
  /** `project_ids` query parameter for a narrowed `*` read. */
  readonly projectIds?: readonly string[];
  /** `project_id` given to rows that do not carry one (single-project reads). */
  readonly fallbackProjectId: string | undefined;
}

/** The warehouse table for one resource. */
export interface TableSchema {
  readonly name: string;
  /** Key columns, in order: always `project_id` first. */
  readonly key: readonly string[];
  /** All columns known so far, in creation order. */
  readonly columns: readonly ColumnDef[];
  /** Column whose greater value wins when an older copy of a row arrives later. */
  readonly versionColumn?: string;
  /** Column the table is partitioned on by day (BigQuery; the published copy's Parquet files). */
  readonly partitionColumn?: string;
  /** Re-read in full every run (mode `full`): a destination may skip rows that did not change. */
  readonly fullRefresh?: boolean;
  /** Bridge tables rewritten with every write of this table (see `BridgeDefinition`). */
  readonly bridges?: readonly BridgeSchema[];
  /**
   * Columns a keyed merge sets only when it inserts the row (e.g. `first_matched_at`): a row seen
   * again keeps their first value.
   */
  readonly insertOnly?: readonly string[];
}

/** A saved search (`--search`), kept in `search_results`. */
export interface SavedSearch {
  /** The search's name in `search_results.search_name`. */
  readonly name: string;
  readonly query: string;
  readonly mode: 'text' | 'semantic' | 'regex';
  /** `search_in` (`user_input`, `assistant_output`); absent: the server's default (both). */
  readonly searchIn?: readonly string[];
  /** `threshold` (semantic search's least relevance, 0–1); absent: the server's default. */
  readonly threshold?: number;
}

/** Injected clock: every part that reads time takes one, so tests can fake it. */
export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}
