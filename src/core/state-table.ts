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

export interface StateCommit {
  /** The rows to write; called once, right before the transaction. Holds other commits back until `finish`. */
  prepare(): Promise<readonly StateRow[]>;
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
