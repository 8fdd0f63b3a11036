import { AuthError, ConfigError, RunStoppedError, StateError, WarehouseBusyError, type StopCause } from './errors.js';

/**
 * The exit codes of query-sync, the one table of codes (a second signal's forced exit in `run/stop.ts`
 * takes its code from here too): a scheduler reads them to tell a
 * configuration mistake (fix the flags) from an outage (run again later) from a difference in the
 * data (look at it). Stopped runs exit as shells report a process a signal ended (128 + the
 * signal's number), or 6 for `--max-run-time` (progress is saved: run again to continue).
 */
export const EXIT_CODES = Object.freeze({
  /** Everything asked was done. */
  ok: 0,
  /** Something failed (the API, the destination, a stream): the run can be tried again. */
  failed: 1,
  /** The flags, environment or config file are wrong, or a precondition (a file) is missing. */
  configuration: 2,
  /** The API refused the key (401) or a project scope (403). */
  authentication: 3,
  /** The state is unreadable or held by another run (its lock, its lease, the warehouse file). */
  state: 4,
  /** The API and the warehouse disagree: `verify`'s mismatch, and a sync's reconcile that still differs. */
  mismatch: 5,
  /** `--max-run-time` stopped the run; what was stored is recorded: run again to continue. */
  maxRunTime: 6,
  /** `status --check`: the published copy, a stream or a per-event backlog is behind its bound. */
  stale: 7,
  /** SIGINT (Ctrl-C) stopped the run: 128 + 2. */
  SIGINT: 130,
  /** SIGTERM stopped the run: 128 + 15. */
  SIGTERM: 143,
});

/** A named outcome of a command: a key of `EXIT_CODES`. */
export type ExitOutcome = keyof typeof EXIT_CODES;

/** The code of a named outcome. */
export function exitCode(outcome: ExitOutcome): number {
  return EXIT_CODES[outcome];
}

/** The outcome of a run stopped for `cause`: a lost lease is the state's (another run holds it now). */
const STOP_OUTCOMES: Readonly<Record<StopCause, ExitOutcome>> = Object.freeze({
  SIGINT: 'SIGINT',
  SIGTERM: 'SIGTERM',
  'max-run-time': 'maxRunTime',
  'lease-lost': 'state',
});

/** The exit code of a run stopped for `cause`. */
export function stopExitCode(cause: StopCause): number {
  return EXIT_CODES[STOP_OUTCOMES[cause]];
}

/** The outcome an error ends a command with, by its group. */
export function outcomeOf(error: unknown): ExitOutcome {
  if (error instanceof RunStoppedError) return STOP_OUTCOMES[error.stopCause];
  if (error instanceof ConfigError) return 'configuration';
  if (error instanceof AuthError) return 'authentication';
  if (error instanceof StateError || error instanceof WarehouseBusyError) return 'state';
  return 'failed';
}

/** Exit codes by error group, so a scheduler can tell a config mistake from an outage. */
export function exitCodeFor(error: unknown): number {
  return EXIT_CODES[outcomeOf(error)];
}

/** How a run that read streams ended, as its exit code sees it. */
export interface RunEnd {
  /** Why the run was stopped before its end, if it was. */
  readonly stop?: unknown;
  /** The first stream that did not end ok (its error's group gives the code). */
  readonly failed?: { readonly error?: unknown };
  /** The API and the warehouse still disagree (a sync's reconcile, a verify). */
  readonly mismatch?: boolean;
}

/**
 * The exit code of a run that read streams (sync, backfill, verify --repair), one precedence for
 * all: stopped (the stop's code) over a failed stream (its error's group) over a difference left
 * between the API and the warehouse (5) over ok. `verify` names the difference before a failure
 * (`mismatch-first`): comparing is what it was asked, and a repair that failed leaves it unchanged.
 */
export function runExitCode(end: RunEnd, order: 'failure-first' | 'mismatch-first' = 'failure-first'): number {
  if (end.stop !== undefined) return exitCodeFor(end.stop);
  const failed = end.failed === undefined ? undefined : exitCodeFor(end.failed.error);
  const mismatch = end.mismatch === true ? EXIT_CODES.mismatch : undefined;
  return (order === 'failure-first' ? (failed ?? mismatch) : (mismatch ?? failed)) ?? EXIT_CODES.ok;
}

/**
 * How `_query_sync_runs.outcome` names a run's end, chosen with the same precedence as its exit code
 * (`runExitCode`), so the row and the code agree: `stopped` (6, 130, 143, or 4 for a lost lease),
 * `failed` (1, 3, 4: a stream's error), `mismatch` (5: a difference left), `ok` (0).
 */
type RunOutcomeName = 'ok' | 'failed' | 'mismatch' | 'stopped';

/** A run's end as its exit code and its history row's outcome, from one precedence. */
export interface RunEndCode {
  readonly code: number;
  readonly outcome: RunOutcomeName;
}

/** The exit code and the outcome name of a run that read streams (see `runExitCode` for `order`). */
export function runEndCode(end: RunEnd, order: 'failure-first' | 'mismatch-first' = 'failure-first'): RunEndCode {
  const code = runExitCode(end, order);
  if (end.stop !== undefined) return { code, outcome: 'stopped' };
  const failed = end.failed !== undefined;
  const mismatch = end.mismatch === true;
  const outcome: RunOutcomeName =
    order === 'failure-first'
      ? failed
        ? 'failed'
        : mismatch
          ? 'mismatch'
          : 'ok'
      : mismatch
        ? 'mismatch'
        : failed
          ? 'failed'
          : 'ok';
  return { code, outcome };
}
