import { FatalApiError } from '../core/errors.js';
import type { ProjectScope, ResourceDefinition } from '../core/types.js';
import { newCallStats, type ApiClient, type CallContext } from '../http/client.js';
import { routeCapability, type Capabilities } from './capabilities.js';
import type { StreamResult } from './stream.js';

/**
 * A resource not every server has (`optional`, signal groups): skipped while the server is known to
 * lack its route, probed with one record where that is not known (unknown, or absent a day ago), and
 * walked where it is offered. A walk of a route known offered that now answers 404/405 is the
 * capability disappearing: learned (logged once, with what changed) and the stream reported skipped,
 * not failed. Only a 404 or 405 proves the route absent; anything else fails as any walk does.
 */
export async function optionalWalk(
  resource: ResourceDefinition,
  scope: ProjectScope,
  caps: Capabilities,
  client: ApiClient,
  signal: AbortSignal | undefined,
  walk: () => Promise<StreamResult>,
): Promise<StreamResult> {
  const route = routeCapability(resource.path);
  const stats = newCallStats();
  const skipped = (evidence: string, from?: StreamResult): StreamResult => ({
    resource: resource.name,
    scope: scope.key,
    outcome: 'ok',
    rows: from?.rows ?? 0,
    pages: from?.pages ?? 0,
    windows: 0,
    seconds: from?.seconds ?? 0,
    stats: from?.stats ?? stats,
    lacking: `this server does not offer ${route} (${evidence})`,
  });
  if (!caps.usable(route)) return skipped(caps.fact(route)?.evidence ?? 'learned earlier');
  if (caps.fact(route)?.offered !== true) {
    const ctx: CallContext = { resource: resource.name, project: scope.key, lane: `${resource.name}|${scope.key}|probe`, stats, signal };
    try {
      await client.getJson({ endpoint: resource.path, path: resource.path, query: { [resource.pageSizeParam ?? 'limit']: '1' }, project: scope.header }, ctx);
      await caps.offered(route, `GET ${resource.path} answered a page`);
    } catch (error) {
      const evidence = routeAbsence(error);
      if (evidence !== undefined) {
        await caps.absent(route, evidence);
        return skipped(evidence);
      }
      // No proof (a 5xx, a refused project, …): the walk meets the same answer and says it its own way.
    }
  }
  const result = await walk();
  const evidence = result.outcome === 'failed' ? routeAbsence(result.error) : undefined;
  if (evidence === undefined) return result;
  await caps.absent(route, evidence);
  return skipped(evidence, result);
}

function routeAbsence(error: unknown): string | undefined {
  if (!(error instanceof FatalApiError) || (error.status !== 404 && error.status !== 405)) return undefined;
  return `HTTP ${error.status}: ${error.message.split('\n')[0]?.slice(0, 200) ?? ''}`;
}
