import type { STATE_VERSION } from './validate.js';

/**
 * The state document's shape (what the state file and `_query_sync_state` hold), apart from the
 * store that reads and writes it, so the row codec (`rows.ts`) and the store do not import each
 * other.
 */

/** A walk in progress: the window being read and the cursor of the next page not yet stored. */
export interface PendingWindow {
  readonly from: string;
  readonly to: string;
  readonly cursor?: string;
}

/**
 * A window read as sub-windows at once (a split walk): the sub-windows not yet stored to the end,
 * each with the cursor of its next page once it has one. The mark moves to `to` when none is left.
 */
export interface SplitWindow {
  readonly from: string;
  readonly to: string;
  readonly parts: readonly PendingWindow[];
}

/**
 * What one run of a stream did (`lastRun`): the one shape every book keeps, written by one function
 * (`StreamFrame.runRecord`, `sync/frame.ts`). A sync's, repair's or trace drain's sits in its
 * stream (`streams[key].lastRun`); a backfill's in the ledger, with the span it was asked and its
 * windows. Fields are in their persisted order. A record written before backfills counted pages
 * and requests lacks those two; only `at` and `outcome` were ever required (`validate.ts`).
 */
export interface LastRun {
  readonly at: string;
  /** A backfill's span: its first window's start and its last window's end (none for a full read). */
  readonly from?: string;
  readonly to?: string;
  readonly outcome: 'ok' | 'failed';
  readonly rows: number;
  readonly pages: number;
  readonly requests: number;
  /** A backfill's windows read in this run, and those skipped as done by an earlier one. */
  readonly windows?: number;
  readonly skipped?: number;
  readonly seconds: number;
  readonly error?: string;
  /**
   * A per-event drain's events still owed their traces when it ended (the warehouse's book
   * counted them): `status --check` reads it from the state file, which it reads alone.
   */
  readonly owed?: number;
}

/** State of one (resource, project scope) stream. */
export interface StreamState {
  /**
   * High-water mark: every record whose cursor value is below it was stored, as far as the API
   * showed it then. The next sync re-reads from `mark − lookback`.
   */
  readonly mark?: string;
  readonly pending?: PendingWindow;
  /** A split walk in progress; resumed before anything else. */
  readonly split?: SplitWindow;
  readonly lastRun?: LastRun;
  /**
   * Settle mark (resources that are enriched late): every record before it was read at least once
   * after it had settled. Lags the mark by `--settle`.
   */
  readonly settled?: string;
  /** A settle re-read in progress (window and the cursor of its next page). */
  readonly settlePending?: PendingWindow;
  /** How late records arrive (receipt − own time) in the last run that read any. */
  readonly lateness?: Lateness;
}

export interface Lateness {
  readonly at: string;
  readonly records: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export interface StateDocument {
  /** Format version (`STATE_VERSION`); an older file is migrated on read (see `validate.ts`). */
  readonly version: typeof STATE_VERSION;
  readonly streams: Readonly<Record<string, StreamState>>;
  /** Project slugs seen in all-projects reads, for endpoints that need one request per project. */
  readonly projects: readonly string[];
  /** Free-form sections owned by other commands (e.g. backfill ledgers), kept as they are. */
  readonly sections: Readonly<Record<string, unknown>>;
}
