import type { IncomingMessage, ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { events } from '../../../connectors/events.js';
import { users } from '../../../connectors/users.js';
import { systemClock } from '../../../src/core/clock.js';
import { CursorRejectedError, DataError, FatalApiError, PaginationError } from '../../../src/core/errors.js';
import { silentLogger } from '../../../src/core/log.js';
import { paginate, walkQuery, type Page, type WalkRequest } from '../../../src/extract/paginate.js';
import { DEFAULT_RATE_LIMITS } from '../../../src/http/scheduler/budget.js';
import { ApiClient, newCallStats, type CallContext } from '../../../src/http/client.js';
import { createScheduler } from '../../../src/http/scheduler/scheduler.js';
import { allProjectsScope, singleProjectScope } from '../../../src/sync/scopes.js';
import { json, startServer } from '../../fakes/bad-server.js';
import { onCleanup } from '../../fakes/lifecycle.js';

/** The cursor loop of `src/extract/paginate.ts` against a real HTTP server on loopback, through the real client. */

const FROM = Date.parse('2026-11-20T00:00:00Z');
const TO = Date.parse('2026-11-20T01:00:00Z');

interface Seen {
  readonly query: Record<string, string>;
  readonly project: string | undefined;
}

/** Serve /v1/events and /v1/users with `answer(cursor)`; record every request's query and project header. */
async function server(answer: (cursor: string | null, res: ServerResponse) => void) {
  const seen: Seen[] = [];
  const handler = (req: IncomingMessage, url: URL, res: ServerResponse): void => {
    seen.push({
      query: Object.fromEntries(url.searchParams),
      project: req.headers['x-service-project-id'] as string | undefined,
    });
    answer(url.searchParams.get('cursor'), res);
  };
  const srv = await startServer({ '/v1/events': handler, '/v1/users': handler });
  onCleanup(() => srv.close());
  const client = new ApiClient({
    baseUrl: srv.url,
    apiKey: 'test-key',
    projectHeader: 'X-Service-Project-Id',
    budget: createScheduler({ limits: { ...DEFAULT_RATE_LIMITS, maxRpm: 100_000, maxRps: 100_000 } }),
    clock: systemClock,
    logger: silentLogger(),
    retry: { maxAttempts: 1 },
  });
  onCleanup(() => client.close());
  return { seen, client };
}

const ctx = (): CallContext => ({ lane: 'test', stats: newCallStats(), resource: 'events' });

const page = (ids: readonly string[], cursor: string | null, hasMore: boolean) => ({
  data: ids.map((id) => ({ id, timestamp: '2026-11-20T00:30:00Z' })),
  meta: { cursor, has_more: hasMore },
});

async function collect(pages: AsyncGenerator<Page>): Promise<{ ids: string[]; error?: unknown }> {
  const ids: string[] = [];
  try {
    for await (const p of pages) ids.push(...p.records.map((r) => String(r.id)));
  } catch (error) {
    return { ids, error };
  }
  return { ids };
}

const eventsWalk = (extra: Partial<WalkRequest> = {}): WalkRequest => ({
  resource: events,
  scope: singleProjectScope('alpha'),
  window: { fromMs: FROM, toMs: TO },
  ...extra,
});

describe('walkQuery: the first page', () => {
  it('sends the resource params, the page size, the window as [gte, lt) and a narrowed "*" as project_ids', () => {
    expect(walkQuery(eventsWalk())).toEqual({
      order_by: '-timestamp',
      limit: '100',
      'timestamp[gte]': '2026-11-20T00:00:00.000Z',
      'timestamp[lt]': '2026-11-20T01:00:00.000Z',
    });
    expect(walkQuery({ resource: events, scope: allProjectsScope(['b', 'a']) })).toEqual({
      order_by: '-timestamp',
      limit: '100',
      project_ids: 'a,b',
    });
    const q = walkQuery({ resource: users, scope: singleProjectScope(undefined) });
    expect(q).not.toHaveProperty('project_ids');
    expect(q).not.toHaveProperty('cursor');
  });
});

describe('paginate: every page of one walk', () => {
  it('follows meta.cursor until has_more is false, with the same query and project header on every page', async () => {
    const pages: Record<string, ReturnType<typeof page>> = {
      '': page(['a', 'b'], 'c1', true),
      c1: page(['c'], 'c2', true),
      c2: page(['d'], null, false),
    };
    const { seen, client } = await server((cursor, res) => json(res, 200, pages[cursor ?? '']));
    const { ids, error } = await collect(paginate(client, eventsWalk(), ctx()));
    expect(error).toBeUndefined();
    expect(ids).toEqual(['a', 'b', 'c', 'd']);
    expect(seen.map((s) => s.query.cursor)).toEqual([undefined, 'c1', 'c2']);
    const { cursor: _c, ...rest } = seen[1]?.query ?? {};
    expect(rest).toEqual(walkQuery(eventsWalk()));
    expect(seen.every((s) => s.project === 'alpha')).toBe(true);
  });

  it('pulls one page at a time: no request for the next page until the caller asks for it', async () => {
    const { seen, client } = await server((cursor, res) =>
      json(res, 200, cursor === null ? page(['a'], 'c1', true) : page(['b'], null, false)),
    );
    const walk = paginate(client, eventsWalk(), ctx());
    const first = await walk.next();
    expect(first.done).toBe(false);
    expect(seen).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 20));
    expect(seen).toHaveLength(1);
    await walk.return(undefined);
    expect(seen).toHaveLength(1);
  });

  it('resumes from a checkpointed cursor, and treats the server handing it back as a loop', async () => {
    const { seen, client } = await server((cursor, res) =>
      json(res, 200, cursor === 'saved' ? page(['x'], 'next', true) : page(['y'], 'saved', true)),
    );
    const { ids, error } = await collect(paginate(client, eventsWalk({ startCursor: 'saved' }), ctx()));
    expect(seen.map((s) => s.query.cursor)).toEqual(['saved', 'next']);
    expect(ids).toEqual(['x', 'y']); // the pages read are yielded before the loop is found
    expect(error).toBeInstanceOf(PaginationError);
    expect((error as Error).message).toMatch(/a cursor already followed in this walk \(saved\): the walk would loop/);
  });

  it('stops on a cursor seen twice in one walk', async () => {
    const { client } = await server((cursor, res) =>
      json(res, 200, page([cursor ?? 'first'], cursor === null ? 'c1' : cursor === 'c1' ? 'c2' : 'c1', true)),
    );
    const { ids, error } = await collect(paginate(client, eventsWalk(), ctx()));
    expect(ids).toEqual(['first', 'c1', 'c2']);
    expect(error).toBeInstanceOf(PaginationError);
    expect((error as Error).message).toContain('(c1)');
  });

  it('stops on has_more without a cursor (null or empty)', async () => {
    for (const cursor of [null, '']) {
      const { client } = await server((_c, res) => json(res, 200, page(['a'], cursor, true)));
      const { ids, error } = await collect(paginate(client, eventsWalk(), ctx()));
      expect(ids).toEqual(['a']);
      expect(error).toBeInstanceOf(PaginationError);
      expect((error as Error).message).toMatch(/expected meta\.cursor with meta\.has_more = true, got cursor null/);
    }
  });

  it('refuses a body that is not the list envelope, quoting it', async () => {
    const { client } = await server((_c, res) => json(res, 200, { items: [] }));
    const { error } = await collect(paginate(client, eventsWalk(), ctx()));
    expect(error).toBeInstanceOf(DataError);
    expect((error as Error).message).toMatch(/"data" is not an array: \{"items":\[\]\}/);
  });

  it('a 400, 404 or 410 on a page with a cursor is a refused cursor; on the first page it stays the API error it is', async () => {
    for (const status of [400, 404, 410]) {
      const { client } = await server((cursor, res) =>
        cursor === null
          ? json(res, 200, page(['a'], 'old', true))
          : json(res, status, { error: { code: 'bad_request', message: 'gone' } }),
      );
      const { ids, error } = await collect(paginate(client, eventsWalk(), ctx()));
      expect(ids).toEqual(['a']);
      expect(error, String(status)).toBeInstanceOf(CursorRejectedError);
      expect((error as CursorRejectedError).status).toBe(status);
      expect((error as Error).message).toMatch(/^the server refused cursor old: /);
    }
    const { client } = await server((_c, res) =>
      json(res, 400, { error: { code: 'bad_request', message: 'unknown field' } }),
    );
    const { error } = await collect(paginate(client, eventsWalk(), ctx()));
    expect(error).toBeInstanceOf(FatalApiError);
    expect(error).not.toBeInstanceOf(CursorRejectedError);
  });

  it('another 4xx on a page with a cursor is a refused cursor only when its body speaks of the cursor', async () => {
    const answer = (message: string) => (cursor: string | null, res: ServerResponse) =>
      cursor === null
        ? json(res, 200, page(['a'], 'c1', true))
        : json(res, 422, { error: { code: 'invalid', message } });
    const named = await server(answer('Cursor expired'));
    expect((await collect(paginate(named.client, eventsWalk(), ctx()))).error).toBeInstanceOf(CursorRejectedError);
    const other = await server(answer('limit too large'));
    const { error } = await collect(paginate(other.client, eventsWalk(), ctx()));
    expect(error).toBeInstanceOf(FatalApiError);
    expect(error).not.toBeInstanceOf(CursorRejectedError);
  });
});
