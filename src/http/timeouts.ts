/**
 * The HTTP client's time limits and their defaults, apart from the client itself, so that the
 * configuration can state its defaults without importing the client (and undici with it).
 */

export interface TimeoutOptions {
  /** TCP/TLS connect. @default 10_000 */
  readonly connectMs: number;
  /** Until response headers arrive. @default 30_000 */
  readonly headersMs: number;
  /** Between body chunks. @default 60_000 */
  readonly bodyMs: number;
  /**
   * One attempt from start to the last byte of the body (connect + headers + whole body). The
   * other three are idle timeouts: a body trickling a byte a minute never trips them. Twice the
   * connect + headers + body timeouts by default: a page (at most 1,000 traces) is read in seconds.
   * @default 120_000
   */
  readonly requestMs: number;
}

export const DEFAULT_TIMEOUTS: TimeoutOptions = Object.freeze({
  connectMs: 10_000,
  headersMs: 30_000,
  bodyMs: 60_000,
  requestMs: 120_000,
});
