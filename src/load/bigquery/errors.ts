import {
  AuthError,
  ConfigError,
  LoadError,
  RetriesExhaustedError,
  trimBody,
  type QuerySyncError,
} from '../../core/errors.js';

/**
 * What BigQuery said went wrong, and what query-sync does about it. BigQuery reports the cause in
 * `reason` (https://cloud.google.com/bigquery/docs/error-messages), both on HTTP errors (`errors[]`
 * of the client's ApiError) and on failed jobs (`status.errorResult` / `status.errors[]`). The
 * reason decides, not the status: `rateLimitExceeded` and `quotaExceeded` both come as 403.
 */

/** One BigQuery ErrorProto. */
export interface BigQueryErrorProto {
  readonly reason?: string | null;
  readonly message?: string | null;
  readonly location?: string | null;
}

/** A job that finished with `status.errorResult`: carries the job's ErrorProtos for classification. */
export class JobFailedError extends Error {
  readonly jobId: string;
  readonly errorResult: BigQueryErrorProto;
  readonly errors: readonly BigQueryErrorProto[];
  constructor(jobId: string, errorResult: BigQueryErrorProto, errors: readonly BigQueryErrorProto[]) {
    super(`job ${jobId} failed: ${errorResult.message ?? errorResult.reason ?? 'unknown error'}`);
    this.name = 'JobFailedError';
    this.jobId = jobId;
    this.errorResult = errorResult;
    this.errors = errors;
  }
}

/** The parts of an error the classification reads. */
export interface BigQueryErrorInfo {
  /** HTTP status, when the error came from an HTTP response. */
  readonly status: number | undefined;
  /** Every `reason`, the main one (errorResult / first) first. */
  readonly reasons: readonly string[];
  /** Every ErrorProto message, in the same order. */
  readonly messages: readonly string[];
  readonly message: string;
}

export type BigQueryErrorClass =
  /** Transient: retry with backoff. */
  | 'retriable'
  /** 401/403 `accessDenied`: the credentials lack a role. */
  | 'auth'
  /** 404 for the project itself: wrong `--bq-project`. */
  | 'projectNotFound'
  /** 404 for a dataset, table or job. */
  | 'notFound'
  /** 409: created concurrently (or a job id reused after a lost response). */
  | 'alreadyExists'
  /** `quotaExceeded`: retrying now will not help. */
  | 'quota'
  /** Anything else: invalid data or SQL, resources exceeded, … */
  | 'fatal';

/**
 * Reasons BigQuery documents as transient ("retry the request"): backendError (500/503/504),
 * internalError (500), rateLimitExceeded (403, retry with exponential backoff), and the job-level
 * jobBackendError / jobInternalError.
 */
const RETRIABLE_REASONS: ReadonlySet<string> = new Set([
  'backendError',
  'internalError',
  'rateLimitExceeded',
  'jobBackendError',
  'jobInternalError',
]);

/**
 * Two mutating DML statements (or transactions) on one table that overlap: BigQuery fails the one
 * that commits later with reason `invalidQuery` and this message; running it again is right
 * (https://cloud.google.com/bigquery/docs/data-manipulation-language#update_delete_merge_dml_concurrency).
 * Two processes on one dataset (a sync beside a backfill, two pods) meet it.
 */
const CONCURRENT_UPDATE =
  /could not serialize access to table .* due to concurrent update|transaction is aborted due to concurrent update/i;

/** Whether an error is a concurrent-DML conflict (retried with its own, longer budget). */
export function isConcurrentUpdate(info: BigQueryErrorInfo): boolean {
  return [info.message, ...info.messages].some((m) => CONCURRENT_UPDATE.test(m));
}

/** Socket-level failures before any response: the request may be sent again. */
const RETRIABLE_NETWORK_CODES: ReadonlySet<string> = new Set(['ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ECONNABORTED']);

/** Read status, reasons and messages from a client ApiError, a job's status, or any thrown value. */
export function errorInfo(error: unknown): BigQueryErrorInfo {
  if (typeof error !== 'object' || error === null) {
    return { status: undefined, reasons: [], messages: [], message: String(error) };
  }
  const record = error as Record<string, unknown>;
  const status = typeof record['code'] === 'number' ? record['code'] : undefined;
  const protos: BigQueryErrorProto[] = [];
  const errorResult = record['errorResult'];
  if (isProto(errorResult)) protos.push(errorResult);
  const errors = record['errors'];
  if (Array.isArray(errors)) {
    for (const e of errors) {
      if (isProto(e) && !protos.some((p) => p.reason === e.reason && p.message === e.message)) protos.push(e);
    }
  }
  // Index-aligned: messages[i] is the message of reasons[i] ('' when BigQuery gave none).
  const reasons = protos.map((p) => p.reason ?? '');
  const messages = protos.map((p) => p.message ?? '');
  const message =
    typeof record['message'] === 'string' && record['message'].length > 0
      ? record['message']
      : (messages.find((m) => m.length > 0) ?? 'unknown BigQuery error');
  const netCode = typeof record['code'] === 'string' ? record['code'] : undefined;
  if (netCode !== undefined && RETRIABLE_NETWORK_CODES.has(netCode)) {
    return { status: undefined, reasons: ['network'], messages, message };
  }
  return { status, reasons, messages, message };
}

function isProto(value: unknown): value is BigQueryErrorProto {
  return typeof value === 'object' && value !== null && ('reason' in value || 'message' in value);
}

