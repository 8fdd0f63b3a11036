import { Agent, type Dispatcher } from 'undici';
import {
  AuthError,
  DataError,
  type FatalApiError,
  RetriesExhaustedError,
  trimBody,
  type ErrorContext,
} from '../core/errors.js';
import { parseJson } from '../core/json.js';
import { redact, redactError, type Logger } from '../core/log.js';
import type { Clock, JsonValue } from '../core/types.js';
import {
  DEFAULT_BACKOFF,
  DEFAULT_MAX_RETRY_AFTER_MS,
  retryDelayMs,
  serverWaitMs,
  waitTooLong,
  type BackoffOptions,
} from './retry-after.js';
import type { RequestBudget } from './scheduler/budget.js';
import { classifyStatus, classifyTransportError, type Decision } from './classify.js';
import { DEFAULT_TIMEOUTS, type TimeoutOptions } from './timeouts.js';
import { bareApiKey, normalizeBaseUrl, userAgent } from './conventions.js';
import { sendAttempt, type RawResponse } from './attempt.js';
import { authError, fatalError } from './client-errors.js';

export interface RetryOptions {
  /** Attempts for 5xx, 408, resets, timeouts and unreadable bodies, the first included. @default 6 */
  readonly maxAttempts: number;
  /** Give up retrying once this much time has passed since the first attempt. @default 300_000 */
  readonly maxElapsedMs: number;
  /** 429s tolerated for one request before giving up (the scheduler slows down meanwhile). @default 50 */
  readonly maxRateLimited: number;
  readonly backoff: BackoffOptions;
}

const DEFAULT_RETRY: RetryOptions = Object.freeze({
  maxAttempts: 6,
  maxElapsedMs: 300_000,
  maxRateLimited: 50,
  backoff: DEFAULT_BACKOFF,
});

/** Waits at least this long are logged at info with their reason (shorter ones at debug). */
const LONG_WAIT_MS = 5_000;
/** At most one long-wait line per endpoint (and per kind: budget, 429) in this interval. */
const WAIT_LOG_INTERVAL_MS = 30_000;

export interface ApiClientOptions {
  readonly baseUrl: string;
  readonly apiKey: string;
  /**
   * Header(s) carrying the project scope; each one is sent with the same value (the spec and the
   * real service name it differently: see `connectors/service.ts`).
   */
  readonly projectHeader: string | readonly string[];
  readonly budget: RequestBudget;
  readonly clock: Clock;
  readonly logger: Logger;
  /** undici dispatcher; a keep-alive Agent by default. Tests may inject a MockAgent. */
  readonly dispatcher?: Dispatcher;
  readonly retry?: Partial<RetryOptions>;
  readonly timeouts?: Partial<TimeoutOptions>;
  /** See `DEFAULT_MAX_RETRY_AFTER_MS`. */
  readonly maxRetryAfterMs?: number;
  /** Waits at least this long are logged at info. @default LONG_WAIT_MS */
  readonly longWaitMs?: number;
  readonly random?: () => number;
  /** Told before each backoff sleep (the progress display shows "backing off"). */
  readonly onBackoff?: (ctx: CallContext, delayMs: number, reason: string) => void;
  /** Told as each request leaves the budget for the network (the rate-limit spend's journal). */
  readonly onRequestStart?: (endpoint: string, atMs: number) => void;
}

/** Counters one walk accumulates; they go into the run summary. */
export interface CallStats {
  requests: number;
  retries: number;
  rateLimited: number;
  /** Time spent sleeping in backoff after failures. */
  backoffMs: number;
  /** Time spent waiting for the request budget (pacing). */
  waitedMs: number;
}

export function newCallStats(): CallStats {
  return { requests: 0, retries: 0, rateLimited: 0, backoffMs: 0, waitedMs: 0 };
}

export interface CallContext extends ErrorContext {
  /** Fairness lane for the scheduler. */
  readonly lane: string;
  readonly stats: CallStats;
  readonly signal?: AbortSignal;
  /** Requests the caller has left to make one after another (a walk's pages left), if it knows: its order in its lane (`ScheduleOptions.left`). */
  readonly left?: () => number | undefined;
}

