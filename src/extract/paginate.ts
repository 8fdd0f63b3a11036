import { CursorRejectedError, DataError, FatalApiError, PaginationError, trimBody } from '../core/errors.js';
import { stringifyJson } from '../core/json.js';
import type { ApiRecord, JsonValue, ProjectScope, ResourceDefinition } from '../core/types.js';
import type { ApiClient, CallContext } from '../http/client.js';

import { offsetOf, recordIdentity, type ListObservation } from './list-watch.js';
import type { TimeWindow } from './windows.js';

export interface Page {
  /** Once yielded, `paginate` reads only their count: the walk lets each go as it normalizes it (`sync/walk.ts`). */
  readonly records: readonly ApiRecord[];
  /** Cursor for the page after this one (`null` at the end). */
  readonly nextCursor: string | null;
  readonly hasMore: boolean;
}

export interface WalkRequest {
  readonly resource: ResourceDefinition;
  readonly scope: ProjectScope;
  /** Omitted for full-refresh resources. */
  readonly window?: TimeWindow;
  /** Resume from this cursor (a checkpoint) instead of the first page. */
  readonly startCursor?: string;
  /**
   * A sub-window on another field than the window's (split walks of conversations: `started_at`):
   * its parameters are sent as well; the window still cuts rows on the cursor field.
   */
  readonly partFilter?: PartFilter;
  /** Records per page to ask for: a page cap learned before (`undefined`: the resource's `maxPageSize`). */
  readonly pageSize?: number;
  /** The list's cursors were learned to be offsets: walk with an anchor from the second page on. */
  readonly offsetCursors?: boolean;
  /** Told what the answers showed of the list (a page cap, offset cursors). */
  readonly watch?: (seen: ListObservation) => void;
}

export interface PartFilter {
  readonly gte: string;
  readonly lt: string;
  readonly window: TimeWindow;
}

/** The query parameters of the first page of a walk (a later page adds `cursor`). */
export function walkQuery(req: WalkRequest): Record<string, string | undefined> {
  const { resource, scope, window } = req;
  const query: Record<string, string | undefined> = { ...resource.params };
  query[resource.pageSizeParam ?? 'limit'] = String(
    Math.min(req.pageSize ?? resource.maxPageSize, resource.maxPageSize),
  );
  if (window !== undefined && resource.filterGte !== undefined) {
    query[resource.filterGte] = new Date(window.fromMs).toISOString();
    if (resource.filterLt !== undefined) query[resource.filterLt] = new Date(window.toMs).toISOString();
  }
  if (req.partFilter !== undefined) {
    query[req.partFilter.gte] = new Date(req.partFilter.window.fromMs).toISOString();
    query[req.partFilter.lt] = new Date(req.partFilter.window.toMs).toISOString();
  }
  if (scope.projectIds !== undefined && scope.projectIds.length > 0) query.project_ids = scope.projectIds.join(',');
  return query;
}

/**
 * Walk every cursor page of one request, pulling one page at a time. Stops with a clear error when
 * the server sends the same cursor again, `has_more` without a cursor, or a body that is not the
 * documented envelope.
 *
 * What the answers show of the list is reported through `req.watch` (docs/list-semantics.md): a
 * page shorter than asked while the server says there is more is a page cap (later pages ask for
 * that many); a cursor that counts the records read so far is an offset. An offset walk asks each
 * next page from one record early and finds the last record it read there: rows that moved in
 * the meantime (a user seen again, an event removed) shift the pages, and the anchor says by how
 * much, so no row is skipped; when the anchor itself is gone the window is read again.
 */
