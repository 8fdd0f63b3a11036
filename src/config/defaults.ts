import { parseDuration } from '../core/duration.js';
import {
  DEFAULT_BATCH_BYTES,
  DEFAULT_BATCH_ROWS,
  DEFAULT_DUCKDB_PATH,
  DEFAULT_STATE_PATH,
  DEFAULT_PUBLISH_EVERY,
  DEFAULT_LOOKBACK,
  DEFAULT_PROGRESS_INTERVAL,
  DEFAULT_SETTLE,
  DEFAULT_TRACES,
  DEFAULT_BQ_LOCATION,
  DEFAULT_DRY_RUN_LIMIT,
  DEFAULT_WINDOW,
  DEFAULT_CONCURRENCY,
  DEFAULT_SPLIT_CONCURRENCY,
  DEFAULT_MAX_LAG,
  DEFAULT_MAX_BACKLOG_ETA,
  OPTIONS,
} from './options.js';

/** The environment names of the API settings, and the pipeline's settings at their defaults (held in options.ts). */
export const ENV = Object.freeze({
  baseUrl: 'QUERY_API_BASE_URL',
  apiKey: 'QUERY_API_KEY',
  project: 'QUERY_API_PROJECT',
  hashSalt: 'QUERY_SYNC_HASH_SALT',
});

/**
 * A sync's and a backfill's settings at these defaults, in the units the pipeline takes (DuckDB's
 * batch size), for callers that wire the pipeline themselves (tests, benchmarks): the pipeline
 * restates no default.
 */
export const PIPELINE_DEFAULTS = Object.freeze({
  sync: Object.freeze({
    batchRows: DEFAULT_BATCH_ROWS.duckdb,
    batchBytes: DEFAULT_BATCH_BYTES,
    settleMs: parseDuration(DEFAULT_SETTLE),
    concurrency: DEFAULT_SPLIT_CONCURRENCY,
  }),
  backfill: Object.freeze({
    batchRows: DEFAULT_BATCH_ROWS.duckdb,
    batchBytes: DEFAULT_BATCH_BYTES,
    concurrency: DEFAULT_CONCURRENCY,
  }),
});

// Each default is held once, in options.ts beside its flag; re-exported for importers of config.ts.
export {
  DEFAULT_BATCH_BYTES,
  DEFAULT_BATCH_ROWS,
  DEFAULT_DUCKDB_PATH,
  DEFAULT_STATE_PATH,
  DEFAULT_PUBLISH_EVERY,
  DEFAULT_LOOKBACK,
  DEFAULT_PROGRESS_INTERVAL,
  DEFAULT_SETTLE,
  DEFAULT_TRACES,
  DEFAULT_BQ_LOCATION,
  DEFAULT_DRY_RUN_LIMIT,
  DEFAULT_WINDOW,
  DEFAULT_CONCURRENCY,
  DEFAULT_SPLIT_CONCURRENCY,
  DEFAULT_MAX_LAG,
  DEFAULT_MAX_BACKLOG_ETA,
  OPTIONS,
};
