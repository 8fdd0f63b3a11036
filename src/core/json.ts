import { isInteger, isSafeNumber, parse, stringify } from 'lossless-json';
import type { JsonValue } from './types.js';

/**
 * A number token of 16+ digits (after `:`, `,`, `[` or at the start, with optional blanks and sign)
 * is the only way a JSON text can hold an integer that `JSON.parse` would round. Digit runs inside
 * strings (ids such as a span id `"7831528000000034"`) no longer send the page to the lossless
 * parser, which on a page of 100 events × 200 KB took 750 MB of heap and several times longer; a
 * string that happens to hold `: 1234567890123456` only costs that slower parse.
 */
const MAYBE_UNSAFE_INTEGER = /(?:^|[:,[])\s*-?\d{16}/;

/** Whether `text` may hold an integer beyond 2^53 (then `parseJson` takes the lossless parser). */
export function mayHoldUnsafeInteger(text: string): boolean {
  return MAYBE_UNSAFE_INTEGER.test(text);
}

function parseNumber(text: string): number | bigint {
  return isInteger(text) && !isSafeNumber(text) ? BigInt(text) : Number(text);
}

/**
 * Parse JSON without losing integers beyond 2^53 (they become `bigint`). Texts with no long digit
 * run take the native parser, which is several times faster.
 */
export function parseJson(text: string): JsonValue {
  if (!mayHoldUnsafeInteger(text)) return JSON.parse(text) as JsonValue;
  return parse(text, null, parseNumber) as JsonValue;
}

/**
 * Serialize JSON with `bigint` written as exact digits. The native serializer first (it writes
 * parsed JSON values as the lossless one does, several times faster: a first sync serializes
 * every JSON column); it refuses a `bigint`, and only then does the lossless one serialize.
 */
export function stringifyJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? 'null';
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
    return stringify(value) ?? 'null';
  }
}
