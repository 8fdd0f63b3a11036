import type { DuckDBConnection } from '@duckdb/node-api';
import type { LeaseProvider } from '../state/leases/lease.js';
import type { OwedMark, StateTable } from '../core/state-table.js';

/**
 * What a destination may offer beyond reading and writing rows, one small interface each, and the
 * guard that tells whether a destination offers it. A destination class declares them as optional
 * members (`OptionalCapabilities`) and checks them once, when it is made: `capabilitiesOf(this)`
 * becomes its `can`. Callers read `destination.can.<capability>` (typed, or `undefined`), never the
 * optional members, which `Destination` does not expose.
 */

/** What a destination's queries were billed since it was opened (BigQuery on-demand bytes). */
export interface BillingTotals {
  /** Bytes billed, summed over query jobs (each at least 10 MB per table it references). */
  readonly bytesBilled: number;
  /** Bytes processed, before the per-job minimum. */
  readonly bytesProcessed: number;
  readonly queryJobs: number;
  /** Bytes billed per table the jobs were run for (MERGE, checks, counts), largest first. */
  readonly byTable: Readonly<Record<string, number>>;
}

/** A table and the shadow that replaces it (`Destination.replaceTables`). */
export interface TableSwap {
  readonly table: string;
  readonly shadow: string;
}

/** How a destination writes a table reference and a column name in SQL. */
export interface ViewDialect {
  readonly table: (name: string) => string;
  readonly column: (name: string) => string;
}

/** The rows `countWindow` counts. */
export interface WindowCount {
  readonly projectId: string;
  /** A timestamp column, e.g. `timestamp`. */
  readonly column: string;
  /** Inclusive lower bound (ISO instant). */
  readonly fromIso: string;
  /** Exclusive upper bound (ISO instant). */
  readonly toIso: string;
}

/** Which events owe their traces: the events table, the per-event resource, and what counts as read. */
export interface OwedTraces {
  /** The per-event resource, e.g. `traces` (the book's `resource`). */
  readonly resource: string;
  /** The events' table, key column and time column, e.g. `events`, `id`, `timestamp`. */
  readonly eventTable: string;
  readonly eventKey: string;
  readonly eventTime: string;
  /** Events before this instant (`--start`, ISO) are not owed. @default every event in the table */
  readonly fromIso?: string;
  /** Only events before this instant (ISO; the drain's look at a batch just stored). @default no bound */
  readonly toIso?: string;
  readonly nowMs: number;
  /** A read that answered none while its event was younger than this is asked again once it is this old (`--settle`); 0: every read is final. */
  readonly settleMs: number;
  /** `--traces traced`: only events where one of these columns is not empty. @default every event */
  readonly shownBy?: readonly string[];
  /**
   * The last complete listing of this project (every event owed then was read since): where the
   * destination can tell which partitions changed since (BigQuery), it reads only those and the
   * ones within the settle horizon. @default every event in range is read
   */
  readonly listedThrough?: OwedMark;
}

/**
 * A full owed listing at least this often, whatever changed: a week bounds what a change the
 * partitions' modification times would miss costs (a book row removed by hand, a table copied back
 * with its old times) at one full listing's price a week, a seventh of a daily one.
 */
export const OWED_FULL_EVERY_MS = 7 * 86_400_000;

/**
 * The trace book (`_query_sync_children`, appended through `StateCommit.traceReads` in the
 * transaction of the trace rows): which events in the warehouse owe their traces. An event row
 * owes them until a final read is booked: one that answered traces, or answered none once the
 * event was `settleMs` old. A read that answered none while the event was young makes it
 * owed again once it is `settleMs` old.
 */
export interface KeepsTraceBook {
  /** Up to `limit` events of `project` that owe their traces, newest first (`at`: epoch ms). */
  owedTraces(
    query: OwedTraces & { readonly project: string; readonly limit: number },
  ): Promise<readonly { readonly id: string; readonly at: number }[]>;
  /** Events that owe their traces, per project (those not due yet, young and read empty, not counted). */
  countOwedTraces(query: OwedTraces): Promise<Readonly<Record<string, number>>>;
  /** Forget every read of `resource` (of `project` only, when given): their events owe them again. */
  forgetTraces(resource: string, project?: string): Promise<void>;
}

