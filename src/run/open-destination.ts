import type { SyncConfig } from '../config/index.js';
import { silentLogger, type Logger } from '../core/log.js';
import type { Destination } from '../load/destination.js';
import { DuckDbDestination } from '../load/duckdb/destination.js';
import { takeOverOldLayout, workingPathForReading } from '../publish/layout.js';
import type { DestinationName } from '../load/registry.js';

/** What `openDestination` needs of a command's config. */
export type DestinationConfig = Pick<
  SyncConfig,
  'destination' | 'duckdbPath' | 'duckdbMemoryLimitBytes' | 'bigquery' | 'dryRun' | 'lockWaitMs'
>;

/**
 * The configured destination. BigQuery's client is loaded only when it is used. A DuckDB file held
 * by another process (a sync and a backfill at the same time) is waited for up to `--lock-wait`.
 */
export async function openDestination(
  config: DestinationConfig,
  logger: Logger,
  print: (line: string) => void,
  options: { readonly takeOver?: boolean } = {},
): Promise<Destination> {
  return OPEN[config.destination](config, logger, print, options);
}

type Opener = (
  config: DestinationConfig,
  logger: Logger,
  print: (line: string) => void,
  options: { readonly takeOver?: boolean },
) => Promise<Destination>;

/** How each destination of `load/registry.ts` is opened for a command (a new one is a compile error here). */
const OPEN: Readonly<Record<DestinationName, Opener>> = {
  duckdb: async (config, logger, _print, options) => {
    // The sync writes its working file; `--duckdb-path` is the published read copy (publish/layout.ts).
    // Only a run that publishes at its end (sync, backfill, verify --repair, reset) takes an old-layout file over.
    const { work, note } =
      config.dryRun || options.takeOver !== true
        ? { work: workingPathForReading(config.duckdbPath), note: undefined }
        : takeOverOldLayout(config.duckdbPath);
    if (note !== undefined) logger.info(note);
    return DuckDbDestination.open(work, { waitMs: config.lockWaitMs, memoryLimitBytes: config.duckdbMemoryLimitBytes });
  },
  bigquery: async (config, logger, print) => {
    const bq = config.bigquery;
    if (bq === undefined) throw new Error('unreachable: bigquery config is validated in config.ts');
    // BigQuery's client is loaded only when it is used.
    const { openBigQuery } = await import('../load/bigquery/dry-run-destination.js');
    return openBigQuery({
      projectId: bq.projectId,
      dataset: bq.dataset,
      location: bq.location,
      apiEndpoint: bq.apiEndpoint,
      keyFilename: bq.keyFile,
      ...(bq.upsert === undefined ? {} : { upsert: bq.upsert }),
      ...(bq.compactEveryMs === undefined ? {} : { compactEveryMs: bq.compactEveryMs }),
      ...(bq.pollMs === undefined ? {} : { pollMs: bq.pollMs }),
      dryRun: config.dryRun,
      print,
      logger,
    });
  },
};

/**
 * The destination for a command that only reads it (`status`): the DuckDB working file read-only
 * (the rows and the state as the sync wrote them; readers of the data open the published copy).
 */
export async function openReadOnly(config: DestinationConfig, print: (line: string) => void): Promise<Destination> {
  if (config.destination === 'duckdb')
    return DuckDbDestination.open(workingPathForReading(config.duckdbPath), {
      waitMs: config.lockWaitMs,
      readOnly: true,
    });
  return openDestination(config, silentLogger(), print);
}
