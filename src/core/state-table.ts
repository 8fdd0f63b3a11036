/**
 * State kept beside the data: the warehouse's `_query_sync_state` table, one row per state key
 * (`version`, `projects`, `stream:<resource>:<scope>`, `section:<name>`), its value as JSON text.
 *
 * Keys are fine-grained so that writers never overwrite each other's keys, and every change is
 * computed from the state as last committed, inside the transaction that writes it (`prepare`):
 * a split walk's concurrent sub-windows, a children drain and a parent walk all change state, and a
 * document computed before another commit landed would regress that commit's checkpoint.
 *
 * The protocol between the state store (which owns the document) and a destination (which owns the
 * transaction): the store hands a `StateCommit` with a batch (`LoadBatch.state`) or alone
 * (`StateTable.writeState`); the destination calls `prepare` right before its transaction, writes
 * the rows it returns IN that transaction, and calls `finish` once with whether it committed.
 * Between the two the store lets no other commit prepare, so commits apply in order.
 */

/** One row of `_query_sync_state`. A `value` of `null` deletes the key. */
export interface StateRow {
  readonly key: string;
  /** JSON text of the key's value; `null`: the key is removed. */
  readonly value: string | null;
}

/**
 * One read of a parent record's children (the children book, `_query_sync_children`): appended in
 * the transaction of the children rows it describes. The book is what makes the set of parents
 * whose children are owed a fact of the warehouse: a parent row with no final read is owed.
 */
export interface ChildRead {
  /** The child resource, e.g. `traces`. */
  readonly resource: string;
  readonly projectId: string;
  readonly parentId: string;
  /** The parent's own time (ISO): a read while the parent was young and empty is not final. */
  readonly parentAt: string;
  /** Children rows the read answered. */
  readonly children: number;
  /** When it was read (ISO). */
  readonly readAt: string;
}

/** Name of the children book in every destination that keeps one. */
export const CHILD_BOOK_TABLE = '_query_sync_children';

export interface StateCommit {
  /** The rows to write; called once, right before the transaction. Holds other commits back until `finish`. */
  prepare(): Promise<readonly StateRow[]>;
  /** Reads of the children book to append in the same transaction (none: absent or empty). */
  readonly childReads?: readonly ChildRead[];
  /** Called once after `prepare`: whether the transaction (rows and state) committed. */
  finish(committed: boolean): Promise<void>;
}

/** A warehouse that keeps query-sync's state (the destination, seen by the state store). */
export interface StateTable {
  /** Where the state lives, for messages: e.g. `table _query_sync_state of DuckDB file /data/w.duckdb`. */
  readonly stateLocation: string;
  /** Every row of the state table; empty when the table does not exist yet. */
  readState(): Promise<readonly StateRow[]>;
  /** Write a state change that has no batch (a mark at a window's end, a project, a server fact), in its own transaction. */
  writeState(commit: StateCommit): Promise<void>;
}

/** Name of the state table in every destination. */
export const STATE_TABLE = '_query_sync_state';