/** Where the run lease lives when not beside the state file (BigQuery: runs in pods share no file). */
interface KeepsLeases {
  readonly leases: LeaseProvider;
}

/** What the destination's queries were billed (absent where queries cost nothing: DuckDB). */
interface Billed {
  /** Bytes billed by this destination's queries so far (the run's, as a destination is opened per run). */
  billing(): BillingTotals;
}

/** Rows of one project in a time window, for `verify` and reconciliation. */
interface CountsWindows {
  /**
   * Rows of one project whose `column` lies in [fromIso, toIso), not counting rows marked deleted at
   * the source (`_deleted_at`); 0 when the table does not exist.
   */
  countWindow(table: string, window: WindowCount): Promise<number>;
}

/** The keys of one project's rows in a window (`TracksDeletions.keysInWindow`). */
export interface WindowKeys {
  /** Rows not marked deleted. */
  readonly live: readonly string[];
  /** Rows marked deleted at the source (`_deleted_at` set). */
  readonly marked: readonly string[];
}

/** Rows of one project that follow a parent's deletion: a table read per parent (traces, per event) or a bridge table, and its parent-key column. */
export interface DeletionFollower {
  readonly table: string;
  /** The column holding the parent's key, e.g. `event_id`. */
  readonly column: string;
}

/** One reconcile window's deletions, applied to a parent table and the tables that follow it. */
export interface DeletionChange {
  /** `mark`: set `_deleted_at` where unset; `delete`: remove; `unmark`: clear `_deleted_at` (the record is listed again). */
  readonly action: 'mark' | 'delete' | 'unmark';
  readonly projectId: string;
  /** The parent's keys. */
  readonly ids: readonly string[];
  /** The parent table, its key and time column, and the window its rows lie in (a partitioned table is pruned to it). */
  readonly parent: WindowCount & { readonly table: string; readonly key: string };
  readonly followers: readonly DeletionFollower[];
  /** `_deleted_at` of marked rows, and their `_synced_at` (the row was written by this run). */
  readonly atIso: string;
  readonly runId: string;
}

/** Rows changed per table by a `DeletionChange`, and the bytes the destination processed for it (when it reports them). */
export interface DeletionResult {
  readonly rows: Readonly<Record<string, number>>;
  readonly bytesProcessed?: number;
}

/** Reconcile's id comparison and the deletion mark (`core/deletions.ts`). */
interface TracksDeletions {
  /** Keys of one project's rows whose `column` lies in [fromIso, toIso); empty when the table does not exist. */
  keysInWindow(table: string, window: WindowCount & { readonly key: string }): Promise<WindowKeys>;
  /** Apply one window's deletions to the parent and its followers at once (one transaction). */
  applyDeletions(change: DeletionChange): Promise<DeletionResult>;
}

/** Rows per project, for `status`. */
interface CountsByProject {
  /** Rows per `project_id`; empty when the table does not exist. */
  countByProject(table: string): Promise<Readonly<Record<string, number>>>;
}

/** Drop a table (a shadow a refresh that did not finish left behind). */
interface DropsTables {
  /** Drop a table if it exists. */
  dropTable(table: string): Promise<void>;
}

/** `sync --full-refresh`: tables replaced by their shadows at once. */
interface ReplacesTables {
  /**
   * Replace each `table` with its `shadow`, all in one transaction (a table and its bridge tables):
   * readers see the old rows or the new ones, never a half-empty table or a bridge out of step with
   * its parent. A missing `shadow` (nothing was read) empties `table`.
   */
  replaceTables(swaps: readonly TableSwap[]): Promise<void>;
}

/** A destination that can full-refresh: replace tables and drop the shadows. */
export type Refreshes = ReplacesTables & DropsTables;

/** Views over the tables (the conversation-events view). */
interface DefinesViews {
  /**
   * Create or replace a view. `select` builds its query in this destination's dialect from how it
   * names a table and quotes a column.
   */
  defineView(name: string, select: (sql: ViewDialect) => string): Promise<void>;
}

/** The destination is a DuckDB file a read copy is published from (`publish/`), between two of its writes. */
export interface PublishesCopy {
  /** Run `work` on the destination's connection between two writes: it sees the file as of the last commit. */
  exclusive<T>(work: (connection: DuckDBConnection) => Promise<T>): Promise<T>;
}

