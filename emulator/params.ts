/**
 * Query-parameter parsing shared by the handlers. Every refusal is an `ApiError` carrying the status
 * and the `{"error":{"code","message"}}` body the server sends.
 */

import { decodeCursor, type CursorState } from './cursor.js';
import type { Direction } from './sorted-list.js';

/** `error.details` of the body: the parameter at fault and what is allowed (the SDK's error schema). */
export interface ErrorDetails {
  readonly field?: string;
  readonly allowed_fields?: readonly string[];
}

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: ErrorDetails | undefined;

  constructor(status: number, code: string, message: string, details?: ErrorDetails) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

/** A 400 naming the parameter at fault (`details.field`) and, when known, the values it allows. */
export function badRequest(
  message: string,
  field?: string,
  options: { code?: string; allowed?: readonly string[] } = {},
): ApiError {
  const details: ErrorDetails | undefined =
    field === undefined
      ? undefined
      : options.allowed === undefined
        ? { field }
        : { field, allowed_fields: options.allowed };
  return new ApiError(400, options.code ?? 'invalid_parameter', message, details);
}

/** Page size: `fallback` when absent, clamped to `max`; 400 unless a positive integer. */
export function parseLimit(params: URLSearchParams, fallback: number, max: number): number {
  const raw = params.get('limit');
  if (raw === null) return fallback;
  if (!/^\s*\d+\s*$/.test(raw) || Number(raw) < 1) {
    throw badRequest(`limit must be a positive integer, got "${raw}"`, 'limit');
  }
  return Math.min(Number(raw), max);
}

const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i;

function parseIsoTime(name: string, raw: string): number {
  const ms = ISO_DATE_TIME.test(raw) ? Date.parse(raw) : Number.NaN;
  if (!Number.isFinite(ms))
    throw badRequest(`${name} must be an ISO-8601 date-time such as 2026-11-20T10:00:00Z, got "${raw}"`, name);
  return ms;
}

/** A time window in ms: `lower` inclusive, `upper` exclusive; either may be absent. */
export interface TimeWindow {
  readonly lower: number | undefined;
  readonly upper: number | undefined;
  /** Whether `timestamp[gte]` itself was given (search requires it). */
  readonly hasGte: boolean;
}

/**
 * `<field>[gte|gt|lte|lt]` (default `timestamp`), folded into [lower, upper) over whole
 * milliseconds. `separator: '.'` reads `<field>.gte` and `<field>.lt` instead (the facets endpoint).
 */
export function parseTimeWindow(
  params: URLSearchParams,
  field = 'timestamp',
  separator: '[]' | '.' = '[]',
): TimeWindow {
  let lower: number | undefined;
  let upper: number | undefined;
  const tighten = (bound: 'lower' | 'upper', value: number): void => {
    if (bound === 'lower') lower = lower === undefined ? value : Math.max(lower, value);
    else upper = upper === undefined ? value : Math.min(upper, value);
  };
  const name = (op: string): string => (separator === '.' ? `${field}.${op}` : `${field}[${op}]`);
  const read = (op: string): number | undefined => {
    const raw = params.get(name(op));
    return raw === null ? undefined : parseIsoTime(name(op), raw);
  };
  const gte = read('gte');
  const gt = read('gt');
  const lte = read('lte');
  const lt = read('lt');
  if (gte !== undefined) tighten('lower', gte);
  if (gt !== undefined) tighten('lower', gt + 1);
  if (lte !== undefined) tighten('upper', lte + 1);
  if (lt !== undefined) tighten('upper', lt);
  return { lower, upper, hasGte: gte !== undefined };
}

export function parseCursor(params: URLSearchParams, resource: string): CursorState | undefined {
  const raw = params.get('cursor');
  if (raw === null || raw === '') return undefined;
  const state = decodeCursor(raw, resource);
  if (!state)
    throw badRequest(`cursor is malformed or belongs to another list: "${raw.slice(0, 80)}"`, 'cursor', {
      code: 'invalid_cursor',
    });
  return state;
}

/**
 * `order_by=<field>` ascending, `-<field>` descending. Every list takes `timestamp` (the vendor's SDK
 * sends `-timestamp` to every list by default) meaning the list's own time field, and that field's
 * name (`last_seen`, `last_message_at`, `created_at`).
 */
