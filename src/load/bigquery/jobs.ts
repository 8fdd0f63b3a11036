import type { BigQuery, Job, JobMetadata } from '@google-cloud/bigquery';
import { LoadError, QuerySyncError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import {
  backoffMs,
  classifyBigQueryError,
  errorInfo,
  isConcurrentUpdate,
  JobFailedError,
  toQuerySyncError,
  type BigQueryErrorClass,
  type ErrorSubject,
  type RetryPolicy,
} from './errors.js';

/**
 * BigQuery jobs run to DONE, and the one retry loop of the BigQuery destination: transient errors
 * (by BigQuery's reason) are retried with backoff; everything else is final.
 */

/** Cap of one backoff wait: Google's truncated exponential backoff guidance caps at 32 s. */
const MAX_BACKOFF_MS = 32_000;
const DEFAULT_MAX_ATTEMPTS = 5;
const DEFAULT_MAX_CONFLICT_ATTEMPTS = 10;
const DEFAULT_RETRY_BASE_MS = 1_000;

/** The retry policy of the destination's options (at least one attempt each), the defaults filled in. */
export function retryPolicy(options: {
  readonly maxAttempts?: number;
  readonly maxConflictAttempts?: number;
  readonly retryBaseMs?: number;
}): RetryPolicy {
  return {
    maxAttempts: Math.max(1, options.maxAttempts ?? DEFAULT_MAX_ATTEMPTS),
    maxConflictAttempts: Math.max(1, options.maxConflictAttempts ?? DEFAULT_MAX_CONFLICT_ATTEMPTS),
    baseMs: options.retryBaseMs ?? DEFAULT_RETRY_BASE_MS,
    maxMs: MAX_BACKOFF_MS,
  };
}
/** Longest wait between jobs.get polls (the first is `pollMs`, and each grows by half). */
const POLL_MAX_MS = 5_000;
/** Give up waiting on one job after this long (it may still finish; replaying the batch is safe). */
const JOB_WAIT_LIMIT_MS = 60 * 60 * 1000;

/** A job that reached DONE without errors. */
export interface FinishedJob {
  readonly jobId: string;
  readonly location: string;
  readonly metadata: JobMetadata;
}

export interface BigQueryJobsOptions {
  readonly client: BigQuery;
  /** Where jobs run: the dataset's actual location once known. */
  readonly location: () => string;
  readonly retry: RetryPolicy;
  readonly sleep: (ms: number) => Promise<void>;
  /** First wait between jobs.get polls. */
  readonly pollMs: number;
  readonly log: Logger;
  /** Called with every job that reached DONE without errors (bytes billed are tallied there). */
  readonly onDone?: (subject: ErrorSubject, metadata: JobMetadata) => void;
}

export class BigQueryJobs {
  private readonly options: BigQueryJobsOptions;

  constructor(options: BigQueryJobsOptions) {
    this.options = options;
  }

  /**
   * Run one job to DONE and return its final metadata. One retry loop covers creating the job,
   * polling it, and the job failing for a transient reason (then a new job id, `<base>_<n+1>`, is
   * used). A jobs.insert answered 409 means an earlier attempt did create the job: it is adopted.
   */
  async run(subject: ErrorSubject, base: string, create: (jobId: string) => Promise<Job>): Promise<FinishedJob> {
    let generation = 0;
    let job: Job | undefined;
    for (let attempt = 1; ; attempt += 1) {
      const jobId = `${base}_${generation}`;
      try {
        job ??= await this.createOrAdopt(jobId, create);
        const metadata = await this.waitForJob(job, subject);
        const status = metadata.status;
        if (status?.errorResult !== undefined && status.errorResult !== null) {
          job = undefined;
          generation += 1;
          throw new JobFailedError(jobId, status.errorResult, status.errors ?? []);
        }
        this.options.onDone?.(subject, metadata);
        return { jobId, location: metadata.jobReference?.location ?? this.options.location(), metadata };
      } catch (error) {
        if (jobExists(error)) {
          // jobs.insert answered with a job that already failed: the next attempt needs a new id.
          job = undefined;
          generation += 1;
        }
        const failed = { ...subject, operation: `${subject.operation} (job ${jobId})` };
        const kind = kindOf(error);
        if (kind !== 'retriable') throw toQuerySyncError(error, failed);
        const conflict = isConcurrentUpdate(errorInfo(error));
        const limit = conflict ? this.options.retry.maxConflictAttempts : this.options.retry.maxAttempts;
        if (attempt >= limit) throw toQuerySyncError(error, failed, attempt);
        await this.backoff(failed, attempt, error, conflict);
      }
    }
  }

  private async createOrAdopt(jobId: string, create: (jobId: string) => Promise<Job>): Promise<Job> {
    try {
      return await create(jobId);
    } catch (error) {
      if (kindOf(error) !== 'alreadyExists' || jobExists(error)) throw error;
      const job = this.options.client.job(jobId, { location: this.options.location() });
      const [metadata] = await job.getMetadata();
      job.metadata = metadata;
      this.options.log.debug({ jobId }, 'bigquery job already existed; waiting on it');
      return job;
    }
  }

  private async waitForJob(job: Job, subject: ErrorSubject): Promise<JobMetadata> {
    let metadata = job.metadata as JobMetadata | undefined;
    let waitedMs = 0;
    let intervalMs = this.options.pollMs;
    while (metadata?.status?.state !== 'DONE') {
      if (waitedMs >= JOB_WAIT_LIMIT_MS) {
        throw new LoadError(
          `BigQuery ${subject.operation}: job ${job.id ?? ''} not DONE after ${JOB_WAIT_LIMIT_MS / 60_000} min ` +
            `(state ${metadata?.status?.state ?? 'unknown'}); it may still finish, and replaying the batch is safe`,
          true,
          subject.table === undefined ? {} : { context: { resource: subject.table } },
        );
      }
      await this.options.sleep(intervalMs);
      waitedMs += intervalMs;
      intervalMs = Math.min(POLL_MAX_MS, Math.round(intervalMs * 1.5));
      [metadata] = await job.getMetadata();
      this.options.log.debug({ jobId: job.id, state: metadata?.status?.state }, 'bigquery job polled');
    }
    return metadata;
  }

  /** Call `fn`, retrying transient failures. Other errors are rethrown as they are. */
  async retrying<T>(subject: ErrorSubject, fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await fn();
      } catch (error) {
        if (kindOf(error) !== 'retriable') throw error;
        if (attempt >= this.options.retry.maxAttempts) throw toQuerySyncError(error, subject, attempt);
        await this.backoff(subject, attempt, error);
      }
    }
  }

  private async backoff(subject: ErrorSubject, attempt: number, error: unknown, conflict = false): Promise<void> {
    // A conflict waits at least the base: the other statement needs time to commit.
    const waitMs = conflict
      ? this.options.retry.baseMs + backoffMs(this.options.retry, attempt)
      : backoffMs(this.options.retry, attempt);
    this.options.log.warn(
      {
        operation: subject.operation,
        attempt,
        maxAttempts: this.options.retry.maxAttempts,
        waitMs,
        err: errorInfo(error).message,
      },
      conflict
        ? 'bigquery DML conflict with another writer on the same table; retrying'
        : 'bigquery transient error; retrying',
    );
    await this.options.sleep(waitMs);
  }
}

/** Our own errors are final here; BigQuery's are classified by reason. */
export function kindOf(error: unknown): BigQueryErrorClass {
  if (error instanceof QuerySyncError) return 'fatal';
  return classifyBigQueryError(errorInfo(error));
}

/** An ApiError thrown by createQueryJob when jobs.insert returned a job that already failed. */
function jobExists(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const response = (error as { response?: unknown }).response;
  if (typeof response !== 'object' || response === null) return false;
  const status = (response as { status?: unknown }).status;
  return typeof status === 'object' && status !== null && (status as { state?: unknown }).state === 'DONE';
}
