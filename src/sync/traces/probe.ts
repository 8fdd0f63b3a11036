import { FatalApiError, HttpStatusError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { Clock, JsonValue, ProjectScope, ResourceDefinition } from '../../core/types.js';
import type { ApiClient } from '../../http/client.js';
import type { StateDocument, StateStore } from '../../state/store.js';
import { streamCallContext } from '../frame.js';

/**
 * The one-time probe of a per-event resource (traces): can the server list it by time, or
 * only one event at a time? It decides on what cannot be misread, never on a message's wording:
 * - a page holding a record: by time (kept in state, with the evidence);
 * - 400 or 422 whose SDK error shape names the event parameter in `details.field`: per event
 *   (kept in state);
 * - any other 4xx (another field named, none, a 404 for the list): per event for this run only,
 *   asked again next run: the SDK documents reading per event, so that reading is exact either way;
 * - a 200 with no record: per event for this run only: an empty page does not prove the server
 *   lists by time (a server may answer an empty list to a request that lacks its required
 *   parameter), and storing "by time" would lose every span for good;
 * - anything else (a 5xx, the network): unknown; the walk then fails with its own message.
 */

/** Settings section holding what was learned about the server (once, then kept). */
const SERVER_SECTION = 'server';

interface ServerFacts {
  /** Per per-event resource: whether the server reads it only per event. */
  readonly perParent?: Readonly<
    Record<string, { readonly byParent: boolean; readonly learnedAt: string; readonly evidence: string }>
  >;
}

function serverFacts(doc: StateDocument): ServerFacts {
  return (doc.sections[SERVER_SECTION] ?? {}) as ServerFacts;
}

/** Whether the per-event resource is read per event on this server, as learned and kept in state. */
export function readsByParent(doc: StateDocument, resource: ResourceDefinition): boolean | undefined {
  return serverFacts(doc).perParent?.[resource.name]?.byParent;
}

/** What one probe answer says: the mode, and whether it is proof enough to keep. */
export interface ProbeVerdict {
  readonly byParent: boolean;
  readonly keep: boolean;
  readonly evidence: string;
}

/** Pure: the verdict of the probe's answer (`body` on a 200, `error` otherwise); `undefined` when it says nothing. */
export function probeVerdict(
  path: string,
  param: string,
  answer: { readonly body: JsonValue } | { readonly error: unknown },
): ProbeVerdict | undefined {
  if ('body' in answer) {
    const body = answer.body;
    const data =
      body !== null && typeof body === 'object' && !Array.isArray(body)
        ? (body as { readonly [k: string]: JsonValue }).data
        : undefined;
    if (Array.isArray(data) && data.length > 0)
      return { byParent: false, keep: true, evidence: `GET ${path} without ${param} answered a page with records` };
    return {
      byParent: true,
      keep: false,
      evidence: `GET ${path} without ${param} answered 200 with no record, which does not prove it lists by time`,
    };
  }
  const error = answer.error;
  // Any 4xx but 401 (a rejected key says nothing of the route: the stream then fails with it, as
  // every other stream of the run does), a refused scope included (AuthError 403): a first `*` run knows no project yet and probes
  // with no header, which a key without a `default` project answers 403. Read as "unknown", the
  // traces walked by time on a per-event server and failed on every project of that run.
  if (!(error instanceof HttpStatusError) || error.status < 400 || error.status === 401 || error.status >= 500)
    return undefined;
  if ((error.status === 400 || error.status === 422) && error instanceof FatalApiError && error.field === param) {
    return {
      byParent: true,
      keep: true,
      evidence: `GET ${path} without ${param} was refused (HTTP ${error.status} naming ${param} in details.field)`,
    };
  }
  return {
    byParent: true,
    keep: false,
    evidence: `GET ${path} without ${param} was refused (HTTP ${error.status}${!(error instanceof FatalApiError) || error.field === undefined ? '' : ` naming ${error.field}`})`,
  };
}

/**
 * Find out whether `resource` can be listed by time: ask its list for one record with no event
 * named (see above for what each answer means). A verdict with proof is kept in state and logged
 * once; one without is logged and used for this run only.
 */
export async function learnTraceMode(
  resource: ResourceDefinition,
  scope: ProjectScope,
  deps: { readonly client: ApiClient; readonly state: StateStore; readonly clock: Clock; readonly logger: Logger },
  signal: AbortSignal | undefined,
): Promise<boolean | undefined> {
  const per = resource.perParent;
  if (per === undefined) return false;
  const known = readsByParent(deps.state.document, resource);
  if (known !== undefined) return known;
  const ctx = streamCallContext(resource, scope, signal);
  const now = deps.clock.now();
  let verdict: ProbeVerdict | undefined;
  try {
    // Only the page size: a parameter the real service does not know could be refused first.
    const query: Record<string, string> = { [resource.pageSizeParam ?? 'limit']: '1' };
    const body = await deps.client.getJson(
      { endpoint: resource.path, path: resource.path, query, project: scope.header },
      ctx,
    );
    verdict = probeVerdict(resource.path, per.param, { body });
  } catch (error) {
    verdict = probeVerdict(resource.path, per.param, { error });
  }
  if (verdict === undefined) return undefined;
  const { byParent, keep, evidence } = verdict;
  const mode = byParent
    ? `reads ${resource.name} one ${per.parent} record at a time`
    : `lists ${resource.name} by time`;
  if (!keep) {
    deps.logger.info(
      { resource: resource.name },
      `${evidence}: this run ${mode}; not kept in state, asked again next run`,
    );
    return byParent;
  }
  await deps.state.updateSection<ServerFacts>(SERVER_SECTION, (facts) => ({
    ...facts,
    perParent: { ...facts?.perParent, [resource.name]: { byParent, learnedAt: new Date(now).toISOString(), evidence } },
  }));
  deps.logger.info({ resource: resource.name }, `${evidence}: this server ${mode}; kept in state`);
  return byParent;
}