export interface ApiRequest {
  /** Path template the budget is kept for, e.g. `/v1/events`. */
  readonly endpoint: string;
  /** Concrete path, e.g. `/v1/events` or `/v1/events/abc`. */
  readonly path: string;
  readonly query: Readonly<Record<string, string | undefined>>;
  /** Project header value; `undefined` sends no header. */
  readonly project: string | undefined;
}

/**
 * The Query API client: one GET with the one retry loop. Every attempt draws on the shared budget;
 * the loop decides by `classify.ts` and never retries a 4xx that cannot succeed.
 */
export class ApiClient {
  private readonly options: ApiClientOptions;
  private readonly retry: RetryOptions;
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private readonly baseUrl: string;
  /** The key as sent (a pasted `Bearer ` prefix removed) and as redacted. */
  private readonly apiKey: string;
  private readonly userAgent = userAgent();
  private readonly requestMs: number;
  private readonly maxRetryAfterMs: number;
  private readonly longWaitMs: number;
  /** Per endpoint and kind of wait: when the last long-wait line was logged (one line per interval). */
  private readonly waitLogged = new Map<string, number>();
  /** Requests that left (their head written to a socket): what the server counts. */
  private sent = 0;
  /** The first 401's message (no context): once set, no request leaves any more. */
  private rejectedKey: string | undefined;

  /** Every request this client sent (attempts and retries alike), as the server counts them. */
  get requestsSent(): number {
    return this.sent;
  }

  /** The first 401's error message once the server has refused the key (nothing is sent after it). */
  get keyRejected(): string | undefined {
    return this.rejectedKey;
  }

  /**
   * Requests to `endpoint` its per-minute budget still allows before it binds (see
   * `RequestBudget.headroom`); unbounded when the budget cannot say.
   */
  headroom(endpoint: string): number {
    return this.options.budget.headroom?.(endpoint) ?? Number.POSITIVE_INFINITY;
  }

  constructor(options: ApiClientOptions) {
    this.options = options;
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    const timeouts = { ...DEFAULT_TIMEOUTS, ...options.timeouts };
    this.requestMs = timeouts.requestMs;
    this.maxRetryAfterMs = options.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS;
    this.longWaitMs = options.longWaitMs ?? LONG_WAIT_MS;
    this.ownsDispatcher = options.dispatcher === undefined;
    this.dispatcher =
      options.dispatcher ??
      new Agent({
        keepAliveTimeout: 30_000,
        connect: { timeout: timeouts.connectMs },
        headersTimeout: timeouts.headersMs,
        bodyTimeout: timeouts.bodyMs,
      });
    this.baseUrl = normalizeBaseUrl(options.baseUrl);
    this.apiKey = bareApiKey(options.apiKey);
  }

  /**
   * The API key removed from `text` (a server may echo it in an error body or header). Every
   * message this client builds from what a server sent goes through here first, before trimming:
   * the one redaction step on the error path. Callers that persist or print an error message use
   * it too (`redactError`), for messages built elsewhere.
   */
  redact(text: string): string {
    return redact(text, [this.apiKey, this.options.apiKey]);
  }

  /** GET and parse JSON (bigints exact). Throws the error group of `core/errors.ts` on failure. */
  async getJson(req: ApiRequest, ctx: CallContext): Promise<JsonValue> {
    try {
      return await this.getJsonUnredacted(req, ctx);
    } catch (error) {
      throw redactError(error, [this.apiKey, this.options.apiKey]);
    }
  }

  /**
   * Whether a long-wait line of this kind is due: requests of many lanes wait on the same endpoint
   * at once (per-event traces: hundreds), and one line per interval says as much as one per request.
   */
  private firstWaitLineIn(kind: string, now: number): boolean {
    const last = this.waitLogged.get(kind);
    if (last !== undefined && now - last < WAIT_LOG_INTERVAL_MS) return false;
    this.waitLogged.set(kind, now);
    return true;
  }

