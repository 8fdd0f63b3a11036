import { FatalApiError } from '../core/errors.js';
import type { ProjectScope, ResourceDefinition } from '../core/types.js';
import { newCallStats, type ApiClient, type CallContext } from '../http/client.js';
import { absenceIn, routeCapability, type Capabilities } from './capabilities.js';
import type { StreamResult } from './frame.js';

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
    const ctx: CallContext = {
      resource: resource.name,
      project: scope.key,
      lane: `${resource.name}|${scope.key}|probe`,
      stats,
      signal,
    };
    try {
      await client.getJson(
        {
          endpoint: resource.path,
          path: resource.path,
          query: { [resource.pageSizeParam ?? 'limit']: '1' },
          project: scope.header,
        },
        ctx,
      );
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

/**
 * A stream of the analyst features that reads one optional route (facets, search, the timeseries
 * of `event_counts` at one interval): skipped while the route or the value is known absent, and
 * reported skipped (not failed) when its answer proves it absent: a 404 or 405 on the route; with
 * `value`, a 400 naming its parameter (the interval), or an answer in another shape. Search's 400s
 * are not proof (a saved search's own definition may be what is refused): only 404/405 count.
 */
export async function optionalRoute(
  route: string,
  value: { readonly name: string; readonly param: string } | undefined,
  caps: Capabilities,
  base: { readonly resource: string; readonly scope: string },
  run: () => Promise<StreamResult>,
): Promise<StreamResult> {
  const skipped = (what: string, evidence: string, from?: StreamResult): StreamResult => ({
    resource: base.resource,
    scope: base.scope,
    outcome: 'ok',
    rows: 0,
    pages: from?.pages ?? 0,
    windows: 0,
    seconds: from?.seconds ?? 0,
    stats: from?.stats ?? newCallStats(),
    lacking: `this server does not offer ${what} (${evidence})`,
  });
  for (const name of [route, ...(value === undefined ? [] : [value.name])]) {
    if (!caps.usable(name)) return skipped(name, caps.fact(name)?.evidence ?? 'learned earlier');
  }
  const result = await run();
  if (result.outcome !== 'failed') {
    if (result.outcome === 'ok') {
      await caps.offered(route, 'answered');
      if (value !== undefined) await caps.offered(value.name, 'answered');
    }
    return result;
  }
  const routeGone = routeAbsence(result.error);
  if (routeGone !== undefined) {
    await caps.absent(route, routeGone);
    return skipped(route, routeGone, result);
  }
  if (value === undefined) return result;
  const absence = absenceIn(result.error, value.param);
  if (absence === undefined) return result;
  const name = absence.what === 'value' ? value.name : route;
  await caps.absent(name, absence.evidence);
  return skipped(name, absence.evidence, result);
}
