import { expect } from 'vitest';
import { request } from 'undici';
import type { ApiRecord } from '../../src/core/types.js';
import type { Emulator } from '../../emulator/index.js';

export interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  /** `JSON.parse` of the body (bigints rounded: use `text` for exact digits). */
  readonly json: unknown;
}

export interface ListBody {
  readonly data: Record<string, unknown>[];
  readonly meta: { readonly cursor: string | null; readonly has_more: boolean };
}

export interface ErrorBody {
  readonly error: {
    readonly code: string;
    readonly message: string;
    readonly details?: { readonly field?: string; readonly allowed_fields?: readonly string[] };
  };
}

/**
 * GET `path` with the org key (unless `key` is given; `null` sends no Authorization); `project` goes
 * in the emulator's own project header (its flavor's).
 */
export async function get(
  emulator: Emulator,
  path: string,
  options: { project?: string; key?: string | null; headers?: Record<string, string>; method?: string } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { ...options.headers };
  const key = options.key === undefined ? emulator.apiKey : options.key;
  if (key !== null) headers['authorization'] = `Bearer ${key}`;
  if (options.project !== undefined) headers[emulator.projectHeader] = options.project;
  const response = await request(emulator.url + path, { method: (options.method ?? 'GET') as 'GET', headers });
  const text = await response.body.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.statusCode, headers: response.headers, text, json };
}

export async function list(emulator: Emulator, path: string, project?: string): Promise<ListBody> {
  const reply = await get(emulator, path, { project });
  if (reply.status !== 200) throw new Error(`GET ${path} -> ${reply.status}: ${reply.text}`);
  return reply.json as ListBody;
}

/** Follows cursors to the end; `between` runs after each page (to insert records mid-walk). */
export async function walkAll(
  emulator: Emulator,
  path: string,
  options: { project?: string; between?: (page: number) => void; maxPages?: number } = {},
): Promise<{ rows: Record<string, unknown>[]; pages: number }> {
  const rows: Record<string, unknown>[] = [];
  let cursor: string | null = null;
  let pages = 0;
  const separator = path.includes('?') ? '&' : '?';
  do {
    const url: string = cursor === null ? path : `${path}${separator}cursor=${encodeURIComponent(cursor)}`;
    const body = await list(emulator, url, options.project);
    rows.push(...body.data);
    expect(body.meta.has_more).toBe(body.meta.cursor !== null);
    cursor = body.meta.cursor;
    pages++;
    options.between?.(pages);
    if (pages > (options.maxPages ?? 10_000)) throw new Error('walk did not end');
  } while (cursor !== null);
  return { rows, pages };
}

/** Key of a row: (project, id) — span_id for traces. */
export function keyOf(row: Record<string, unknown> | ApiRecord, project?: string): string {
  const id = row['span_id'] ?? row['id'];
  return `${String(row['project_id'] ?? project)}|${String(id)}`;
}

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** A clock tests move by hand. */
export function manualClock(start = Date.parse('2026-11-20T10:00:00.000Z')): {
  now: () => number;
  advance: (ms: number) => void;
  set: (ms: number) => void;
} {
  let current = start;
  return {
    now: () => current,
    advance: (ms) => {
      current += ms;
    },
    set: (ms) => {
      current = ms;
    },
  };
}