  private async getJsonUnredacted(req: ApiRequest, ctx: CallContext): Promise<JsonValue> {
    const { clock, logger, budget } = this.options;
    const url = this.url(req);
    const started = clock.now();
    let failures = 0;
    let rateLimited = 0;
    for (;;) {
      let decision: Decision;
      let response: RawResponse | undefined;
      if (this.rejectedKey !== undefined) throw new AuthError(this.rejectedKey, 401, { context: ctx });
      try {
        ctx.stats.requests += 1;
        const queuedAt = clock.now();
        response = await budget.schedule(
          req.endpoint,
          (sent) => {
            const waited = clock.now() - queuedAt;
            ctx.stats.waitedMs += waited;
            if (waited >= this.longWaitMs && this.firstWaitLineIn(`budget ${req.endpoint}`, clock.now())) {
              logger.info(
                { resource: ctx.resource, project: ctx.project, endpoint: req.endpoint, waitedMs: waited },
                `waited ${Math.round(waited / 1000)} s for the request budget of ${req.endpoint} (rate limits, or a pause after a 429); ` +
                  `other waits on it are logged at most every ${Math.round(WAIT_LOG_INTERVAL_MS / 1000)} s (the summary counts them all)`,
              );
            }
            // Queued before the 401 and started after it (a budget without `close`): not sent.
            if (this.rejectedKey !== undefined) throw new AuthError(this.rejectedKey, 401, { context: ctx });
            this.options.onRequestStart?.(req.endpoint, clock.now());
            return this.send(url, req.project, ctx.signal, () => {
              this.sent += 1;
              sent();
            });
          },
          {
            lane: ctx.lane,
            signal: ctx.signal,
            left: ctx.left?.(),
            reportsSent: true,
          },
        );
        decision = classifyStatus(response.status, serverWaitMs(response, clock.now()));
      } catch (error) {
        if (ctx.signal?.aborted) throw error;
        // Refused unsent by the closed budget (or in the task) after the key was rejected.
        if (this.rejectedKey !== undefined && response === undefined)
          throw new AuthError(this.rejectedKey, 401, { context: ctx });
        decision = classifyTransportError(error);
        if (decision.kind === 'fail') throw error;
      }

      if (decision.kind === 'ok' && response !== undefined) {
        try {
          return parseJson(response.text);
        } catch {
          decision = { kind: 'retry', reason: 'response body is not valid JSON (truncated?)', retryAfterMs: undefined };
          if (failures + 1 >= this.retry.maxAttempts) {
            throw new DataError(
              `expected a JSON body from GET ${req.path} (HTTP ${response.status}), got: ${this.said(response.text)}`,
              { context: ctx },
            );
          }
        }
      }

      switch (decision.kind) {
        case 'ok':
          throw new Error('unreachable');
        case 'auth':
          if (response?.status === 401) this.refuseAfter(response, req);
          throw this.authError(response, req, ctx);
        case 'fail':
          throw this.fatalError(response, req, ctx);
        case 'rate-limited': {
          rateLimited += 1;
          ctx.stats.rateLimited += 1;
          this.checkRetryAfter(decision.retryAfterMs, response, req, ctx);
          if (
            (decision.retryAfterMs ?? 0) >= this.longWaitMs &&
            this.firstWaitLineIn(`429 ${req.endpoint}`, clock.now())
          ) {
            logger.info(
              {
                resource: ctx.resource,
                project: ctx.project,
                endpoint: req.endpoint,
                retryAfterMs: decision.retryAfterMs,
              },
              `rate limited (429): the server asked to wait ${Math.round((decision.retryAfterMs ?? 0) / 1000)} s; ${req.endpoint} pauses that long`,
            );
          }
          budget.onRateLimited(req.endpoint, decision.retryAfterMs);
          logger.debug(
            {
              resource: ctx.resource,
              project: ctx.project,
              endpoint: req.endpoint,
              retryAfterMs: decision.retryAfterMs,
            },
            'rate limited (429); the scheduler pauses this endpoint',
          );
          if (rateLimited > this.retry.maxRateLimited) {
            throw new RetriesExhaustedError(
              `GET ${req.path} was rate limited (429) ${rateLimited} times in a row; the server's limits are far below the configured ones (lower --max-rpm/--max-rps)`,
              rateLimited,
              { context: ctx },
            );
          }
          continue;
        }
        case 'retry': {
          failures += 1;
          const elapsed = clock.now() - started;
          if (failures >= this.retry.maxAttempts || elapsed >= this.retry.maxElapsedMs) {
            throw new RetriesExhaustedError(
              `GET ${req.path} failed ${failures} times over ${Math.round(elapsed / 1000)} s; last: ${this.redact(decision.reason)}${
                response ? `: ${this.said(response.text, 120)}` : ''
              }`,
              failures,
              { context: ctx },
            );
          }
          this.checkRetryAfter(decision.retryAfterMs, response, req, ctx);
          const delay = retryDelayMs(decision.retryAfterMs, failures, this.retry.backoff, this.options.random);
          ctx.stats.retries += 1;
          ctx.stats.backoffMs += delay;
          const reason = this.redact(decision.reason);
          const fields = {
            resource: ctx.resource,
            project: ctx.project,
            endpoint: req.endpoint,
            attempt: failures,
            delayMs: delay,
            reason,
          };
          if (delay >= this.longWaitMs)
            logger.info(fields, `waiting ${Math.round(delay / 1000)} s before retrying GET ${req.path}: ${reason}`);
          else logger.debug(fields, 'retrying');
          this.options.onBackoff?.(ctx, delay, reason);
          await clock.sleep(delay, ctx.signal);
          continue;
        }
      }
    }
  }

