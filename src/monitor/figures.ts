/**
 * What a run tells its monitoring, as plain figures (no prom-client, no HTTP): gathered by
 * `monitor.ts` from the run's streams, its budget, its state and its published copy, and turned into
 * metrics (`metrics.ts`), notifications (`notify.ts`) and the staleness check (`stale.ts`).
 */

/** How the run ended, as the `status` label of `query_sync_last_run_outcome` says it. */
export type RunStatus = 'running' | 'ok' | 'failed' | 'difference' | 'stopped';
export const RUN_STATUSES: readonly RunStatus[] = ['running', 'ok', 'failed', 'difference', 'stopped'];

/** One (resource, project) stream's counters in this run. */
export interface StreamFigures {
  readonly resource: string;
  readonly project: string;
  readonly ok: boolean;
  readonly rows: number;
  readonly pages: number;
  readonly requests: number;
  readonly retries: number;
  readonly rateLimited: number;
  readonly budgetWaitMs: number;
  readonly backoffMs: number;
}

/** One endpoint's requests in this run, from the run's one scheduler. */
interface EndpointFigures {
  readonly endpoint: string;
  readonly requests: number;
  readonly rateLimited: number;
  readonly budgetWaitMs: number;
  /** What the scheduler allows now (lower than configured after 429s). */
  readonly allowedPerMinute: number;
}

/** A stream's high-water mark in state: every record before it is stored. */
interface MarkFigures {
  readonly resource: string;
  readonly project: string;
  readonly markMs: number;
}

/** A per-event resource's backlog (traces read one event at a time), as `status` computes it. */
interface BacklogFigures {
  readonly resource: string;
  readonly events: number;
  readonly etaSeconds: number;
  readonly dailyDeficit: number;
}

/** The run's reconcile, per (resource, project). */
export interface ReconcileFigures {
  readonly resource: string;
  readonly project: string;
  readonly checked: number;
  readonly differing: number;
  readonly repaired: number;
  readonly stillDiffering: number;
  /** The windows that still differ (for the notification's fix). */
  readonly windows: readonly { readonly from: string; readonly to: string }[];
}

/** A column (or table) a run added. */
interface SchemaChangeFigures {
  readonly table: string;
  readonly column: string;
  readonly type: string;
  readonly change: 'new table' | 'new column' | 'variant column';
}

export interface RunFigures {
  readonly command: string;
  readonly version: string;
  readonly nowMs: number;
  readonly startedMs: number;
  /** Absent while the run goes on (a publication at --publish-every). */
  readonly endedMs?: number;
  readonly status: RunStatus;
  readonly exitCode?: number;
  /** The last run that succeeded (this one, if it did), when known. */
  readonly lastSuccessMs?: number;
  readonly streams: readonly StreamFigures[];
  readonly endpoints: readonly EndpointFigures[];
  readonly marks: readonly MarkFigures[];
  readonly backlogs: readonly BacklogFigures[];
  readonly reconcile: readonly ReconcileFigures[];
  readonly schemaChanges: readonly SchemaChangeFigures[];
  /** The published read copy's as-of (DuckDB), when there is one. */
  readonly publishedAsOfMs?: number;
  /** The run's failure when it failed before or outside any stream (a held lock, a bad state file). */
  readonly runError?: { readonly code: string; readonly message: string };
  /** Failed streams' errors, by `resource project`. */
  readonly streamErrors: Readonly<Record<string, { readonly code: string; readonly message: string }>>;
}
