import { setTimeout as delay } from 'node:timers/promises';
import type { Clock } from './types.js';

/** The real clock. Parts take a `Clock` so tests can pass a fake one. */
export const systemClock: Clock = Object.freeze({
  now: () => Date.now(),
  sleep: (ms: number, signal?: AbortSignal) => (ms <= 0 ? Promise.resolve() : delay(ms, undefined, { signal })),
});
