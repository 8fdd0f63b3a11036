import type { ResourceDefinition } from './types.js';

/**
 * Validate and freeze a resource declaration. A declaration that cannot work fails at start-up,
 * not mid-sync.
 */
export function defineResource(definition: ResourceDefinition): ResourceDefinition {
  const problems: string[] = [];
  if (!/^[a-z][a-z0-9_]*$/.test(definition.name))
    problems.push(`name "${definition.name}" must be a SQL-safe identifier`);
  if (!definition.path.startsWith('/')) problems.push(`path "${definition.path}" must start with "/"`);
  if (definition.mode === 'incremental') {
    if (!definition.cursorField) problems.push('an incremental resource needs a cursorField');
    if (!definition.filterGte && definition.stopPastWindow !== true)
      problems.push('an incremental resource needs a filterGte parameter (or stopPastWindow)');
    if (definition.stopPastWindow === true && definition.sortOrder !== 'desc')
      problems.push("stopPastWindow needs sortOrder 'desc'");
  }
  const split = definition.split;
  if (split !== undefined) {
    if ((split.partGte === undefined) !== (split.partLt === undefined))
      problems.push('split needs both partGte and partLt, or neither');
    if (split.partGte === undefined && (definition.filterGte === undefined || definition.filterLt === undefined)) {
      problems.push('split needs filterGte and filterLt (or its own partGte and partLt)');
    }
  }
  if (!Number.isInteger(definition.maxPageSize) || definition.maxPageSize < 1)
    problems.push('maxPageSize must be a positive integer');
  if (problems.length > 0) throw new Error(`resource ${definition.name}: ${problems.join('; ')}`);
  return Object.freeze({ ...definition });
}
