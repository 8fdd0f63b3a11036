import { createHmac } from 'node:crypto';
import { ConfigError } from '../core/errors.js';
import { stringifyJson } from '../core/json.js';
import type { ApiRecord, JsonValue, ResourceDefinition } from '../core/types.js';

/**
 * Privacy rules: fields dropped, or replaced by a salted hash, before a record is normalized, so
 * the value never reaches the warehouse, the state file or a log line. Applied as part of the
 * resource's record transform (after the connector's own), which every command that writes rows
 * (sync, backfill, verify --repair) runs before normalization.
 */

/** Per resource, the top-level fields to drop and those to hash. */
export interface PrivacyRules {
  readonly exclude: Readonly<Record<string, readonly string[]>>;
  readonly hash: Readonly<Record<string, readonly string[]>>;
}

/** Shortest salt accepted: a short salt makes the hashes of short values easy to guess. */
const MIN_SALT_LENGTH = 16;

/**
 * The salted hash of a value: HMAC-SHA256 keyed by the salt (the standard way to salt SHA-256),
 * as 64 lowercase hex characters. A string is hashed as its UTF-8 text, any other value as its
 * JSON text (bigints exact), so equal values give equal hashes across runs with the same salt:
 * hashed columns still join and group.
 */
export function hashValue(value: Exclude<JsonValue, null>, salt: string): string {
  const text = typeof value === 'string' ? value : stringifyJson(value);
  return createHmac('sha256', salt).update(text, 'utf8').digest('hex');
}

/** The record with the rules of one resource applied; `null` values stay `null`. */
export function applyPrivacy(
  record: ApiRecord,
  exclude: ReadonlySet<string>,
  hash: ReadonlySet<string>,
  salt: string | undefined,
): ApiRecord {
  const out: Record<string, JsonValue> = {};
  for (const [field, value] of Object.entries(record)) {
    if (exclude.has(field)) continue;
    if (hash.has(field) && value !== null) {
      if (salt === undefined) throw new Error('unreachable: hashing without a salt is refused in config');
      out[field] = hashValue(value, salt);
      continue;
    }
    out[field] = value;
  }
  return out;
}

/** `resource` with the rules added to its transform (unchanged when no rule names it). */
export function withPrivacy(
  resource: ResourceDefinition,
  rules: PrivacyRules,
  salt: string | undefined,
): ResourceDefinition {
  const exclude = new Set(rules.exclude[resource.name] ?? []);
  const hash = new Set(rules.hash[resource.name] ?? []);
  if (exclude.size === 0 && hash.size === 0) return resource;
  const own = resource.transform;
  // An excluded field that is declared (free text is: connectors/) gets no column either.
  const columns =
    resource.columns === undefined
      ? undefined
      : Object.fromEntries(Object.entries(resource.columns).filter(([field]) => !exclude.has(field)));
  return Object.freeze({
    ...resource,
    ...(columns === undefined ? {} : { columns }),
    transform: (record: ApiRecord): ApiRecord =>
      applyPrivacy(own === undefined ? record : own(record), exclude, hash, salt),
  });
}

/**
 * `--exclude-columns events.user_input,traces.input` (and `--hash-columns`) → fields per resource.
 * Refuses unknown resources and the fields a sync cannot do without: the key, the cursor field and
 * `project_id`. Hashing a field the connector declares as a non-string column is refused too (the
 * hash is a string).
 */
function parseColumnList(
  flag: string,
  text: string | undefined,
  resources: readonly ResourceDefinition[],
  hashing: boolean,
): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  if (text === undefined) return out;
  const items = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const item of items) {
    const match = /^([a-z_]+)\.([A-Za-z0-9_]+)$/.exec(item);
    const resource = match === null ? undefined : resources.find((r) => r.name === match[1]);
    if (match === null || resource === undefined) {
      throw new ConfigError(
        `${flag}: expected resource.field items such as events.user_input (resources: ${resources.map((r) => r.name).join(', ')}), got "${item}"`,
      );
    }
    const field = match[2] as string;
    const needed = [resource.key, 'project_id', ...(resource.cursorField === undefined ? [] : [resource.cursorField])];
    if (needed.includes(field)) {
      throw new ConfigError(
        `${flag}: ${item} cannot be ${hashing ? 'hashed' : 'excluded'}: a sync needs ${resource.name}'s key, cursor field and project_id as they are`,
      );
    }
    const declared = resource.columns?.[field];
    if (hashing && declared !== undefined && declared !== 'string' && declared !== 'json') {
      throw new ConfigError(
        `${flag}: ${item} is declared as ${declared} in connectors/${resource.name}.ts, and a hash is a string: exclude it instead`,
      );
    }
    const fields = out[resource.name] ?? [];
    fields.push(field);
    out[resource.name] = fields;
  }
  return out;
}

/** Both lists, checked together: a field is excluded or hashed, not both; hashing needs a salt. */
export function resolvePrivacy(
  flags: { readonly excludeColumns?: string; readonly hashColumns?: string },
  resources: readonly ResourceDefinition[],
  salt: string | undefined,
  saltEnv: string,
): PrivacyRules {
  const exclude = parseColumnList('--exclude-columns', flags.excludeColumns, resources, false);
  const hash = parseColumnList('--hash-columns', flags.hashColumns, resources, true);
  for (const [resource, fields] of Object.entries(hash)) {
    const both = fields.filter((f) => exclude[resource]?.includes(f));
    if (both.length > 0)
      throw new ConfigError(`${resource}.${both[0]} is in both --exclude-columns and --hash-columns: choose one`);
  }
  if (Object.keys(hash).length > 0) {
    if (salt === undefined || salt === '') {
      throw new ConfigError(
        `--hash-columns needs a salt: set ${saltEnv} (at least ${MIN_SALT_LENGTH} characters, kept secret and the same for every run so hashes stay comparable)`,
      );
    }
    if (salt.length < MIN_SALT_LENGTH)
      throw new ConfigError(`${saltEnv}: expected at least ${MIN_SALT_LENGTH} characters, got ${salt.length}`);
  }
  return { exclude, hash };
}
