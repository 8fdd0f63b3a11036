import type { JsonValue } from '../core/types.js';
import type { ApiClient, ApiRequest, CallContext } from '../http/client.js';

/**
 * Identical aggregate requests of one run are sent once. Split planning asks the same
 * `/v1/events/timeseries` question for events, users and conversations (their sub-windows are all
 * placed by events over time), three requests for one answer on a rate-limited API. The answer of
 * the first (or the request in flight) is shared for the rest of the run; a failure is not kept,
 * so the next caller asks again. Lists are never memoized: their pages are read once anyway.
 *
 * One memo per run, begun and ended by the run (`runSync`), never a module-wide cache: a process
 * that runs sync every 15 minutes must ask again each time.
 */
const memos = new WeakMap<ApiClient, Map<string, Promise<JsonValue>>>();

/** Start memoizing `client`'s aggregate requests for one run; the returned function ends it. */
export function beginRequestMemo(client: ApiClient): () => void {
  const memo = new Map<string, Promise<JsonValue>>();
  memos.set(client, memo);
  return () => {
    if (memos.get(client) === memo) memos.delete(client);
  };
}

/** `client.getJson`, answered from the run's memo when the same request (path, query, project) was made. */
export function memoGetJson(client: ApiClient, req: ApiRequest, ctx: CallContext): Promise<JsonValue> {
  const memo = memos.get(client);
  if (memo === undefined) return client.getJson(req, ctx);
  const query = Object.entries(req.query)
    .filter((e): e is [string, string] => e[1] !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const key = JSON.stringify([req.path, req.project ?? null, query]);
  const known = memo.get(key);
  if (known !== undefined) return known;
  const answer = client.getJson(req, ctx);
  memo.set(key, answer);
  answer.catch(() => {
    if (memo.get(key) === answer) memo.delete(key);
  });
  return answer;
}
