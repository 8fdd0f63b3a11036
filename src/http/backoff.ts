/** Exponential backoff with full jitter (AWS architecture blog): sleep U(0, min(cap, base·2^n)). */
export interface BackoffOptions {
  /** First step. @default 500 */
  readonly baseMs: number;
  /** Largest single wait. @default 30_000 (the vendor's own clients cap `Retry-After` at 30 s) */
  readonly maxDelayMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = Object.freeze({ baseMs: 500, maxDelayMs: 30_000 });

export function backoffDelay(attempt: number, options: BackoffOptions, random: () => number = Math.random): number {
  const ceiling = Math.min(options.maxDelayMs, options.baseMs * 2 ** Math.max(0, attempt));
  return Math.floor(random() * ceiling);
}
