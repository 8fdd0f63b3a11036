/**
 * List behaviours a server may have that the SDK and the spec allow and our default emulator does
 * not show: the servers we have not met. Each is off by default; tests and `query-sync emulate
 * --list-quirks` turn them on, so every assumption the sync makes about lists has a server that
 * breaks it (docs/list-semantics.md).
 *
 * They act on the request's parameters and the handler's answer only, so the handlers stay as
 * they are: an offset-cursor or re-ordered list is served by reading the whole list through the
 * handler's own keyset pages and slicing it.
 */

import { badRequest } from './params.js';
import type { JsonValue } from './types.js';

export interface ListQuirks {
  /** `/v1/conversations` lists newest `started_at` first, whatever `order_by` says (cursors are offsets). */
  readonly conversationsByStartedAt?: boolean;
  /** `order_by` is ignored on every list (each list's own default order applies). */
  readonly ignoreOrderBy?: boolean;
  /**
   * Every page (lists and an event's spans) holds at most this many records, whatever `limit`
   * asks; lists still say `has_more` with a cursor, an event's spans are simply cut.
   */
  readonly pageCap?: number;
  /** List cursors are offsets (`"100"`): rows that move or arrive during a walk shift the pages. */
  readonly offsetCursors?: boolean;
  /** `project_ids` is ignored: `*` reads every project. */
  readonly ignoreProjectIds?: boolean;
  /** Half the events have an ISO instant as `user_input`, the other half as `assistant_output`. */
  readonly instantTexts?: boolean;
}

/** The names `--list-quirks` takes, comma-separated (`page-cap=N` takes a number). */
const LIST_QUIRK_NAMES = [
  'conversations-by-started-at',
  'ignore-order-by',
  'page-cap=N',
  'offset-cursors',
  'ignore-project-ids',
  'instant-texts',
] as const;

/** Parse `--list-quirks` (e.g. `page-cap=50,offset-cursors`). */
export function parseListQuirks(text: string): ListQuirks {
  const quirks: { -readonly [K in keyof ListQuirks]: ListQuirks[K] } = {};
  for (const raw of text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')) {
    const [name, value] = raw.split('=', 2) as [string, string | undefined];
    if (name === 'page-cap' && value !== undefined && /^[1-9]\d*$/.test(value)) quirks.pageCap = Number(value);
    else if (name === 'conversations-by-started-at') quirks.conversationsByStartedAt = true;
    else if (name === 'ignore-order-by') quirks.ignoreOrderBy = true;
    else if (name === 'offset-cursors') quirks.offsetCursors = true;
    else if (name === 'ignore-project-ids') quirks.ignoreProjectIds = true;
    else if (name === 'instant-texts') quirks.instantTexts = true;
    else throw new Error(`--list-quirks: unknown quirk "${raw}"; expected some of ${LIST_QUIRK_NAMES.join(', ')}`);
  }
  return quirks;
}

/** Lists with cursors (the per-event spans answer has no `meta`). */
const CURSOR_LISTS: ReadonlySet<string> = new Set([
  '/v1/events',
  '/v1/traces',
  '/v1/signals',
  '/v1/signal-groups',
  '/v1/users',
  '/v1/conversations',
]);
/** The handlers' own page maximum (event-handlers.ts `MAX_PAGE_SIZE`): the inner reads ask for it. */
const INNER_PAGE = 100;
/** The handlers' default page size when `limit` is absent. */
const DEFAULT_PAGE = 25;

/** The answer to one request with `quirks` applied around `handle` (the route's handler with these parameters). */
export function withListQuirks(
  quirks: ListQuirks,
  template: string,
  params: URLSearchParams,
  handle: (params: URLSearchParams) => JsonValue,
): JsonValue {
  const p = new URLSearchParams(params);
  if (quirks.ignoreOrderBy === true) p.delete('order_by');
  const reorder = quirks.conversationsByStartedAt === true && template === '/v1/conversations';
  const paged = CURSOR_LISTS.has(template) && !(template === '/v1/traces' && p.has('event_id'));
  if (paged && (reorder || quirks.offsetCursors === true)) return offsetPage(quirks, p, reorder, handle);
  const cap = quirks.pageCap;
  if (cap !== undefined && p.has('limit') && Number(p.get('limit')) > cap) p.set('limit', String(cap));
  return handle(p);
}

/** One page of the whole list (read through the handler's keyset pages), by offset. */
function offsetPage(
  quirks: ListQuirks,
  params: URLSearchParams,
  byStartedAt: boolean,
  handle: (params: URLSearchParams) => JsonValue,
): JsonValue {
  const offset = readOffset(params.get('cursor'), quirks.offsetCursors === true);
  const asked = Number(params.get('limit') ?? DEFAULT_PAGE);
  const limit = Math.min(
    Number.isInteger(asked) && asked > 0 ? asked : DEFAULT_PAGE,
    INNER_PAGE,
    quirks.pageCap ?? Number.POSITIVE_INFINITY,
  );
  const all: JsonValue[] = [];
  const inner = new URLSearchParams(params);
  inner.delete('cursor');
  inner.set('limit', String(INNER_PAGE));
  for (;;) {
    const body = handle(inner) as {
      readonly data: readonly JsonValue[];
      readonly meta: { readonly cursor: string | null; readonly has_more: boolean };
    };
    all.push(...body.data);
    if (!body.meta.has_more || body.meta.cursor === null) break;
    inner.set('cursor', body.meta.cursor);
  }
  if (byStartedAt) {
    const started = (r: JsonValue): string => String((r as { readonly started_at?: JsonValue }).started_at ?? '');
    all.sort((a, b) => (started(a) < started(b) ? 1 : started(a) > started(b) ? -1 : 0));
  }
  const data = all.slice(offset, offset + limit);
  const hasMore = offset + limit < all.length;
  return {
    data,
    meta: { cursor: hasMore ? writeOffset(offset + limit, quirks.offsetCursors === true) : null, has_more: hasMore },
  };
}

/**
 * Offset cursors are plain numbers (`"100"`), as such servers send them; a re-ordered list on its
 * own keeps cursors opaque (base64url of the offset), so the two variants stay apart.
 */
function writeOffset(offset: number, plain: boolean): string {
  return plain ? String(offset) : Buffer.from(`offset:${offset}`, 'utf8').toString('base64url');
}

function readOffset(cursor: string | null, plain: boolean): number {
  if (cursor === null) return 0;
  const text = plain
    ? cursor
    : Buffer.from(cursor, 'base64url')
        .toString('utf8')
        .replace(/^offset:/, '');
  if (!/^\d+$/.test(text))
    throw badRequest(`cursor is not one this list handed out: "${cursor.slice(0, 40)}"`, 'cursor');
  return Number(text);
}
