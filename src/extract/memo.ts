import type { JsonValue } from '../core/types.js';
import type { ApiClient, ApiRequest, CallContext } from '../http/client.js';

/** What an aggregate read (a count, a timeseries) asks with: the client, or a run's memo in front of it. */
export type JsonReader = Pick<ApiClient, 'getJson'>;

/**
 * Identical aggregate requests of one run are sent once. Split planning asks the same
 * `/v1/events/timeseries` question for events, users and conversations (their sub-windows are all
 * placed by events over time), three requests for one answer on a rate-limited API. The answer of
 * the first (or the request in flight) is shared for the rest of the run; a failure is not kept,
 * so the next caller asks again. Lists are never memoized: their pages are read once anyway.
 *
 * One memo per run, made by the run (`runSync`) and handed to its streams in their deps: a process
 * that runs sync every 15 minutes asks again each time, as each run makes its own.
 */
export class RequestMemo implements JsonReader {
  private readonly answers = new Map<string, Promise<JsonValue>>();

  constructor(private readonly client: JsonReader) {}

  /** `client.getJson`, answered from this memo when the same request (path, query, project) was made. */
  getJson(req: ApiRequest, ctx: CallContext): Promise<JsonValue> {
    const query = Object.entries(req.query)
      .filter((e): e is [string, string] => e[1] !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const key = JSON.stringify([req.path, req.project ?? null, query]);
    const known = this.answers.get(key);
    if (known !== undefined) return known;
    const answer = this.client.getJson(req, ctx);
    this.answers.set(key, answer);
    answer.catch(() => {
      if (this.answers.get(key) === answer) this.answers.delete(key);
    });
    return answer;
  }
}
