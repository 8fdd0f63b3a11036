import type { Clock } from '../../core/types.js';

/**
 * A run's exclusive hold on its state: a lease with a heartbeat, wherever it lives (a folder beside
 * the state file: `state/leases/file.ts`; a row of a warehouse table: the BigQuery destination). The
 * callers only see `LeaseProvider`.
 */

/** How long a lease lives without a heartbeat. Every party must agree on it, hence a constant. */
export const LEASE_MS = 30_000;
/** Heartbeat interval: three renewals fit in one lease, so one late timer never loses it. */
export const HEARTBEAT_MS = LEASE_MS / 3;
/**
 * The state file's write lease (`<state>.write.lock`), held for the milliseconds of one rewrite of
 * the file. Its owner record is written just after the lease's folder is made and removed just
 * before the folder: a run killed in between (a checkpoint a page, so a kill -9 lands there now and
 * then) leaves a lease no one can tell is dead, which only expiry frees. At `LEASE_MS` that stalled
 * the next run's first state write for 30 s; a holder renews it every 1.7 s (a third), far more often
 * than its rewrite lasts.
 */
export const WRITE_LEASE_MS = 5_000;

export interface LeaseOwner {
  /** Unique per acquisition: tells two holders with the same pid apart. */
  readonly id: string;
  readonly purpose: string;
  readonly host: string;
  /** The pid namespace (`/proc/self/ns/pid`), so two containers with one hostname differ. */
  readonly pidNamespace?: string;
  readonly pid: number;
  /** The process's start time in clock ticks since boot (`/proc/<pid>/stat`), against pid reuse. */
  readonly startTicks?: string;
  readonly since: string;
  readonly leaseMs: number;
  /** Inode of the lease folder this record describes (a record left by an earlier lease is ignored). */
  readonly inode?: number;
  /** Birth time of that folder: a new folder may reuse an old inode, never its birth time. */
  readonly born?: number;
}

export interface LockOptions {
  /** What holds the lock, for the message another run sees (`sync`, `backfill`). */
  readonly purpose: string;
  /** How long to wait for a held lock before failing. @default 0 (fail at once) */
  readonly waitMs?: number;
  /** Poll interval while waiting. @default 200 */
  readonly pollMs?: number;
  readonly clock: Clock;
  /** Told when a lease left by another run is taken over (a log line). */
  readonly onTakeOver?: (message: string, previous: LeaseOwner | undefined) => void;
  /**
   * Told when this lease is lost while held (the heartbeat could not renew it in time, or another
   * run took it over): the caller should stop writing.
   */
  readonly onLost?: (error: Error) => void;
  /**
   * The lease's length: every party to one lease must use the same (`WRITE_LEASE_MS` for the state
   * file's write lease). A lease whose owner record says its length is judged by that. @default LEASE_MS
   */
  readonly leaseMs?: number;
}

/** A held lock; `release` is idempotent. */
export interface Lock {
  release(): Promise<void>;
}

/** Where leases live: beside the state file (`leases/file.ts`) or in the warehouse (`leases/bigquery.ts`, handed over as the destination's `can.leases`). */
export interface LeaseProvider {
  acquire(name: string, options: LockOptions): Promise<Lock>;
}
