import { describe, expect, it } from 'vitest';
import { classifyStatus, classifyTransportError } from '../../../src/http/classify.js';
import {
  backoffDelay,
  DEFAULT_MAX_RETRY_AFTER_MS,
  pauseAfter429,
  parseRetryAfter,
  retryDelayMs,
  serverWaitMs,
  waitTooLong,
} from '../../../src/http/retry-after.js';

describe('classifyStatus', () => {
  const now = Date.parse('2026-11-21T00:00:00Z');
  it('sorts statuses by what the caller does', () => {
    expect(classifyStatus(200, undefined).kind).toBe('ok');
    expect(classifyStatus(429, parseRetryAfter('3', now))).toEqual({ kind: 'rate-limited', retryAfterMs: 3000 });
    expect(classifyStatus(503, undefined).kind).toBe('retry');
    expect(classifyStatus(500, undefined).kind).toBe('retry');
    expect(classifyStatus(408, undefined).kind).toBe('retry');
    expect(classifyStatus(401, undefined).kind).toBe('auth');
    expect(classifyStatus(403, undefined).kind).toBe('auth');
    expect(classifyStatus(400, undefined).kind).toBe('fail');
    expect(classifyStatus(404, undefined).kind).toBe('fail');
    expect(classifyStatus(422, undefined).kind).toBe('fail');
  });
  it('reads Retry-After as seconds or an HTTP date; 0 and junk fall back to backoff', () => {
    expect(parseRetryAfter('2', now)).toBe(2000);
    expect(parseRetryAfter('0', now)).toBeUndefined();
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter(new Date(now + 5000).toUTCString(), now)).toBe(5000);
    expect(parseRetryAfter(new Date(now - 5000).toUTCString(), now)).toBeUndefined();
  });
  it('retries resets and timeouts, not programming errors', () => {
    expect(classifyTransportError(Object.assign(new Error('x'), { code: 'ECONNRESET' })).kind).toBe('retry');
    expect(classifyTransportError(Object.assign(new Error('x'), { code: 'UND_ERR_HEADERS_TIMEOUT' })).kind).toBe(
      'retry',
    );
    expect(classifyTransportError(new Error('other side closed')).kind).toBe('retry');
    expect(classifyTransportError(new TypeError('bad')).kind).toBe('fail');
  });
});

describe('backoffDelay', () => {
  it('grows exponentially with full jitter and is capped', () => {
    const opts = { baseMs: 100, maxDelayMs: 1000 };
    expect(backoffDelay(0, opts, () => 0.999)).toBe(99);
    expect(backoffDelay(3, opts, () => 0.999)).toBe(799);
    expect(backoffDelay(10, opts, () => 0.999)).toBe(999);
    expect(backoffDelay(10, opts, () => 0)).toBe(0);
  });
});

describe('Retry-After: read, capped, waited for (retry-after.ts)', () => {
  const now = Date.parse('2026-11-21T00:00:00Z');
  it('reads retry-after-ms before Retry-After, as the SDK does', () => {
    expect(serverWaitMs({ retryAfter: '3', retryAfterMsHeader: '1500' }, now)).toBe(1500);
    expect(serverWaitMs({ retryAfter: '3', retryAfterMsHeader: 'soon' }, now)).toBe(3000);
    expect(serverWaitMs({ retryAfter: undefined, retryAfterMsHeader: undefined }, now)).toBeUndefined();
  });
  it('fails a wait beyond the cap, naming it, and lets one within it pass', () => {
    const asked = { path: '/v1/events', status: 429, header: '600' };
    expect(waitTooLong(DEFAULT_MAX_RETRY_AFTER_MS, DEFAULT_MAX_RETRY_AFTER_MS, asked, {})).toBeUndefined();
    expect(waitTooLong(undefined, DEFAULT_MAX_RETRY_AFTER_MS, asked, {})).toBeUndefined();
    const error = waitTooLong(600_000, DEFAULT_MAX_RETRY_AFTER_MS, asked, {});
    expect(error?.code).toBe('E_RETRIES_EXHAUSTED');
    expect(error?.message).toContain('asking to wait 600 s (Retry-After: 600), longer than --max-retry-after (300 s)');
  });
  it("waits the server's wait: a 429 pauses for it (else the scheduler's backoff), a 5xx sleeps the longer of it and our backoff", () => {
    expect(pauseAfter429(2000, 1000)).toBe(2000);
    expect(pauseAfter429(undefined, 1000)).toBe(1000);
    expect(pauseAfter429(Number.NaN, 1000)).toBe(1000);
    const backoff = { baseMs: 100, maxDelayMs: 1000 };
    expect(retryDelayMs(5000, 1, backoff, () => 0.999)).toBe(5000);
    expect(retryDelayMs(undefined, 4, backoff, () => 0.999)).toBe(799);
    expect(retryDelayMs(10, 4, backoff, () => 0.999)).toBe(799);
  });
});