export function parseOrderBy(params: URLSearchParams, fallback: Direction, field = 'timestamp'): Direction {
  const raw = params.get('order_by');
  if (raw === null || raw === '') return fallback;
  const fields = field === 'timestamp' ? ['timestamp'] : ['timestamp', field];
  for (const name of fields) {
    if (raw === name) return 'asc';
    if (raw === `-${name}`) return 'desc';
  }
  const allowed = fields.flatMap((name) => [name, `-${name}`]);
  throw badRequest(`order_by must be one of ${allowed.map((a) => `"${a}"`).join(', ')}, got "${raw}"`, 'order_by', {
    allowed,
  });
}

/** `order_direction=asc|desc` (users). */
export function parseOrderDirection(params: URLSearchParams, fallback: Direction): Direction {
  const raw = params.get('order_direction');
  if (raw === null || raw === '') return fallback;
  if (raw === 'asc' || raw === 'desc') return raw;
  throw badRequest(`order_direction must be "asc" or "desc", got "${raw}"`, 'order_direction', {
    allowed: ['asc', 'desc'],
  });
}

const COMPARE_OPS = ['eq', 'neq', 'gt', 'gte', 'lt', 'lte'] as const;
type CompareOp = (typeof COMPARE_OPS)[number];

/** One `<group>[key]=value` or `<group>[key][op]=value` filter (`properties`, `traits`). */
export interface KeyedFilter {
  readonly key: string;
  readonly op: CompareOp;
  readonly value: string;
}

/**
 * `properties[key]=value` and `properties[key][op]=value` (the SDK's deep-object form, op one of
 * eq|neq|gt|gte|lt|lte); a dotted key reaches into nested objects. Same for `traits`.
 */
export function parseKeyedFilters(params: URLSearchParams, group: 'properties' | 'traits'): KeyedFilter[] {
  const filters: KeyedFilter[] = [];
  const pattern = new RegExp(`^${group}\\[([^\\]]+)\\](?:\\[([^\\]]*)\\])?$`);
  for (const [name, value] of params) {
    const match = pattern.exec(name);
    if (match?.[1] === undefined) continue;
    const op = match[2] ?? 'eq';
    if (!(COMPARE_OPS as readonly string[]).includes(op)) {
      throw badRequest(`${name}: the operator must be one of ${COMPARE_OPS.join(', ')}`, name, {
        allowed: COMPARE_OPS,
      });
    }
    filters.push({ key: match[1], op: op as CompareOp, value });
  }
  return filters;
}

const STRING_OPS = ['eq', 'neq', 'startsWith', 'endsWith', 'contains'] as const;
export type StringOp = (typeof STRING_OPS)[number];

/**
 * A string filter given as `name=value` or `name[op]=value` (the SDK's deep-object form), as a test;
 * undefined when absent. `ops` narrows the operators (`signal` takes eq and neq only).
 */
export function parseStringFilter(
  params: URLSearchParams,
  name: string,
  ops: readonly StringOp[] = STRING_OPS,
): ((value: string) => boolean) | undefined {
  const tests: ((value: string) => boolean)[] = [];
  for (const [key, expected] of params) {
    if (expected === '') continue;
    if (key === name) {
      tests.push((v) => v === expected);
      continue;
    }
    if (!key.startsWith(`${name}[`) || !key.endsWith(']')) continue;
    const op = key.slice(name.length + 1, -1);
    if (!(ops as readonly string[]).includes(op)) {
      throw badRequest(`${key}: the operator must be one of ${ops.join(', ')}`, key, { allowed: ops });
    }
    tests.push(stringTest(op as StringOp, expected));
  }
  if (tests.length === 0) return undefined;
  return (value) => tests.every((t) => t(value));
}

function stringTest(op: StringOp, expected: string): (value: string) => boolean {
  switch (op) {
    case 'eq':
      return (v) => v === expected;
    case 'neq':
      return (v) => v !== expected;
    case 'startsWith':
      return (v) => v.startsWith(expected);
    case 'endsWith':
      return (v) => v.endsWith(expected);
    case 'contains':
      return (v) => v.includes(expected);
  }
}

/** A string parameter, `undefined` when absent or empty. */
export function optional(params: URLSearchParams, name: string): string | undefined {
  const value = params.get(name);
  return value === null || value === '' ? undefined : value;
}
