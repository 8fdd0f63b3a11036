import { DataError, trimBody } from '../core/errors.js';
import { stringifyJson } from '../core/json.js';
import type { JsonValue, ProjectScope, ResourceDefinition } from '../core/types.js';
import type { CallContext } from '../http/client.js';
import type { TimeWindow } from './windows.js';
import type { JsonReader } from './memo.js';

/**
 * Records of `resource` in one window and project scope, from its count endpoint
 * (`/v1/events/count` answers `{ "data": { "total": N } }`, field notes). Unfiltered on purpose:
 * counts filtered by signal under-count (field notes). One request, through the run's scheduler.
 */
export async function countRecords(
  client: JsonReader,
  resource: ResourceDefinition,
  scope: ProjectScope,
  window: TimeWindow,
  ctx: CallContext,
): Promise<number> {
  const path = resource.countPath;
  if (path === undefined) throw new Error(`resource ${resource.name} declares no countPath`);
  const query: Record<string, string | undefined> = {};
  if (resource.filterGte !== undefined) query[resource.filterGte] = new Date(window.fromMs).toISOString();
  if (resource.filterLt !== undefined) query[resource.filterLt] = new Date(window.toMs).toISOString();
  if (scope.projectIds !== undefined && scope.projectIds.length > 0) query.project_ids = scope.projectIds.join(',');
  const body = await client.getJson({ endpoint: path, path, query, project: scope.header }, ctx);
  return readTotal(body, path, ctx);
}

/** `{ "data": { "total": N } }` → N. */
export function readTotal(body: JsonValue, path: string, ctx: CallContext): number {
  const data =
    body !== null && typeof body === 'object' && !Array.isArray(body)
      ? (body as { readonly [k: string]: JsonValue }).data
      : undefined;
  const total =
    data !== null && typeof data === 'object' && !Array.isArray(data)
      ? (data as { readonly [k: string]: JsonValue }).total
      : undefined;
  if (
    (typeof total === 'number' && Number.isInteger(total) && total >= 0) ||
    (typeof total === 'bigint' && total >= 0n)
  ) {
    return Number(total);
  }
  throw new DataError(
    `expected {"data": {"total": <count>}} from GET ${path}, got: ${trimBody(stringifyJson(body), 160)}`,
    { context: ctx },
  );
}
