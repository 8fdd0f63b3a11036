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

/**
 * Each candidate of `MAYBE_UNSAFE_INTEGER` as a whole token: a JSON integer (no fraction, no
 * exponent, no leading zero: that one is left for `JSON.parse` to refuse) where a value may stand
 * (after `:`, `,`, `[` or at the start) and end (before `,`, `]`, `}` or the end of the text).
 * Whether it stands outside a string is told apart by `parseJson`.
 */
const INTEGER_TOKEN = /(?:^|[:,[])\s*(-?[1-9]\d{15,})(?=\s*(?:[,\]}]|$))/g;

/** Whether `text` may hold an integer beyond 2^53 (then `parseJson` looks for such tokens). */
export function mayHoldUnsafeInteger(text: string): boolean {
  return MAYBE_UNSAFE_INTEGER.test(text);
}

function parseNumber(text: string): number | bigint {
  return isInteger(text) && !isSafeNumber(text) ? BigInt(text) : Number(text);
}

/**
 * Parse JSON without losing integers beyond 2^53 (they become `bigint`). Texts with no long digit
 * run take the native parser, which is several times faster. A text with some (every traces page:
 * its `*_ns` fields) takes the native parser too: each integer token beyond 2^53 outside a string
 * is written as a string marked with a nonce the text does not hold, and the marked strings are
 * turned into `bigint` after the parse. The lossless parser, four to five times slower and the
 * source of much of a first sync's garbage, is left for a text where the marks do not come back
 * one for one (a duplicate key, or a string that imitates a mark).
 */
export function parseJson(text: string): JsonValue {
  if (!mayHoldUnsafeInteger(text)) return JSON.parse(text) as JsonValue;
  const tokens = unsafeIntegerTokens(text);
  if (tokens.length === 0) return JSON.parse(text) as JsonValue;
  const mark = markOutside(text);
  if (mark === undefined) return parse(text, null, parseNumber) as JsonValue;
  let marked = '';
  let from = 0;
  for (let i = 0; i < tokens.length; i += 2) {
    const start = tokens[i] as number;
    const end = tokens[i + 1] as number;
    marked += `${text.slice(from, start)}"${mark}${text.slice(start, end)}"`;
    from = end;
  }
  marked += text.slice(from);
  const marks: Marks = { parsed: `\u0000${mark.slice('\\u0000'.length)}`, count: 0 };
  let revived: unknown;
  try {
    revived = revive(JSON.parse(marked), marks);
  } catch {
    // Text that is not JSON, or a string that imitates a mark: the lossless parser decides (and throws).
    return parse(text, null, parseNumber) as JsonValue;
  }
  if (marks.count !== tokens.length / 2) return parse(text, null, parseNumber) as JsonValue;
  return revived as JsonValue;
}

/**
 * Start and end offsets (flattened pairs) of the integer tokens beyond 2^53 that stand outside
 * strings. A quote outside a string opens one; inside, a quote closes it unless an odd run of
 * backslashes precedes it.
 */
function unsafeIntegerTokens(text: string): number[] {
  const found: number[] = [];
  let pos = 0;
  let inString = false;
  INTEGER_TOKEN.lastIndex = 0;
  for (let m = INTEGER_TOKEN.exec(text); m !== null; m = INTEGER_TOKEN.exec(text)) {
    const digits = m[1] as string;
    const end = m.index + m[0].length;
    const start = end - digits.length;
    for (let q = text.indexOf('"', pos); q !== -1 && q < start; q = text.indexOf('"', q + 1)) {
      if (inString) {
        let slashes = 0;
        while (text.charCodeAt(q - 1 - slashes) === 92) slashes += 1;
        if (slashes % 2 === 1) continue;
      }
      inString = !inString;
    }
    pos = start;
    if (!inString && !Number.isSafeInteger(Number.parseInt(digits, 10))) found.push(start, end);
  }
  return found;
}

/** A mark (NUL and a nonce) that `text` does not hold, spelled as JSON string text. */
function markOutside(text: string): string | undefined {
  for (let attempt = 0; attempt < 4; attempt++) {
    const nonce = Math.random().toString(36).slice(2, 12);
    if (nonce.length >= 6 && !text.includes(nonce)) return `\\u0000${nonce}:`;
  }
  return undefined;
}

/** Counts the marks found by `revive`. */
interface Marks {
  readonly parsed: string;
  count: number;
}

/**
 * `value` with each string that starts with the mark (as parsed: NUL, the nonce, `:`) made a
 * `bigint`, in place (the parse's own objects). A marked string that is not an integer throws.
 */
function revive(value: unknown, marks: Marks): unknown {
  if (typeof value === 'string') {
    if (value.charCodeAt(0) !== 0 || !value.startsWith(marks.parsed)) return value;
    marks.count += 1;
    return BigInt(value.slice(marks.parsed.length));
  }
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (typeof item === 'object' || typeof item === 'string') value[i] = revive(item, marks);
    }
    return value;
  }
  const object = value as Record<string, unknown>;
  for (const key in object) {
    const item = object[key];
    if (typeof item !== 'object' && typeof item !== 'string') continue;
    const next = revive(item, marks);
    if (next === item) continue;
    if (key !== '__proto__') object[key] = next;
    // An own `__proto__` key (JSON.parse makes one) is set as data, not through the prototype's setter.
    else Object.defineProperty(object, key, { value: next, writable: true, enumerable: true, configurable: true });
  }
  return value;
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
