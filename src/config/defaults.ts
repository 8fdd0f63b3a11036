import { PROJECT_HEADERS } from '../../connectors/service.js';
import { parseDuration } from '../core/duration.js';
import type { ChildSelection } from '../core/types.js';
import { DEFAULT_RATE_LIMITS } from '../http/budget.js';
import { DEFAULT_MEMORY_LIMIT, megabytes } from '../load/duckdb-memory.js';
import { DEFAULT_MAX_RETRY_AFTER_MS, DEFAULT_TIMEOUTS } from '../http/timeouts.js';
import { optionTable } from '../options.js';

/** Every setting's default and the flag table built from them (`options.ts`). */
export const ENV = Object.freeze({
  baseUrl: 'QUERY_API_BASE_URL',
  apiKey: 'QUERY_API_KEY',
  project: 'QUERY_API_PROJECT',
  hashSalt: 'QUERY_SYNC_HASH_SALT',
});

/**
 * A batch is also written once its rows hold this much text (`--batch-bytes`), so memory follows
 * the settings, not the size of the records: 5,000 rows of 200 KB would otherwise be 1 GB.
 */
export const DEFAULT_BATCH_BYTES = '8MB';

/**
 * Rows per write + checkpoint. BigQuery batches are larger: each write is one load job and one MERGE,
 * and a table allows 1,500 load jobs a day; DuckDB checkpoints more often for cheap.
 */
export const DEFAULT_BATCH_ROWS = Object.freeze({ duckdb: 5_000, bigquery: 50_000 });

/** Default files: relative to the working directory (cron and containers should pass absolute paths). */
export const DEFAULT_DUCKDB_PATH = 'warehouse.duckdb';
export const DEFAULT_STATE_PATH = 'state/state.json';
/** How often a long run publishes the read copy (`publish/publisher.ts`): the lag readers see is this plus one publish. */
export const DEFAULT_PUBLISH_EVERY = '5m';
export const DEFAULT_LOOKBACK = '15m';
export const DEFAULT_PROGRESS_INTERVAL = '5s';
/** Both project headers are sent unless one is named: the vendor SDK's and the spec's (connectors/service.ts). */
export const DEFAULT_PROJECT_HEADER = PROJECT_HEADERS.join(' and ');
/**
 * Re-read each events window once it is this old (late enrichment): the SDK says enriched fields
 * "may be absent for very recent events", with no figure. Two hours covers the enrichment delays
 * the emulator models and keeps the re-read cheap (one extra read of each window, two hours after it).
 */
export const DEFAULT_SETTLE = '2h';
/**
 * Which events get their traces read where traces are read per event: every event. `traced` reads
 * only events whose `tool_calls`, `error_spans` or `model` show a trace, and loses the spans of any
 * other event that has some (docs/traces.md): an opt-in saving, never the default.
 */
export const DEFAULT_TRACES: ChildSelection = 'all';
export const DEFAULT_BQ_LOCATION = 'US';
/** Default rows per stream a dry run reads: enough to show every statement, not all history. */
export const DEFAULT_DRY_RUN_LIMIT = 100;
/** Default window of a backfill or verify: one day. */
export const DEFAULT_WINDOW = '1d';
/** Default windows read at once by a backfill. */
export const DEFAULT_CONCURRENCY = 4;
/** Sub-walks of one large window of a sync at once, at most (`pipeline/split.ts`). */
export const DEFAULT_SPLIT_CONCURRENCY = 16;

/**
 * A sync's and a backfill's settings at these defaults, in the units the pipeline takes (DuckDB's
 * batch size), for callers that wire the pipeline themselves (tests, benchmarks): the pipeline
 * restates no default.
 */
export const PIPELINE_DEFAULTS = Object.freeze({
  sync: Object.freeze({ batchRows: DEFAULT_BATCH_ROWS.duckdb, batchBytes: Math.round((megabytes(DEFAULT_BATCH_BYTES) ?? 0) * 1e6), settleMs: parseDuration(DEFAULT_SETTLE), concurrency: DEFAULT_SPLIT_CONCURRENCY }),
  backfill: Object.freeze({ batchRows: DEFAULT_BATCH_ROWS.duckdb, batchBytes: Math.round((megabytes(DEFAULT_BATCH_BYTES) ?? 0) * 1e6), concurrency: DEFAULT_CONCURRENCY }),
});

/** Every flag with its environment name, default, unit and help group. */
export const OPTIONS = optionTable({
  connectTimeoutMs: DEFAULT_TIMEOUTS.connectMs,
  headersTimeoutMs: DEFAULT_TIMEOUTS.headersMs,
  bodyTimeoutMs: DEFAULT_TIMEOUTS.bodyMs,
  requestTimeoutMs: DEFAULT_TIMEOUTS.requestMs,
  maxRetryAfterMs: DEFAULT_MAX_RETRY_AFTER_MS,
  batchBytes: DEFAULT_BATCH_BYTES,
  ...DEFAULT_RATE_LIMITS,
  duckdbMemoryLimit: DEFAULT_MEMORY_LIMIT,
  duckdbPath: DEFAULT_DUCKDB_PATH,
  statePath: DEFAULT_STATE_PATH,
  lookback: DEFAULT_LOOKBACK,
  settle: DEFAULT_SETTLE,
  traces: DEFAULT_TRACES,
  window: DEFAULT_WINDOW,
  concurrency: DEFAULT_CONCURRENCY,
  batchRows: DEFAULT_BATCH_ROWS,
  projectHeader: DEFAULT_PROJECT_HEADER,
  bqLocation: DEFAULT_BQ_LOCATION,
  progressInterval: DEFAULT_PROGRESS_INTERVAL,
  splitConcurrency: DEFAULT_SPLIT_CONCURRENCY,
  dryRunLimit: DEFAULT_DRY_RUN_LIMIT,
  publishEvery: DEFAULT_PUBLISH_EVERY,
});
