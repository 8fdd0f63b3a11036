import { CursorRejectedError, DataError, FatalApiError, PaginationError, trimBody } from '../core/errors.js';
import { stringifyJson } from '../core/json.js';
import type { ApiRecord, JsonValue, ProjectScope, ResourceDefinition } from '../core/types.js';
import type { ApiClient, CallContext } from '../http/client.js';

import type { TimeWindow } from './windows.js';

export type { TimeWindow } from './windows.js';

export interface Page {
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
  query[resource.pageSizeParam ?? 'limit'] = String(resource.maxPageSize);
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
 */
export async function* paginate(client: ApiClient, req: WalkRequest, ctx: CallContext): AsyncGenerator<Page> {
  const base = walkQuery(req);
  const seen = new Set<string>();
  let cursor = req.startCursor;
  if (cursor !== undefined) seen.add(cursor);
  for (;;) {
    let body: JsonValue;
    try {
      body = await client.getJson(
        { endpoint: req.resource.path, path: req.resource.path, query: { ...base, cursor }, project: req.scope.header },
        ctx,
      );
    } catch (error) {
      if (cursor !== undefined && isCursorRefusal(error)) {
        throw new CursorRejectedError(`the server refused cursor ${trimBody(cursor, 60)}: ${error.message}`, error.status, { cause: error });
      }
      throw error;
    }
    const page = readEnvelope(body, ctx);
    yield page;
    if (!page.hasMore) return;
    if (page.nextCursor === null) {
      throw new PaginationError(`expected meta.cursor with meta.has_more = true, got cursor ${stringifyJson(page.nextCursor)}`, {
        context: ctx,
      });
    }
    if (seen.has(page.nextCursor)) {
      throw new PaginationError(
        `the server returned a cursor already followed in this walk (${trimBody(page.nextCursor, 60)}): the walk would loop; expected a new cursor or has_more = false`,
        { context: ctx },
      );
    }
    seen.add(page.nextCursor);
    cursor = page.nextCursor;
  }
}

/** Statuses a server answers a cursor it no longer knows with (expired, evicted, or from another deployment). */
const CURSOR_REFUSED_STATUSES: ReadonlySet<number> = new Set([400, 404, 410]);

/**
 * A refusal of the cursor, not of the request: asked only of requests that carried one (a 400 or
 * 404 on a first page means something else). Any other 4xx counts when its body names the cursor.
 */
function isCursorRefusal(error: unknown): error is FatalApiError {
  if (!(error instanceof FatalApiError)) return false;
  return CURSOR_REFUSED_STATUSES.has(error.status) || (error.status >= 400 && error.status < 500 && /cursor/i.test(error.message));
}

/** Validate the list envelope `{ data: [...], meta: { cursor, has_more } }`. */
export function readEnvelope(body: JsonValue, ctx: CallContext): Page {
  const fail = (what: string): never => {
    throw new DataError(`expected the list envelope {"data": [...], "meta": {"cursor", "has_more"}}, ${what}: ${trimBody(stringifyJson(body), 160)}`, {
      context: ctx,
    });
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
  if (cursor !== null && cursor !== undefined && typeof cursor !== 'string') return fail('"meta.cursor" is not a string');
  for (const record of data) {
    if (record === null || typeof record !== 'object' || Array.isArray(record)) return fail('a "data" element is not an object');
  }
  return {
    records: data as readonly ApiRecord[],
    nextCursor: typeof cursor === 'string' && cursor !== '' ? cursor : null,
    hasMore,
  };
}
