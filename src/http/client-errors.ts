import { AuthError, FatalApiError, trimBody, type ErrorContext } from '../core/errors.js';
import type { RawResponse } from './attempt.js';

/**
 * The errors the client fails a request with when retrying cannot help: a rejected key or project
 * (401/403), and any other 4xx, naming the parameter the server refused when its body says which.
 */

/** A server's text for a message: key removed first, then trimmed to `maxChars`. */
export type Said = (text: string, maxChars?: number) => string;

/** The request, as an error message names it. */
interface Requested {
  readonly path: string;
  readonly query: Readonly<Record<string, string | undefined>>;
  readonly project: string | undefined;
}

export function authError(
  response: RawResponse | undefined,
  req: Requested,
  ctx: ErrorContext,
  serverText: Said,
): AuthError {
  const status = response?.status ?? 0;
  const said = response ? ` Server said: ${serverText(response.text, 160)}` : '';
  if (status === 401) {
    return new AuthError(
      `the API key was rejected (401). Expected the Organization API Key (the write key used for ingestion is not accepted).${said}`,
      status,
      { context: ctx },
    );
  }
  return new AuthError(
    `project ${req.project === undefined ? '(default, no header sent)' : `"${req.project}"`} was refused (403): expected an active project slug; it is archived or unknown, or the key cannot read it.${said}`,
    status,
    { context: ctx },
  );
}

export function fatalError(
  response: RawResponse | undefined,
  req: Requested,
  ctx: ErrorContext,
  serverText: Said,
): FatalApiError {
  const status = response?.status ?? 0;
  const scope = req.project === undefined ? '' : ` with project ${req.project}`;
  const rejected = rejectedParameter(response?.text, req.query);
  if (rejected !== undefined) {
    const allowed = rejected.allowed.length > 0 ? `; the server allows: ${rejected.allowed.join(', ')}` : '';
    return new FatalApiError(
      `the server refused the parameter "${rejected.field}"${rejected.sent === undefined ? ' (not sent: it is required)' : `=${trimBody(rejected.sent, 60)}`} ` +
        `on GET ${req.path}${scope} (HTTP ${status}: ${trimBody(rejected.message, 160)})${allowed}. ` +
        `The connector declaration in connectors/ names this parameter: fix it there, or report the server's change.`,
      status,
      { context: ctx, field: rejected.field },
    );
  }
  return new FatalApiError(
    `GET ${req.path}${scope} was rejected with HTTP ${status} (not retried): ${serverText(response?.text ?? '')}`,
    status,
    { context: ctx },
  );
}

/**
 * A 4xx body `{ "error": { "code", "message", "details": { "field", "allowed_fields" } } }` naming one
 * parameter (the SDK's error shape): which one, what we sent for it, and what the server allows.
 */
export function rejectedParameter(
  text: string | undefined,
  query: Readonly<Record<string, string | undefined>>,
): { field: string; sent: string | undefined; message: string; allowed: readonly string[] } | undefined {
  if (text === undefined) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  const error = (body as { error?: unknown } | null)?.error;
  if (error === null || typeof error !== 'object') return undefined;
  const { message, details } = error as { message?: unknown; details?: unknown };
  if (details === null || typeof details !== 'object') return undefined;
  const { field, allowed_fields: allowedFields } = details as { field?: unknown; allowed_fields?: unknown };
  if (typeof field !== 'string' || field === '') return undefined;
  const allowed = Array.isArray(allowedFields) ? allowedFields.filter((f): f is string => typeof f === 'string') : [];
  return { field, sent: query[field], message: typeof message === 'string' ? message : '', allowed };
}
