import { RetriesExhaustedError, type ErrorContext } from '../core/errors.js';

/**
 * A server's request to wait (`Retry-After`, `retry-after-ms`): the rules of reading, capping and
 * waiting, here; `http/attempt.ts` hands over the two header values, `client.ts` `checkRetryAfter`
 * applies the cap to a response, and the scheduler's `http/scheduler/rate.ts` calls `pauseAfter429`.
 *
 * - **Read** (`serverWaitMs`): `retry-after-ms` first, in milliseconds, as the vendor's SDK reads it
 *   (`src/lib/retries.ts` `retryIntervalFromResponse`); else `Retry-After`, delta-seconds or an HTTP
 *   date. Zero, past, missing or unreadable is no wait asked (the caller's own backoff applies).
 * - **Capped** (`DEFAULT_MAX_RETRY_AFTER_MS`, `--max-retry-after`): one cap, 5 minutes by default. A
 *   server asking for longer is not waited for at all: the request fails naming the wait
 *   (`waitTooLong`), so a scheduled run ends in bounded time and the next run asks again. (The SDK
 *   instead waits at most 60 s, its `maxInterval`, and retries early; waiting less than the server
 *   asked only earns another 429 here, where the scheduler shares one budget among all requests.)
 * - **Waited for**: a 429's wait pauses its whole endpoint in the scheduler, not just the request
 *   that got it (`pauseAfter429`, called by `http/scheduler/rate.ts`); a 5xx's or 408's wait is that
 *   request's sleep before it retries (`retryDelayMs`): the server's wait or our own backoff,
 *   whichever is longer.
 *
 * Our own backoff (`backoffDelay`, when the server asks for nothing) is a different number: its
 * steps are capped at 30 s (`DEFAULT_BACKOFF.maxDelayMs`) and the retries of one request at 5 minutes
 * in all (`RetryOptions.maxElapsedMs`, client.ts).
 */

/**
 * The longest wait a server may ask for and be waited for; a longer one fails the request, naming it.
 * @default 300_000 (5 minutes: the retry loop's own time budget for one request, `maxElapsedMs`)
 */
export const DEFAULT_MAX_RETRY_AFTER_MS = 300_000;

/** The two headers as a response carried them (the first value of each). */
export interface WaitHeaders {
  /** `Retry-After`, as sent (kept for messages). */
  readonly retryAfter: string | undefined;
  /** `retry-after-ms`, as sent. */
  readonly retryAfterMsHeader: string | undefined;
}

/** The wait a response asks for, in ms, or `undefined` when it asks for none. */
export function serverWaitMs(headers: WaitHeaders, nowMs: number): number | undefined {
  return parseRetryAfterMs(headers.retryAfterMsHeader) ?? parseRetryAfter(headers.retryAfter, nowMs);
}

/** `retry-after-ms`: a positive number of milliseconds (fractions rounded up), else `undefined`. */
function parseRetryAfterMs(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (!/^\d+(\.\d+)?$/.test(trimmed)) return undefined;
  const ms = Math.ceil(Number(trimmed));
  return Number.isFinite(ms) && ms > 0 ? ms : undefined;
}

/**
 * `Retry-After` as milliseconds: delta-seconds or an HTTP date. `0`, missing or unparseable gives
 * `undefined`, so the caller falls back to its own backoff.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) {
    const ms = Math.round(Number(trimmed) * 1000);
    return ms > 0 ? ms : undefined;
  }
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  const ms = at - nowMs;
  return ms > 0 ? ms : undefined;
}

/** A wait the server asked for (a positive, finite number of ms). */
export function isServerWait(ms: number | undefined): ms is number {
  return ms !== undefined && Number.isFinite(ms) && ms > 0;
}

/**
 * The error a request fails with when the server asks for more than `maxMs`: not waited, the stream
 * stops at its last stored batch. `undefined` when the wait is within the cap (or none was asked).
 */
export function waitTooLong(
  waitMs: number | undefined,
  maxMs: number,
  asked: { readonly path: string; readonly status: number | undefined; readonly header: string },
  context: ErrorContext,
): RetriesExhaustedError | undefined {
  if (waitMs === undefined || waitMs <= maxMs) return undefined;
  return new RetriesExhaustedError(
    `GET ${asked.path} got HTTP ${asked.status ?? '?'} asking to wait ${Math.round(waitMs / 1000)} s (Retry-After: ${asked.header}), ` +
      `longer than --max-retry-after (${Math.round(maxMs / 1000)} s). Not waited: the stream stops at its last ` +
      `stored batch. Run again later, or raise --max-retry-after.`,
    1,
    { context },
  );
}

/** How long a 429's endpoint pauses: the server's wait when it gave one, else the scheduler's backoff. */
export function pauseAfter429(waitMs: number | undefined, backoffMs: number): number {
  return isServerWait(waitMs) ? waitMs : backoffMs;
}

/** Exponential backoff with full jitter (AWS architecture blog): sleep U(0, min(cap, base·2^n)). */
export interface BackoffOptions {
  /** First step. @default 500 */
  readonly baseMs: number;
  /**
   * Largest single step of our own backoff (a server's wait is capped by `--max-retry-after`
   * instead). @default 30_000 (the SDK's own steps stop at 60 s, its `maxInterval`)
   */
  readonly maxDelayMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = Object.freeze({ baseMs: 500, maxDelayMs: 30_000 });

export function backoffDelay(attempt: number, options: BackoffOptions, random: () => number = Math.random): number {
  const ceiling = Math.min(options.maxDelayMs, options.baseMs * 2 ** Math.max(0, attempt));
  return Math.floor(random() * ceiling);
}

/** The sleep before retry `failures` of a 5xx or 408: the server's wait or our own backoff, whichever is longer. */
export function retryDelayMs(
  waitMs: number | undefined,
  failures: number,
  backoff: BackoffOptions,
  random?: () => number,
): number {
  return Math.max(waitMs ?? 0, backoffDelay(failures - 1, backoff, random));
}
