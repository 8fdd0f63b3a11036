import { request, type Dispatcher } from 'undici';
import { formatDuration } from '../core/duration.js';
import type { WaitHeaders } from './retry-after.js';

/**
 * One GET attempt of the Query API client over undici: bounded as a whole by a deadline (connect +
 * headers + whole body) besides undici's idle timeouts, aborted with the run, and reporting the
 * moment its head is written to the socket (what the scheduler counts as sent).
 */

/** `code` of the error an attempt fails with when its deadline passes (retried like a timeout: `classify.ts`). */
const REQUEST_DEADLINE_CODE = 'QS_REQUEST_DEADLINE';

/** One response, read whole. */
/** A response as it came: its status, its body, and the wait headers as sent (read in `retry-after.ts`). */
export interface RawResponse extends WaitHeaders {
  readonly status: number;
  readonly text: string;
}

export interface AttemptOptions {
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly dispatcher: Dispatcher;
  /** The attempt's deadline (`--request-timeout`). */
  readonly requestMs: number;
  /** The run's signal: aborts the attempt. */
  readonly signal: AbortSignal | undefined;
  /** Called when the request's head is written to a connected socket. */
  readonly sent?: (() => void) | undefined;
}

/**
 * One attempt, bounded as a whole by `requestMs`; passing it fails the attempt with
 * `REQUEST_DEADLINE_CODE`.
 */
export async function sendAttempt(o: AttemptOptions): Promise<RawResponse> {
  const signal = o.signal;
  // One controller per attempt, aborted by the deadline or by the run's signal. Not
  // `AbortSignal.any`: it leaves a listener on the run's long-lived signal per request (Node warns
  // after 10, and the warning tears the live display); this one is removed when the attempt ends.
  const attempt = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    attempt.abort();
  }, o.requestMs);
  const onRunAbort = (): void => attempt.abort(signal?.reason);
  if (signal?.aborted === true) onRunAbort();
  else signal?.addEventListener('abort', onRunAbort, { once: true });
  try {
    const dispatcher = o.sent === undefined ? o.dispatcher : reportingSend(o.dispatcher, o.sent);
    const res = await request(o.url, { method: 'GET', headers: o.headers, dispatcher, signal: attempt.signal });
    const text = await res.body.text();
    const retryAfter = res.headers['retry-after'];
    const retryAfterMs = res.headers['retry-after-ms'];
    return {
      status: res.statusCode,
      retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
      retryAfterMsHeader: Array.isArray(retryAfterMs) ? retryAfterMs[0] : retryAfterMs,
      text,
    };
  } catch (error) {
    if (timedOut && signal?.aborted !== true) {
      throw Object.assign(
        new Error(`no complete response within ${formatDuration(o.requestMs)} (request deadline, --request-timeout)`, {
          cause: error,
        }),
        { code: REQUEST_DEADLINE_CODE },
      );
    }
    throw error;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onRunAbort);
  }
}

/**
 * `inner`, calling `sent` when the request's head is written to a connected socket (undici calls a
 * handler's `onConnect` right before): the moment the server starts to see it, after any connection
 * set-up. `request()` only needs the `dispatch` of the dispatcher it is given.
 */
function reportingSend(inner: Dispatcher, sent: () => void): Dispatcher {
  const dispatch = (opts: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean => {
    const wrapped = new Proxy(handler, {
      get(target, prop) {
        if (prop === 'onConnect') {
          return (...args: unknown[]) => {
            sent();
            return (target.onConnect as ((...a: unknown[]) => unknown) | undefined)?.apply(target, args);
          };
        }
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    return inner.dispatch(opts, wrapped);
  };
  return { dispatch } as unknown as Dispatcher;
}
