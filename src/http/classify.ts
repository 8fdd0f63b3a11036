/**
 * Retry decisions as data: what to do with a status or a transport error. The one retry loop
 * (`client.ts`) acts on these; nothing else decides.
 */

export type Decision =
  | { readonly kind: 'ok' }
  | { readonly kind: 'rate-limited'; readonly retryAfterMs: number | undefined }
  | { readonly kind: 'retry'; readonly reason: string; readonly retryAfterMs: number | undefined }
  | { readonly kind: 'auth'; readonly reason: string }
  | { readonly kind: 'fail'; readonly reason: string };

/** Classify an HTTP status. `retryAfterMs` is the wait the response asked for (`retry-after.ts` `serverWaitMs`). */
export function classifyStatus(status: number, retryAfterMs: number | undefined): Decision {
  if (status >= 200 && status < 300) return { kind: 'ok' };
  if (status === 429) return { kind: 'rate-limited', retryAfterMs };
  if (status === 408) return { kind: 'retry', reason: 'HTTP 408 request timeout', retryAfterMs };
  if (status >= 500) return { kind: 'retry', reason: `HTTP ${status}`, retryAfterMs };
  if (status === 401) return { kind: 'auth', reason: 'HTTP 401' };
  if (status === 403) return { kind: 'auth', reason: 'HTTP 403' };
  return { kind: 'fail', reason: `HTTP ${status}` };
}

/** Error codes of transport failures worth retrying: resets, timeouts, truncated bodies. */
const RETRIABLE_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH',
  // The client's own per-attempt deadline (`REQUEST_DEADLINE_CODE`, attempt.ts).
  'QS_REQUEST_DEADLINE',
]);

export function classifyTransportError(error: unknown): Decision {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && RETRIABLE_CODES.has(code)) {
    return {
      kind: 'retry',
      reason: code === 'QS_REQUEST_DEADLINE' && error instanceof Error ? error.message : code,
      retryAfterMs: undefined,
    };
  }
  if (error instanceof Error && /other side closed|socket hang up|terminated/i.test(error.message)) {
    return { kind: 'retry', reason: error.message, retryAfterMs: undefined };
  }
  return { kind: 'fail', reason: error instanceof Error ? error.message : String(error) };
}