export async function* paginate(client: ApiClient, req: WalkRequest, ctx: CallContext): AsyncGenerator<Page> {
  const base = walkQuery(req);
  const sizeParam = req.resource.pageSizeParam ?? 'limit';
  let asked = Number(base[sizeParam]);
  const seen = new Set<string>();
  let cursor = req.startCursor;
  if (cursor !== undefined) seen.add(cursor);
  let offsets = req.offsetCursors === true;
  /** Records from the walk's first page (offset detection), and the identity of the last one. */
  let read = 0;
  let anchor: string | undefined;
  /** The length of the last page shorter than asked while more was said to come. */
  let short: number | undefined;
  const fetchPage = async (at: string | undefined): Promise<Page> => {
    let body: JsonValue;
    try {
      body = await client.getJson(
        {
          endpoint: req.resource.path,
          path: req.resource.path,
          query: { ...base, cursor: at },
          project: req.scope.header,
        },
        ctx,
      );
    } catch (error) {
      if (at !== undefined && isCursorRefusal(error)) {
        throw new CursorRejectedError(`the server refused cursor ${trimBody(at, 60)}: ${error.message}`, error.status, {
          cause: error,
        });
      }
      throw error;
    }
    return readEnvelope(body, ctx);
  };
  for (;;) {
    const asking =
      offsets && anchor !== undefined && cursor !== undefined ? String(Math.max(0, Number(cursor) - 1)) : cursor;
    let page = await fetchPage(asking);
    const raw = page.records;
    if (page.hasMore && raw.length > 0 && raw.length < asked) {
      // Fewer than asked, yet more to come, twice the same: the server caps its pages (one short page
      // may be a server's own cut). Harmless with a cursor; asking for what it gives keeps every
      // later estimate (pages per window) true.
      if (short === raw.length) {
        req.watch?.({
          pageCap: raw.length,
          evidence: `pages of ${raw.length} records with has_more = true where ${asked} were asked`,
        });
        asked = raw.length;
        base[sizeParam] = String(asked);
      }
      short = raw.length;
    }
    if (asking !== cursor && anchor !== undefined) {
      page = await afterAnchor(page, anchor, Number(asking), asked, req, fetchPage);
      if (page.records.length === 0 && page.hasMore && page.nextCursor === cursor) {
        // Pages of one record: the anchor takes the whole page and the walk would not move. Follow
        // the cursor as given; a shift can then go unseen, which the run says.
        page = await fetchPage(cursor);
        req.watch?.({
          inexact: `offset cursors with pages of ${raw.length} record: rows that moved during the walk may have been skipped`,
        });
      }
    }
    if (!offsets && req.startCursor === undefined && offsetOf(page.nextCursor) === read + raw.length && page.hasMore) {
      offsets = true;
      req.watch?.({
        offsetCursor: true,
        evidence: `cursor "${page.nextCursor ?? ''}" after ${read + raw.length} records`,
      });
    }
    read += raw.length;
    const last = page.records[page.records.length - 1];
    if (last !== undefined) anchor = recordIdentity(req.resource, last);
    yield page;
    if (!page.hasMore) return;
    if (page.nextCursor === null) {
      throw new PaginationError(
        `expected meta.cursor with meta.has_more = true, got cursor ${stringifyJson(page.nextCursor)}`,
        {
          context: ctx,
        },
      );
    }
    // An offset walk may be handed an offset again after looking back for its anchor; it loops only
    // when a page brings nothing new and the offset does not move forward.
    const stuck = offsets
      ? page.records.length === 0 && (offsetOf(page.nextCursor) ?? 0) <= (offsetOf(cursor ?? null) ?? -1)
      : seen.has(page.nextCursor);
    if (stuck) {
      throw new PaginationError(
        `the server returned a cursor already followed in this walk (${trimBody(page.nextCursor, 60)}): the walk would loop; expected a new cursor or has_more = false`,
        { context: ctx },
      );
    }
    seen.add(page.nextCursor);
    cursor = page.nextCursor;
    if (offsets && offsetOf(cursor) === undefined) offsets = false; // not an offset after all: follow it as given
  }
}

/** Pages looked back for the anchor before the window is read again. */
const MAX_LOOK_BACK_PAGES = 2;

/**
 * An offset page asked from one record before the next offset: the records after the anchor (the
 * last record read). Not there, rows above it left the list: look back a page at a time for it.
 */
async function afterAnchor(
  page: Page,
  anchor: string,
  at: number,
  size: number,
  req: WalkRequest,
  fetchPage: (cursor: string | undefined) => Promise<Page>,
): Promise<Page> {
  let found = page.records.findIndex((r) => recordIdentity(req.resource, r) === anchor);
  if (found >= 0) return { ...page, records: page.records.slice(found + 1) };
  let from = at;
  for (let back = 0; back < MAX_LOOK_BACK_PAGES && from > 0; back++) {
    from = Math.max(0, from - size);
    const earlier = await fetchPage(String(from));
    found = earlier.records.findIndex((r) => recordIdentity(req.resource, r) === anchor);
    if (found >= 0) return { ...earlier, records: earlier.records.slice(found + 1) };
  }
  // The anchor itself moved (or rows moved by more than we look back): the walk cannot know what it
  // skipped. Read the window again from its first page (keyed merges make the re-read harmless).
  throw new CursorRejectedError(
    `${req.resource.path}: offset cursors, and the last record read (${trimBody(anchor.replace('\u0000', '/'), 60)}) is no longer where it was; ` +
      'rows moved during the walk, so the window is read again from its first page',
    409,
  );
}

/** Statuses a server answers a cursor it no longer knows with (expired, evicted, or from another deployment). */
const CURSOR_REFUSED_STATUSES: ReadonlySet<number> = new Set([400, 404, 410]);

/**
 * A refusal of the cursor, not of the request: asked only of requests that carried one (a 400 or
 * 404 on a first page means something else). Any other 4xx counts when its body names the cursor.
 */
function isCursorRefusal(error: unknown): error is FatalApiError {
  if (!(error instanceof FatalApiError)) return false;
  return (
    CURSOR_REFUSED_STATUSES.has(error.status) ||
    (error.status >= 400 && error.status < 500 && /cursor/i.test(error.message))
  );
}

/** Validate the list envelope `{ data: [...], meta: { cursor, has_more } }`. */
export function readEnvelope(body: JsonValue, ctx: CallContext): Page {
  const fail = (what: string): never => {
    throw new DataError(
      `expected the list envelope {"data": [...], "meta": {"cursor", "has_more"}}, ${what}: ${trimBody(stringifyJson(body), 160)}`,
      {
        context: ctx,
      },
    );
  };
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return fail('got a non-object body');
  const obj = body as { readonly [k: string]: JsonValue };
  const data = obj.data;
  if (!Array.isArray(data)) return fail('"data" is not an array');
  const meta = obj.meta;
  if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) return fail('"meta" is missing');
  const m = meta as { readonly [k: string]: JsonValue };
  const hasMore = m.has_more;
  if (typeof hasMore !== 'boolean') return fail('"meta.has_more" is not a boolean');
  const cursor = m.cursor;
  if (cursor !== null && cursor !== undefined && typeof cursor !== 'string')
    return fail('"meta.cursor" is not a string');
  for (const record of data) {
    if (record === null || typeof record !== 'object' || Array.isArray(record))
      return fail('a "data" element is not an object');
  }
  return {
    records: data as readonly ApiRecord[],
    nextCursor: typeof cursor === 'string' && cursor !== '' ? cursor : null,
    hasMore,
  };
}
