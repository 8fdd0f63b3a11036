/**
 * Every error query-sync raises, grouped by what the caller does about it. Each has a stable
 * `code`, a `name`, and keeps its `cause`. Messages say what was expected, what came instead, and
 * which resource and project; bodies are trimmed and secrets redacted before they get here.
 */

export interface ErrorContext {
  readonly resource?: string;
  readonly project?: string;
}

/** What every error's constructor takes besides its message (and its own details). */
export interface QuerySyncErrorOptions {
  readonly cause?: unknown;
  readonly context?: ErrorContext;
}

export abstract class QuerySyncError extends Error {
  abstract readonly code: string;
  /** Whether retrying the same operation may succeed. */
  readonly retriable: boolean = false;
  readonly context: ErrorContext;

  constructor(message: string, options: QuerySyncErrorOptions = {}) {
    super(withContext(message, options.context), options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.context = options.context ?? {};
  }
}

function withContext(message: string, context: ErrorContext | undefined): string {
  if (!context || (!context.resource && !context.project)) return message;
  const parts: string[] = [];
  if (context.resource) parts.push(`resource ${context.resource}`);
  if (context.project) parts.push(`project ${context.project}`);
  return `[${parts.join(', ')}] ${message}`;
}

/** Bad flags, environment or config file. Fix the invocation. */
export class ConfigError extends QuerySyncError {
  readonly code = 'E_CONFIG';
}

/** An error about one HTTP response: it keeps the response's status. */
export abstract class HttpStatusError extends QuerySyncError {
  readonly status: number;
  constructor(message: string, status: number, options: QuerySyncErrorOptions = {}) {
    super(message, options);
    this.status = status;
  }
}

/** 401, or a 403/400 caused by the key or the project scope. Never retried. */
export class AuthError extends HttpStatusError {
  readonly code = 'E_AUTH';
}

/** A response that may succeed later: 408, 429, 5xx, reset, timeout, truncated body. */
export class RetriableError extends QuerySyncError {
  readonly code: string = 'E_RETRIABLE';
  override readonly retriable = true;
  readonly status: number | undefined;
  /** Server-requested wait (`Retry-After`), when given. */
  readonly retryAfterMs: number | undefined;
  constructor(
    message: string,
    details: { status?: number; retryAfterMs?: number },
    options: QuerySyncErrorOptions = {},
  ) {
    super(message, options);
    this.status = details.status;
    this.retryAfterMs = details.retryAfterMs;
  }
}

/** A 4xx that will not succeed on retry (other than auth/scope). */
export class FatalApiError extends HttpStatusError {
  readonly code = 'E_API';
  /** The request parameter the server named in `error.details.field`, if any. */
  readonly field?: string;
  constructor(message: string, status: number, options: QuerySyncErrorOptions & { readonly field?: string } = {}) {
    super(message, status, options);
    if (options.field !== undefined) this.field = options.field;
  }
}

/** A retriable failure that kept failing past the attempt or time budget. */
export class RetriesExhaustedError extends QuerySyncError {
  readonly code = 'E_RETRIES_EXHAUSTED';
  readonly attempts: number;
  constructor(message: string, attempts: number, options: QuerySyncErrorOptions = {}) {
    super(message, options);
    this.attempts = attempts;
  }
}

/** The same cursor came back, or `has_more` without a cursor. */
export class PaginationError extends QuerySyncError {
  readonly code = 'E_PAGINATION';
}

/**
 * The server refused a cursor it had handed out (expired, or forgotten): 400, 404 or 410 on a
 * request with a cursor, or any 4xx whose body speaks of the cursor. The walk restarts its window.
 */
export class CursorRejectedError extends HttpStatusError {
  readonly code = 'E_CURSOR_REJECTED';
}

/** A 200 whose body is not the documented envelope, or a record missing its key or cursor field. */
export class DataError extends QuerySyncError {
  readonly code = 'E_DATA';
}

/** The destination refused a write. `retriable` says whether trying again can help. */
export class LoadError extends QuerySyncError {
  readonly code = 'E_LOAD';
  override readonly retriable: boolean;
  constructor(message: string, retriable: boolean, options: QuerySyncErrorOptions = {}) {
    super(message, options);
    this.retriable = retriable;
  }
}

/** The state file is unreadable, or locked by another run. */
export class StateError extends QuerySyncError {
  readonly code = 'E_STATE';
}

/**
 * The warehouse file is open in another process (DuckDB lets one process open a file at a time):
 * another run holds it. Like a held state lock: wait (`--lock-wait`) or run later.
 */
export class WarehouseBusyError extends QuerySyncError {
  readonly code = 'E_WAREHOUSE_BUSY';
}

/** Why a run was stopped before its end: a signal, `--max-run-time`, or its lease lost. */
export type StopCause = 'SIGINT' | 'SIGTERM' | 'max-run-time' | 'lease-lost';

/** The run was asked to stop: the reason of its abort signal. Stored rows and state stay consistent. */
export class RunStoppedError extends QuerySyncError {
  readonly code = 'E_STOPPED';
  readonly stopCause: StopCause;
  constructor(message: string, stopCause: StopCause, options: { cause?: unknown } = {}) {
    super(message, options);
    this.stopCause = stopCause;
  }
}

/** Trim a response body for an error message: one line, bounded length. */
export function trimBody(body: string, maxChars = 200): string {
  const flat = body.replace(/\s+/g, ' ').trim();
  return flat.length > maxChars ? `${flat.slice(0, maxChars)}… (${flat.length} chars)` : flat;
}
