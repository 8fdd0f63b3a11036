/**
 * The JSON value types the emulator serves. A copy of the product's own (`src/core/types.ts`) on
 * purpose: the emulator is the test oracle, so it shares no code with what it tests.
 */

/** A JSON value; `bigint` carries integers beyond 2^53 exactly (the traces' `*_ns` fields). */
export type JsonValue =
  | string
  | number
  | bigint
  | boolean
  | null
  | readonly JsonValue[]
  | { readonly [key: string]: JsonValue };

/** One record as served. */
export type ApiRecord = { readonly [key: string]: JsonValue };