  /**
   * The key was refused: nothing more may leave. Every request waiting for the budget, and every
   * later one, fails with the same error unsent; those in flight are answered (issue 31, item 5).
   */
  private refuseAfter(response: RawResponse, req: ApiRequest): void {
    if (this.rejectedKey !== undefined) return;
    this.rejectedKey = authError(response, req, {}, (text, max) => this.said(text, max)).message;
    this.options.budget.close?.(new AuthError(this.rejectedKey, 401));
  }

  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.close();
  }

  private url(req: ApiRequest): string {
    const params = new URLSearchParams();
    for (const [k, v] of Object.entries(req.query)) if (v !== undefined) params.set(k, v);
    const qs = params.toString();
    return `${this.baseUrl}${req.path}${qs ? `?${qs}` : ''}`;
  }

  /** A server's text for a message: key removed first, then trimmed. */
  private said(text: string, maxChars = 200): string {
    return trimBody(this.redact(text), maxChars);
  }

  /** A wait beyond `maxRetryAfterMs` ends the request (`retry-after.ts`): the run must end in bounded time. */
  private checkRetryAfter(
    retryAfterMs: number | undefined,
    response: RawResponse | undefined,
    req: ApiRequest,
    ctx: CallContext,
  ): void {
    const header = this.redact(response?.retryAfter ?? response?.retryAfterMsHeader ?? '?');
    const error = waitTooLong(
      retryAfterMs,
      this.maxRetryAfterMs,
      { path: req.path, status: response?.status, header },
      ctx,
    );
    if (error !== undefined) throw error;
  }

  /**
   * One attempt (`attempt.ts`), bounded as a whole by `requestMs`; passing it fails the attempt
   * with `REQUEST_DEADLINE_CODE`, retried like a timeout.
   */
  private async send(
    url: string,
    project: string | undefined,
    signal: AbortSignal | undefined,
    sent?: () => void,
  ): Promise<RawResponse> {
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.apiKey}`,
      accept: 'application/json',
      'user-agent': this.userAgent,
    };
    if (project !== undefined)
      for (const name of projectHeaders(this.options.projectHeader)) headers[name.toLowerCase()] = project;
    return sendAttempt({ url, headers, dispatcher: this.dispatcher, requestMs: this.requestMs, signal, sent });
  }

  private authError(response: RawResponse | undefined, req: ApiRequest, ctx: CallContext): AuthError {
    return authError(response, req, ctx, (text, max) => this.said(text, max));
  }

  private fatalError(response: RawResponse | undefined, req: ApiRequest, ctx: CallContext): FatalApiError {
    return fatalError(response, req, ctx, (text, max) => this.said(text, max));
  }
}

function projectHeaders(value: string | readonly string[]): readonly string[] {
  return typeof value === 'string' ? [value] : value;
}
