import { setMaxListeners } from 'node:events';
import { formatDuration } from '../core/duration.js';
import { RunStoppedError } from '../core/errors.js';
import { stopExitCode } from '../core/exit-codes.js';
import type { Logger } from '../core/log.js';

/**
 * How a run stops before its end. One abort signal reaches every request, wait and walk (they are
 * threaded through the pipeline); what is being written when it fires still commits (each write
 * is one atomic MERGE followed by its checkpoint), nothing after it starts. So state always
 * describes exactly what is stored, the command prints its summary, and the lease is released.
 */
export interface RunStop {
  readonly signal: AbortSignal;
  /** Why the run was stopped, once it was. */
  readonly reason: RunStoppedError | undefined;
  stop(reason: RunStoppedError): void;
  dispose(): void;
}

export interface RunStopOptions {
  /** Stop when this fires (the CLI's SIGINT/SIGTERM signal). */
  readonly outer?: AbortSignal;
  /** Stop after this long (`--max-run-time`). */
  readonly maxRunTimeMs?: number;
  readonly logger: Logger;
}

export function createRunStop(options: RunStopOptions): RunStop {
  const controller = new AbortController();
  // Every request waiting for the budget or in flight listens to this signal (hundreds at once for
  // per-event traces), each removing its listener when it ends: no leak, so no warning (Node prints
  // one after 10, to stderr, through the live display).
  setMaxListeners(0, controller.signal);
  let reason: RunStoppedError | undefined;
  const stop = (why: RunStoppedError): void => {
    if (reason !== undefined) return;
    reason = why;
    options.logger.warn(
      { cause: why.stopCause },
      `${why.message}: stopping (requests in flight are aborted, the batch being written is finished)`,
    );
    controller.abort(why);
  };
  const onOuter = (): void => {
    const outerReason = options.outer?.reason;
    stop(
      outerReason instanceof RunStoppedError ? outerReason : new RunStoppedError('the run was cancelled', 'SIGTERM'),
    );
  };
  if (options.outer?.aborted === true) onOuter();
  else options.outer?.addEventListener('abort', onOuter, { once: true });
  const timer =
    options.maxRunTimeMs === undefined
      ? undefined
      : setTimeout(
          () =>
            stop(
              new RunStoppedError(
                `--max-run-time ${formatDuration(options.maxRunTimeMs ?? 0)} reached`,
                'max-run-time',
              ),
            ),
          options.maxRunTimeMs,
        );
  timer?.unref();
  return {
    signal: controller.signal,
    get reason() {
      return reason;
    },
    stop,
    dispose: () => {
      if (timer !== undefined) clearTimeout(timer);
      options.outer?.removeEventListener('abort', onOuter);
    },
  };
}

/** Whether a stream's error is only the consequence of the stop (an aborted request or wait). */
export function isStopConsequence(error: unknown, stop: RunStop): boolean {
  if (stop.reason === undefined || error === undefined) return false;
  if (error === stop.reason) return true;
  const e = error as { name?: string; code?: string; message?: string; cause?: unknown };
  return (
    e.name === 'AbortError' ||
    e.code === 'UND_ERR_ABORTED' ||
    e.code === 'ABORT_ERR' ||
    e.message === 'aborted' ||
    e.cause === stop.reason
  );
}

/** The closing line of a stopped run, for the summary. */
export function stoppedLine(command: string, reason: RunStoppedError, rows: number): string {
  const next =
    reason.stopCause === 'lease-lost'
      ? 'another run holds the state now'
      : 'the state records exactly what is stored: the next run continues from there';
  return `${command} STOPPED (${reason.message}) with ${rows} rows stored by this run; ${next} (exit ${stopExitCode(reason.stopCause)})`;
}

/** How long a stopping run may take before the process exits anyway (the bound is 10 s). */
const STOP_GRACE_MS = 9_000;

/**
 * SIGINT and SIGTERM cancel the run through the returned signal; a second signal, or a stop that
 * takes longer than `STOP_GRACE_MS`, exits at once with the signal's code (every write is atomic,
 * so this is no worse than a kill).
 */
export function cancelOnSignals(
  write: (line: string) => void,
  exit: (code: number) => void = (code) => process.exit(code),
): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onSignal = (name: 'SIGINT' | 'SIGTERM'): void => {
    const code = stopExitCode(name);
    if (controller.signal.aborted) {
      write(`query-sync: ${name} again: exiting now (exit ${code})`);
      exit(code);
      return;
    }
    write(`query-sync: ${name} received: stopping gracefully; send it again to exit at once`);
    controller.abort(new RunStoppedError(`${name} received`, name));
    const grace = setTimeout(() => {
      write(`query-sync: did not stop within ${STOP_GRACE_MS / 1000} s: exiting now (exit ${code})`);
      exit(code);
    }, STOP_GRACE_MS);
    grace.unref();
  };
  const onInt = (): void => onSignal('SIGINT');
  const onTerm = (): void => onSignal('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
    },
  };
}
