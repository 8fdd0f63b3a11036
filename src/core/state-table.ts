/**
 * State kept beside the data: the warehouse's `_query_sync_state` table, one row per state key
 * (`version`, `projects`, `stream:<resource>:<scope>`, `section:<name>`), its value as JSON text.
 *
 * Keys are fine-grained so that writers never overwrite each other's keys. A commit is data: the
 * state store computes a batch's state rows before the write (`StateCommit`), the destination writes
 * them with the batch's rows in one transaction and resolves once that transaction committed (or
 * rejects: nothing of it committed), and the store then takes the change into its document and
 * exports the file. Nothing waits on another commit, and a destination owes the store no call.
 *
 * Commits of one key may run at once (a split walk's sub-windows, a trace drain and an events
 * walk) and land in any order, so each row holds the key's value as last committed with only its
 * own batch's change applied: never a change whose rows are still in flight, so the state in the
 * warehouse is never ahead of its rows, whatever lands first or fails. It may be behind (a commit
 * that landed after another one of the same key wrote the older value): a crash then re-reads a
 * batch, and the store writes the key again once no commit is in flight (`state/store.ts`).
 */

/** One row of `_query_sync_state`. A `value` of `null` deletes the key. */
export interface StateRow {
  readonly key: string;
  /** JSON text of the key's value; `null`: the key is removed. */
  readonly value: string | null;
}

/**
 * One read of an event's traces (the trace book, `_query_sync_children`): appended in the
 * transaction of the trace rows it describes. The book is what makes the set of events whose
 * traces are owed a fact of the warehouse: an event row with no final read is owed. The fields are
 * written to the book's columns `resource`, `project_id`, `parent_id`, `parent_at`, `children`,
 * `read_at` (the persisted names, kept for existing warehouses).
 */
export interface TraceRead {
  /** The per-event resource, e.g. `traces`. */
  readonly resource: string;
  readonly projectId: string;
  readonly eventId: string;
  /** The event's own time (ISO): a read while the event was young and empty is not final. */
  readonly eventAt: string;
  /** Trace rows the read answered. */
  readonly traces: number;
  /** When it was read (ISO). */
  readonly readAt: string;
}

/**
 * Name of the trace book in every destination that keeps one. The persisted name (from when traces
 * were called children in the code) is kept for existing warehouses, as are its columns.
 */
export const TRACE_BOOK_TABLE = '_query_sync_children';

/**
 * What a commit writes to the state, beside a batch's rows (`LoadBatch.state`) or alone
 * (`StateTable.writeState`): written in the same transaction as those rows, or not at all.
 */
export interface StateCommit {
  /** Rows of `_query_sync_state`, each the whole new value of its key (`null`: the key is removed). */
  readonly rows: readonly StateRow[];
  /** Reads of the trace book to append in the same transaction (none: absent or empty). */
  readonly traceReads?: readonly TraceRead[];
}

/** A warehouse that keeps query-sync's state (the destination, seen by the state store). */
export interface StateTable {
  /** Where the state lives, for messages: e.g. `table _query_sync_state of DuckDB file /data/w.duckdb`. */
  readonly stateLocation: string;
  /** Every row of the state table; empty when the table does not exist yet. */
  readState(): Promise<readonly StateRow[]>;
  /**
   * Write a state change that has no batch (a mark at a window's end, a project, a server fact), in
   * its own transaction; resolves once it committed.
   */
  writeState(commit: StateCommit): Promise<void>;
}

/** Name of the state table in every destination. */
export const STATE_TABLE = '_query_sync_state';

/**
 * A complete owed listing of an event table's traces (`load/destination-capabilities.ts` `OwedTraces`,
 * kept in state by `state/books/traces.ts`): when it started, and when the last one that read every day did.
 */
export interface OwedMark {
  readonly listedAtMs: number;
  readonly fullAtMs: number;
}