/** The optional members, as a destination declares them (each may be absent). */
export type OptionalCapabilities = Partial<
  StateTable &
    KeepsLeases &
    Billed &
    CountsWindows &
    TracksDeletions &
    CountsByProject &
    Refreshes &
    DefinesViews &
    KeepsTraceBook &
    PublishesCopy
>;

export function keepsState<D extends OptionalCapabilities>(d: D): d is D & StateTable {
  return d.readState !== undefined && d.writeState !== undefined && d.stateLocation !== undefined;
}
function keepsLeases<D extends OptionalCapabilities>(d: D): d is D & KeepsLeases {
  return d.leases !== undefined;
}
function isBilled<D extends OptionalCapabilities>(d: D): d is D & Billed {
  return d.billing !== undefined;
}
function countsWindows<D extends OptionalCapabilities>(d: D): d is D & CountsWindows {
  return d.countWindow !== undefined;
}
function tracksDeletions<D extends OptionalCapabilities>(d: D): d is D & TracksDeletions {
  return d.keysInWindow !== undefined && d.applyDeletions !== undefined;
}
function countsByProject<D extends OptionalCapabilities>(d: D): d is D & CountsByProject {
  return d.countByProject !== undefined;
}
function dropsTables<D extends OptionalCapabilities>(d: D): d is D & DropsTables {
  return d.dropTable !== undefined;
}
export function refreshes<D extends OptionalCapabilities>(d: D): d is D & Refreshes {
  return d.replaceTables !== undefined && d.dropTable !== undefined;
}
function keepsTraceBook<D extends OptionalCapabilities>(d: D): d is D & KeepsTraceBook {
  return d.owedTraces !== undefined && d.countOwedTraces !== undefined && d.forgetTraces !== undefined;
}
function definesViews<D extends OptionalCapabilities>(d: D): d is D & DefinesViews {
  return d.defineView !== undefined;
}
function publishesCopy<D extends OptionalCapabilities>(d: D): d is D & PublishesCopy {
  return d.exclusive !== undefined;
}

/** What one destination offers, each capability checked once; absent ones are `undefined`. */
export interface Capabilities {
  readonly state?: StateTable;
  readonly leases?: LeaseProvider;
  readonly billing?: Billed;
  readonly windows?: CountsWindows;
  readonly deletions?: TracksDeletions;
  readonly byProject?: CountsByProject;
  readonly drop?: DropsTables;
  readonly refresh?: Refreshes;
  readonly views?: DefinesViews;
  readonly traceBook?: KeepsTraceBook;
  readonly publish?: PublishesCopy;
}

/** Check every capability of `d` once (where it is opened). Methods stay bound to `d`. */
export function capabilitiesOf(d: OptionalCapabilities): Capabilities {
  return {
    ...(keepsState(d)
      ? {
          state: {
            stateLocation: d.stateLocation,
            readState: () => d.readState(),
            writeState: (commit) => d.writeState(commit),
          },
        }
      : {}),
    ...(keepsLeases(d) ? { leases: d.leases } : {}),
    ...(isBilled(d) ? { billing: { billing: () => d.billing() } } : {}),
    ...(countsWindows(d) ? { windows: { countWindow: (table, window) => d.countWindow(table, window) } } : {}),
    ...(tracksDeletions(d)
      ? {
          deletions: {
            keysInWindow: (table, window) => d.keysInWindow(table, window),
            applyDeletions: (change) => d.applyDeletions(change),
          },
        }
      : {}),
    ...(countsByProject(d) ? { byProject: { countByProject: (table) => d.countByProject(table) } } : {}),
    ...(dropsTables(d) ? { drop: { dropTable: (table) => d.dropTable(table) } } : {}),
    ...(refreshes(d)
      ? { refresh: { replaceTables: (swaps) => d.replaceTables(swaps), dropTable: (table) => d.dropTable(table) } }
      : {}),
    ...(definesViews(d) ? { views: { defineView: (name, select) => d.defineView(name, select) } } : {}),
    ...(keepsTraceBook(d)
      ? {
          traceBook: {
            owedTraces: (query) => d.owedTraces(query),
            countOwedTraces: (query) => d.countOwedTraces(query),
            forgetTraces: (resource, project) => d.forgetTraces(resource, project),
          },
        }
      : {}),
    ...(publishesCopy(d) ? { publish: { exclusive: (work) => d.exclusive(work) } } : {}),
  };
}
