/**
 * The project header → which projects a request reads. Source: spec, "Project scope", and field
 * notes for which endpoints accept `*`.
 */

import { ApiError } from './params.js';

const SLUG = /^[a-z0-9][a-z0-9_-]{0,62}$/;
/** Read when the header is absent: the organization's Production project. */
const DEFAULT_PROJECT = 'default';
const ALL_PROJECTS = '*';

export interface ProjectScope {
  readonly projects: readonly string[];
  /** The all-projects view: rows carry `project_id`. */
  readonly all: boolean;
}

export interface ScopeRules {
  readonly headerName: string;
  readonly active: readonly string[];
  readonly archived: ReadonlySet<string>;
}

export function isSlug(value: string): boolean {
  return SLUG.test(value);
}

export function resolveScope(
  header: string | undefined,
  projectIds: string | null,
  endpointAcceptsAll: boolean,
  rules: ScopeRules,
): ProjectScope {
  if (header === undefined) return { projects: [checkSlug(DEFAULT_PROJECT, rules)], all: false };
  if (header === ALL_PROJECTS) {
    if (!endpointAcceptsAll) {
      throw new ApiError(
        400,
        'all_projects_not_supported',
        `This endpoint does not support the all-projects scope ("${rules.headerName}: *"); send one project slug`,
        { field: rules.headerName },
      );
    }
    if (projectIds === null || projectIds.trim() === '') return { projects: [...rules.active], all: true };
    const listed = [
      ...new Set(
        projectIds
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s !== ''),
      ),
    ];
    if (listed.length === 0) return { projects: [...rules.active], all: true };
    return { projects: listed.map((slug) => checkSlug(slug, rules, 'project_ids')), all: true };
  }
  return { projects: [checkSlug(header, rules)], all: false };
}

function checkSlug(slug: string, rules: ScopeRules, source?: string): string {
  const where = source ?? rules.headerName;
  if (!isSlug(slug)) {
    throw new ApiError(400, 'invalid_project', `Malformed project slug in ${where}: "${slug.slice(0, 80)}"`, {
      field: where,
    });
  }
  if (rules.active.includes(slug)) return slug;
  if (rules.archived.has(slug)) {
    throw new ApiError(403, 'project_archived', `Project "${slug}" (${where}) is archived`);
  }
  throw new ApiError(
    403,
    'project_not_found',
    `Project "${slug}" (${where}) does not exist or is not accessible with this key`,
  );
}