/** What to do about an error. The main reason decides; the status is the fallback. */
export function classifyBigQueryError(info: BigQueryErrorInfo): BigQueryErrorClass {
  if (isConcurrentUpdate(info)) return 'retriable';
  const first = info.reasons[0];
  const reason = first === undefined || first.length === 0 ? undefined : first;
  if (reason !== undefined) {
    if (RETRIABLE_REASONS.has(reason) || reason === 'network') return 'retriable';
    if (reason === 'quotaExceeded') return 'quota';
    if (reason === 'accessDenied' || reason === 'unauthorized' || reason === 'authError') return 'auth';
    if (reason === 'notFound') return isProjectNotFound(info) ? 'projectNotFound' : 'notFound';
    if (reason === 'duplicate' || reason === 'alreadyExists') return 'alreadyExists';
  }
  const status = info.status;
  if (status !== undefined) {
    if (status >= 500) return 'retriable';
    if (status === 401 || status === 403) return reason === undefined ? 'auth' : 'fatal';
    if (status === 404) return isProjectNotFound(info) ? 'projectNotFound' : 'notFound';
    if (status === 409) return 'alreadyExists';
  }
  return 'fatal';
}

function isProjectNotFound(info: BigQueryErrorInfo): boolean {
  return [info.message, ...info.messages].some((m) => /not found: project/i.test(m));
}

/** What the error is about, for messages. */
export interface ErrorSubject {
  /** What was being done, e.g. `load job qs_load_… into events__stage_…`. */
  readonly operation: string;
  readonly projectId: string;
  readonly dataset: string;
  /** Table (resource) name, for the error context. */
  readonly table?: string;
}

/** Up to this many ErrorProto messages are quoted in an error message. */
const MAX_QUOTED_ERRORS = 10;

/** `errors[]` as one line: `[reason] message; …`. */
function describeErrors(info: BigQueryErrorInfo): string {
  const quoted = info.messages.slice(0, MAX_QUOTED_ERRORS).map((m, i) => {
    const reason = info.reasons[i] ?? '';
    return reason.length === 0 ? trimBody(m, 300) : `[${reason}] ${trimBody(m, 300)}`;
  });
  const more = info.messages.length > MAX_QUOTED_ERRORS ? ` (+${info.messages.length - MAX_QUOTED_ERRORS} more)` : '';
  return quoted.length > 0 ? `${quoted.join('; ')}${more}` : trimBody(info.message, 300);
}

/**
 * The query-sync error for a BigQuery failure that will not be retried (or no longer).
 * `attempts` is set when retries ran out.
 */
export function toQuerySyncError(error: unknown, subject: ErrorSubject, attempts?: number): QuerySyncError {
  if (error instanceof AuthError || error instanceof ConfigError || error instanceof LoadError) return error;
  const info = errorInfo(error);
  const kind = classifyBigQueryError(info);
  const options = { cause: error, ...(subject.table === undefined ? {} : { context: { resource: subject.table } }) };
  const detail = describeErrors(info);
  const dataset = `${subject.projectId}:${subject.dataset}`;
  switch (kind) {
    case 'auth':
      return new AuthError(
        `BigQuery denied ${subject.operation} (dataset ${dataset}): ${detail}. ` +
          `The credentials need the roles BigQuery Data Editor (roles/bigquery.dataEditor) on dataset ${dataset} ` +
          `(or on project ${subject.projectId}, to create the dataset) and BigQuery Job User ` +
          `(roles/bigquery.jobUser) on project ${subject.projectId}.`,
        info.status ?? 403,
        options,
      );
    case 'projectNotFound':
      return new ConfigError(
        `BigQuery project "${subject.projectId}" was not found (or these credentials cannot see it) during ` +
          `${subject.operation}: ${detail}. Check --bq-project.`,
        options,
      );
    case 'quota':
      return new LoadError(
        `BigQuery quota exceeded during ${subject.operation} (dataset ${dataset}): ${detail}. ` +
          'Not retried: quotas reset over time (most daily). Sync less often or raise the quota, then run again.',
        false,
        options,
      );
    case 'retriable':
      if (attempts !== undefined) {
        const exhausted = new RetriesExhaustedError(
          `BigQuery ${subject.operation} kept failing after ${attempts} attempts: ${detail}`,
          attempts,
          { cause: error },
        );
        return new LoadError(exhausted.message, true, { ...options, cause: exhausted });
      }
      return new LoadError(`BigQuery ${subject.operation} failed: ${detail}`, true, options);
    default:
      return new LoadError(`BigQuery ${subject.operation} failed (dataset ${dataset}): ${detail}`, false, options);
  }
}

/** Retry policy: bounded attempts, exponential backoff with full jitter. */
export interface RetryPolicy {
  /** Attempts in all, the first included. */
  readonly maxAttempts: number;
  /**
   * Attempts for a concurrent-DML conflict: another process's MERGE on the same table may run for
   * minutes, so these wait longer than a transient error does.
   */
  readonly maxConflictAttempts: number;
  /** Base of the exponential backoff. */
  readonly baseMs: number;
  /** Cap of one wait. */
  readonly maxMs: number;
}

/**
 * Wait before attempt `attempt + 1` (after `attempt` failures): uniform in [0, base·2^(attempt−1)],
 * capped ("full jitter"), so concurrent writers do not retry in lockstep.
 */
export function backoffMs(policy: RetryPolicy, attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling * random());
}
