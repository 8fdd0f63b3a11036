/**
 * Query-parameter parsing shared by the handlers. Every refusal is an `ApiError` carrying the status
 * and the `{"error":{"code","message"}}` body the server sends.
 */

import { decodeCursor, type CursorState } from './cursor.js';
import type { Direction } from './sorted-list.js';

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

export function badRequest(message: string, code = 'invalid_parameter'): ApiError {
  return new ApiError(400, code, message);
}

/** Page size: `fallback` when absent, clamped to `max`; 400 unless a positive integer. */
export function parseLimit(params: URLSearchParams, fallback: number, max: number): number {
  const raw = params.get('limit');
  if (raw === null) return fallback;
  if (!/^\s*\d+\s*$/.test(raw) || Number(raw) < 1) {
    throw badRequest(`limit must be a positive integer, got "${raw}"`);
  }
  return Math.min(Number(raw), max);
}

const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i;

export function parseIsoTime(name: string, raw: string): number {
  const ms = ISO_DATE_TIME.test(raw) ? Date.parse(raw) : Number.NaN;
  if (!Number.isFinite(ms)) throw badRequest(`${name} must be an ISO-8601 date-time such as 2026-11-20T10:00:00Z, got "${raw}"`);
  return ms;
}

/** A time window in ms: `lower` inclusive, `upper` exclusive; either may be absent. */
export interface TimeWindow {
  readonly lower: number | undefined;
  readonly upper: number | undefined;
  /** Whether `timestamp[gte]` itself was given (search requires it). */
  readonly hasGte: boolean;
}

/** `timestamp[gte|gt|lte|lt]`, folded into [lower, upper) over whole milliseconds. */
export function parseTimeWindow(params: URLSearchParams): TimeWindow {
  let lower: number | undefined;
  let upper: number | undefined;
  const tighten = (bound: 'lower' | 'upper', value: number): void => {
    if (bound === 'lower') lower = lower === undefined ? value : Math.max(lower, value);
    else upper = upper === undefined ? value : Math.min(upper, value);
  };
  const gte = params.get('timestamp[gte]');
  const gt = params.get('timestamp[gt]');
  const lte = params.get('timestamp[lte]');
  const lt = params.get('timestamp[lt]');
  if (gte !== null) tighten('lower', parseIsoTime('timestamp[gte]', gte));
  if (gt !== null) tighten('lower', parseIsoTime('timestamp[gt]', gt) + 1);
  if (lte !== null) tighten('upper', parseIsoTime('timestamp[lte]', lte) + 1);
  if (lt !== null) tighten('upper', parseIsoTime('timestamp[lt]', lt));
  return { lower, upper, hasGte: gte !== null };
}

export function parseCursor(params: URLSearchParams, resource: string): CursorState | undefined {
  const raw = params.get('cursor');
  if (raw === null || raw === '') return undefined;
  const state = decodeCursor(raw, resource);
  if (!state) throw badRequest(`cursor is malformed or belongs to another list: "${raw.slice(0, 80)}"`, 'invalid_cursor');
  return state;
}

/** `order_by=timestamp|-timestamp` (events and search). */
export function parseOrderBy(params: URLSearchParams, fallback: Direction): Direction {
  const raw = params.get('order_by');
  if (raw === null || raw === '') return fallback;
  if (raw === 'timestamp') return 'asc';
  if (raw === '-timestamp') return 'desc';
  throw badRequest(`order_by must be "timestamp" or "-timestamp", got "${raw}"`);
}

/** `order_direction=asc|desc` (users). */
export function parseOrderDirection(params: URLSearchParams, fallback: Direction): Direction {
  const raw = params.get('order_direction');
  if (raw === null || raw === '') return fallback;
  if (raw === 'asc' || raw === 'desc') return raw;
  throw badRequest(`order_direction must be "asc" or "desc", got "${raw}"`);
}

/** `properties[key]=value` pairs; a dotted key reaches into nested objects. */
export function parsePropertyFilters(params: URLSearchParams): [string, string][] {
  const filters: [string, string][] = [];
  for (const [name, value] of params) {
    const match = /^properties\[(.+)\]$/.exec(name);
    if (match?.[1] !== undefined) filters.push([match[1], value]);
  }
  return filters;
}

/** A string parameter, `undefined` when absent or empty. */
export function optional(params: URLSearchParams, name: string): string | undefined {
  const value = params.get(name);
  return value === null || value === '' ? undefined : value;
}
