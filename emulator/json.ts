/**
 * JSON text for values that may hold `bigint`: `JSON.stringify` throws on them, and converting to
 * `number` would round the nanosecond epochs (about 1.8e18, beyond 2^53). Bigints are written as
 * their exact integer digits.
 */

import { randomBytes } from 'node:crypto';
import type { JsonValue } from './types.js';

function isArray(value: JsonValue): value is readonly JsonValue[] {
  return Array.isArray(value);
}

/**
 * Bigints go through `JSON.stringify` as marker strings carrying a per-process nonce, and the quoted
 * markers are then replaced by the bare digits. Several times faster than a hand-written writer for
 * 1000-span pages. (`JSON.rawJSON` would do this directly, but Node 20 does not have it.)
 */
const NONCE = randomBytes(6).toString('hex');
const MARKER = `\u0000bigint-${NONCE}:`;
/** The opening quote and marker as `JSON.stringify` writes them (NUL as the six characters `\u0000`). */
const MARKER_IN_JSON = `"\\u0000bigint-${NONCE}:`;

export function toJson(value: JsonValue): string {
  try {
    // Most bodies hold no bigint, and a replacer costs a call per value; a bigint throws early.
    return JSON.stringify(value);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
  }
  let sawBigint = false;
  const text = JSON.stringify(value, (_key, item: unknown) => {
    if (typeof item !== 'bigint') return item;
    sawBigint = true;
    return MARKER + item.toString();
  });
  if (!sawBigint) return text;
  const parts = text.split(MARKER_IN_JSON);
  for (let i = 1; i < parts.length; i++) {
    const part = parts[i]!;
    const close = part.indexOf('"');
    parts[i] = part.slice(0, close) + part.slice(close + 1);
  }
  return parts.join('');
}

/** A deep copy, so callers can never mutate the emulator's store. */
export function cloneJson<T extends JsonValue>(value: T): T {
  return clone(value) as T;
}

function clone(value: JsonValue): JsonValue {
  if (value === null || typeof value !== 'object') return value;
  if (isArray(value)) return value.map(clone);
  const out: { [key: string]: JsonValue } = {};
  for (const key of Object.keys(value)) {
    const item = value[key];
    if (item !== undefined) out[key] = clone(item);
  }
  return out;
}
