/**
 * What a handler receives (a resolved project scope and the parameters) and the list envelope every
 * list handler answers with.
 */

import type { ApiRecord, JsonValue } from './types.js';
import { ApiError } from './params.js';
import { encodeCursor } from './cursor.js';
import type { Store, ProjectData } from './store.js';
import type { Direction, Entry, Page } from './sorted-list.js';
import type { ServerVariant } from './variants.js';

/**
 * `spec`: the specification's service (`X-Service-Project-Id`, traces also listed by time,
 * `timestamp[...]` windows on users and conversations). `real`: the service the vendor's SDK
 * describes (`X-Raindrop-Project-Id`, traces by `event_id` only, late enrichment).
 */
export type Flavor = 'spec' | 'real';

export interface RequestContext {
  readonly store: Store;
  readonly flavor: Flavor;
  /** Clock reading for this request (ms). */
  readonly now: number;
  /** The configured default order of every list. */
  readonly order: Direction;
  /** Projects read: one, or several for the all-projects scope (`*`). */
  readonly projects: readonly ProjectData[];
  /** All-projects scope: every row carries `project_id`. */
  readonly allProjects: boolean;
  readonly params: URLSearchParams;
  /** The decoded `{id}` path segment, for single-record gets. */
  readonly id: string | undefined;
  /** Events in this window are counted but never listed (`EmulatorOptions.unlistedEvents`). */
  readonly unlistedEvents?: { readonly fromMs: number; readonly toMs: number } | undefined;
  /** Which optional behaviours this server differs in (`variants.ts`); absent: none. */
  readonly variant?: ServerVariant;
}

/** A handler returns the 200 body, or throws an `ApiError`. */
export type Handler = (context: RequestContext) => JsonValue;

function withProject(context: RequestContext, record: ApiRecord, project: string): ApiRecord {
  return context.allProjects ? { ...record, project_id: project } : record;
}

/** `{"data":[...],"meta":{"cursor","has_more"}}`; the cursor is the last row's keyset position. */
export function listBody<E extends Entry>(
  context: RequestContext,
  resource: string,
  direction: Direction,
  page: Page<E>,
  toRecord: (entry: E) => ApiRecord,
): JsonValue {
  const data = page.items.map((entry) => withProject(context, toRecord(entry), entry.project));
  const last = page.items[page.items.length - 1];
  const cursor =
    page.hasMore && last
      ? encodeCursor({ resource, direction, position: { sortKey: last.sortKey, id: last.id, project: last.project } })
      : null;
  return { data, meta: { cursor, has_more: page.hasMore } };
}

/** The single project of a request that does not accept the all-projects scope. */
export function singleProject(context: RequestContext): ProjectData {
  const project = context.projects[0];
  if (!project || context.projects.length !== 1) throw new Error('handler expects exactly one project');
  return project;
}

/** All of a list's filters as one predicate (none: no predicate, every row passes). */
export function allOf<E>(checks: readonly ((entry: E) => boolean)[]): ((entry: E) => boolean) | undefined {
  if (checks.length === 0) return undefined;
  if (checks.length === 1) return checks[0];
  return (entry) => checks.every((check) => check(entry));
}

/** A single-record get (`/v1/users/{id}`): the record of the request's project, or 404 naming `noun`. */
export function getById<E>(
  context: RequestContext,
  byId: (project: ProjectData) => ReadonlyMap<string, E>,
  noun: string,
  toRecord: (entry: E) => ApiRecord,
): JsonValue {
  const id = context.id ?? '';
  const entry = byId(singleProject(context)).get(id);
  if (entry === undefined) throw new ApiError(404, 'not_found', `No ${noun} with id "${id}" in this project`);
  return { data: toRecord(entry) };
}
