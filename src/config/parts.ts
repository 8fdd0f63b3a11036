import { readFileSync } from 'node:fs';
import { RESOURCES, RESOURCE_NAMES } from '../../connectors/index.js';
import { splitList } from './values.js';
import { ConfigError } from '../core/errors.js';
import type { ResourceDefinition } from '../core/types.js';
import { bareApiKey } from '../http/conventions.js';
import { envName } from './options.js';
import { ENV, DEFAULT_BQ_LOCATION } from './defaults.js';
import type { Reader } from './reader.js';
import type { DestinationName } from '../load/registry.js';

/** Settings more than one command reads the same way: the API key, the resources, the warehouse, project slugs. */

/** `--destination bigquery`: where the dataset is and how its tables are laid out. */
export interface BigQueryConfig {
  readonly projectId: string;
  readonly dataset: string;
  readonly location: string;
  readonly apiEndpoint?: string;
  readonly keyFile?: string;
  /** `--bq-upsert`: layout of users and conversations (see load/bigquery/log-layout.ts). */
  readonly upsert?: 'auto' | 'log' | 'merge';
  /** `--bq-compact-every`, in ms. */
  readonly compactEveryMs?: number;
  /** First wait between a BigQuery job's status polls, in ms; no flag sets it (tests shorten it). */
  readonly pollMs?: number;
}

/** Project slugs per the spec: a malformed slug is refused with 400 by the service. */
export const SLUG = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** The API key: from the environment, or the file `--api-key-file` names; never a flag or config key. */
export function resolveApiKey(read: Reader): string {
  const direct = read.text('api-key');
  const file = read.text('api-key-file');
  if (direct !== undefined && file !== undefined) {
    throw new ConfigError(`both ${read.label('api-key')} and ${read.label('api-key-file')} give the API key: keep one`);
  }
  if (file !== undefined) {
    let key: string;
    try {
      key = readFileSync(file, 'utf8').trim();
    } catch (error) {
      throw new ConfigError(
        `${read.label('api-key-file')}: cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
      );
    }
    if (key === '')
      throw new ConfigError(`${read.label('api-key-file')}: ${file} is empty; expected the Organization API Key`);
    return bareApiKey(key);
  }
  if (!direct) {
    throw new ConfigError(
      `missing the API key: set ${envName('api-key')} (or ${ENV.apiKey}) in the environment, or pass --api-key-file with a file holding it ` +
        `(the key is never a flag: flags show in the process list)`,
    );
  }
  // A key pasted with its `Bearer ` prefix (from a curl line) is the key (the SDK accepts both).
  return bareApiKey(direct);
}

/** `--bq-upsert` and `--bq-compact-every` (only what was set: the destination holds the defaults). */
function bigQueryLayout(read: Reader): Pick<BigQueryConfig, 'upsert' | 'compactEveryMs'> {
  const upsert = read.choice('bq-upsert') as BigQueryConfig['upsert'];
  const compactEveryMs = read.duration('bq-compact-every');
  return { ...(upsert === undefined ? {} : { upsert }), ...(compactEveryMs === undefined ? {} : { compactEveryMs }) };
}

/** `--resources` → the declared resources, in their declaration order. */
export function resolveResources(read: Reader): readonly ResourceDefinition[] {
  const text = read.text('resources');
  const names = text === undefined ? [...RESOURCE_NAMES] : splitList(text);
  const unknown = names.filter((n) => !RESOURCE_NAMES.includes(n));
  if (unknown.length > 0 || names.length === 0) {
    throw new ConfigError(
      `${read.label('resources')}: expected a comma-separated subset of ${RESOURCE_NAMES.join(',')}, got "${text}"`,
    );
  }
  return RESOURCES.filter((r) => names.includes(r.name));
}

/** `--destination` and the BigQuery flags. */
export function resolveWarehouse(read: Reader): {
  destination: DestinationName;
  bigquery: BigQueryConfig | undefined;
} {
  const destination = read.choice('destination') as DestinationName;
  let bigquery: BigQueryConfig | undefined;
  if (destination === 'bigquery') {
    const projectId = read.text('bq-project');
    const dataset = read.text('bq-dataset');
    if (!projectId || !dataset) {
      throw new ConfigError('--destination bigquery needs --bq-project and --bq-dataset');
    }
    if (!/^[A-Za-z0-9_]{1,1024}$/.test(dataset)) {
      throw new ConfigError(`${read.label('bq-dataset')}: expected letters, digits and underscores, got "${dataset}"`);
    }
    bigquery = {
      projectId,
      dataset,
      location: read.text('bq-location') ?? DEFAULT_BQ_LOCATION,
      apiEndpoint: read.text('bq-api-endpoint'),
      keyFile: read.text('bq-key-file'),
      ...bigQueryLayout(read),
    };
  }
  return { destination, bigquery };
}
