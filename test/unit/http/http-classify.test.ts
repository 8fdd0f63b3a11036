import { describe, expect, it } from 'vitest';
import { backoffDelay } from '../../../src/http/backoff.js';
import { classifyStatus, classifyTransportError, parseRetryAfter } from '../../../src/http/classify.js';

describe('classifyStatus', () => {
  const now = Date.parse('2026-11-21T00:00:00Z');
  it('sorts statuses by what the caller does', () => {
    expect(classifyStatus(200, undefined, now).kind).toBe('ok');
    expect(classifyStatus(429, '3', now)).toEqual({ kind: 'rate-limited', retryAfterMs: 3000 });
    expect(classifyStatus(503, undefined, now).kind).toBe('retry');
    expect(classifyStatus(500, undefined, now).kind).toBe('retry');
    expect(classifyStatus(408, undefined, now).kind).toBe('retry');
    expect(classifyStatus(401, undefined, now).kind).toBe('auth');
    expect(classifyStatus(403, undefined, now).kind).toBe('auth');
    expect(classifyStatus(400, undefined, now).kind).toBe('fail');
    expect(classifyStatus(404, undefined, now).kind).toBe('fail');
    expect(classifyStatus(422, undefined, now).kind).toBe('fail');
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
