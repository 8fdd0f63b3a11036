import { ConfigError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { ProjectScope, ResourceDefinition } from '../core/types.js';
import type { StateStore } from '../state/store.js';

/**
 * Which project scopes each resource is read in, shared by `sync` and `backfill` (and, without
 * discovery, by `plan`, `verify` and `status`).
 *
 * With `*`, endpoints that accept it get one all-projects walk; the others (declared, or found out
 * by a 400 at run time) get one walk per project: the `--project-ids` list, else the projects in
 * state plus any that this run's all-projects reads discover, started as they are discovered.
 */

export function singleProjectScope(slug: string | undefined): ProjectScope {
  return { key: slug ?? 'default', header: slug, fallbackProjectId: slug ?? 'default' };
}

export function allProjectsScope(projectIds: readonly string[] | undefined): ProjectScope {
  const ids = projectIds && projectIds.length > 0 ? [...projectIds].sort() : undefined;
  return { key: ids ? `*[${ids.join(',')}]` : '*', header: '*', projectIds: ids, fallbackProjectId: undefined };
}

export interface ScopeOptions {
  readonly resources: readonly ResourceDefinition[];
  /** A slug, `*` for all projects, or `undefined` (no header: the service reads `default`). */
  readonly project: string | undefined;
  /** Narrows `*`; also the project list for endpoints that reject `*`. */
  readonly projectIds?: readonly string[];
}

export interface ScopeDeps {
  readonly state: Pick<StateStore, 'document' | 'addProjects'>;
  readonly logger: Logger;
}

/** What a walk of one (resource, scope) reports; `scope-rejected` means "refused `*` with 400, nothing read". */
export interface ScopedResult {
  readonly outcome: string;
}

export interface ScopeHooks {
  /** Pass to all-projects walks: slugs seen in their rows start per-project walks. */
  readonly onProjects?: (slugs: ReadonlySet<string>) => void;
}

/**
 * Run `walk` for every resource × project scope, concurrently, and wait for all of them, including
 * the per-project walks started by discovery. `noProjects` makes the result of a per-project
 * resource for which no project slug became known. Results of `*` walks refused with 400 are
 * dropped (their per-project walks replace them).
 */
export async function forEachScope<R extends ScopedResult>(
  options: ScopeOptions,
  deps: ScopeDeps,
  walk: (resource: ResourceDefinition, scope: ProjectScope, hooks: ScopeHooks) => Promise<R>,
  noProjects: (resource: ResourceDefinition, error: ConfigError) => R,
): Promise<R[]> {
  const pending: Promise<R>[] = [];

  if (options.project !== '*') {
    for (const resource of options.resources) pending.push(walk(resource, singleProjectScope(options.project), {}));
    return Promise.all(pending);
  }

  const perProject = new Set(options.resources.filter((r) => !r.allProjects));
  const started = new Set<string>();
  const projects = new Set<string>(options.projectIds ?? deps.state.document.projects);
  const discover = options.projectIds === undefined;

  const startPerProject = (resource: ResourceDefinition, slug: string): void => {
    const id = `${resource.name}:${slug}`;
    if (started.has(id)) return;
    started.add(id);
    pending.push(walk(resource, singleProjectScope(slug), {}));
  };
  const onProjects = (slugs: ReadonlySet<string>): void => {
    if (!discover) return;
    const fresh = [...slugs].filter((s) => !projects.has(s));
    if (fresh.length === 0) return;
    for (const slug of fresh) projects.add(slug);
    // Not awaited (the walk goes on); a failure is the run's to see in its final state write.
    deps.state.addProjects(fresh).catch(() => undefined);
    for (const resource of perProject) for (const slug of fresh) startPerProject(resource, slug);
  };

  const star = allProjectsScope(options.projectIds);
  for (const resource of options.resources) {
    if (!resource.allProjects) {
      for (const slug of projects) startPerProject(resource, slug);
      continue;
    }
    pending.push(
      walk(resource, star, { onProjects }).then((result) => {
        if (result.outcome !== 'scope-rejected') return result;
        // Declared as accepting `*` but refused it: fall back to one walk per project.
        deps.logger.warn(
          { resource: resource.name },
          `"*" was rejected (400); reading ${resource.name} one project at a time`,
        );
        perProject.add(resource);
        for (const slug of projects) startPerProject(resource, slug);
        return result;
      }),
    );
  }

  // Walks are added while others run (discovered projects): wait until none is left.
  const results: R[] = [];
  for (let i = 0; i < pending.length; i++) results.push(await (pending[i] as Promise<R>));

  for (const resource of perProject) {
    if ([...started].some((id) => id.startsWith(`${resource.name}:`))) continue;
    results.push(
      noProjects(
        resource,
        new ConfigError(
          `${resource.path} does not accept the all-projects scope "*", and no project slugs are known yet ` +
            `(none in state, none found in this run's all-projects reads): pass --project-ids a,b`,
          { context: { resource: resource.name, project: '*' } },
        ),
      ),
    );
  }
  await deps.state.addProjects(projects);
  return results.filter((r) => r.outcome !== 'scope-rejected');
}

/**
 * The scopes a run would start with, without discovery (for `plan`, `verify`, `status`):
 * per-project resources under `*` list the known projects (`--project-ids`, else those in state);
 * `undefined` when none is known yet.
 */
export function initialScopes(
  resource: ResourceDefinition,
  options: Omit<ScopeOptions, 'resources'>,
  knownProjects: readonly string[],
): ProjectScope[] | undefined {
  if (options.project !== '*') return [singleProjectScope(options.project)];
  if (resource.allProjects) return [allProjectsScope(options.projectIds)];
  const slugs = options.projectIds ?? knownProjects;
  return slugs.length === 0 ? undefined : [...slugs].sort().map((s) => singleProjectScope(s));
}
