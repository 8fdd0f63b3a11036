import { existsSync } from 'node:fs';
import { RESOURCE_NAMES } from '../../connectors/index.js';
import type { StatusConfig } from '../config/index.js';
import { WarehouseBusyError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Destination } from '../load/destination.js';
import { DuckDbDestination } from '../load/duckdb/destination.js';
import { StateStore, type StateDocument } from '../state/store.js';
import { openDestination } from './open-destination.js';
import { workingPathForReading } from '../publish/layout.js';

/**
 * Where a command finds the state: the warehouse's `_query_sync_state` table when the destination
 * keeps one, else (or while it holds none) the state file. See `StateStore.attach` for which wins.
 */

/** A run's state from now on lives in the warehouse (restored from it, or the file migrated into it). */
export async function keepStateIn(state: StateStore, destination: Destination): Promise<void> {
  const table = destination.can.state;
  if (table !== undefined) await state.attach(table);
}

/**
 * The state for a command that only reads it (`status`, `plan`, `verify`, `reset`, `check`): the
 * warehouse is opened read-only when it exists. A DuckDB file another run holds open is not
 * waited for: the state file (the export that run keeps current) is read instead, and `logger`
 * says so.
 */
export async function readStateDocument(
  config: StateHomeConfig,
  logger: Logger,
  options: { readonly resources?: readonly string[] } = { resources: RESOURCE_NAMES },
): Promise<StateDocument> {
  return (await readStateFrom(config, logger, options)).document;
}

type StateHomeConfig = Pick<
  StatusConfig,
  'statePath' | 'destination' | 'duckdbPath' | 'duckdbMemoryLimitBytes' | 'bigquery' | 'lockWaitMs'
> & {
  readonly dryRun?: boolean;
};

/** `readStateDocument`, and where the state was read: the warehouse's table or the file. */
export async function readStateFrom(
  config: StateHomeConfig,
  logger: Logger,
  options: { readonly resources?: readonly string[] } = { resources: RESOURCE_NAMES },
): Promise<{ readonly document: StateDocument; readonly location: string }> {
  const fromFile = async (): Promise<{ document: StateDocument; location: string }> => ({
    document: await StateStore.read(config.statePath, options),
    location: config.statePath,
  });
  let destination: Destination | undefined;
  try {
    if (config.destination === 'duckdb') {
      const working = workingPathForReading(config.duckdbPath);
      if (!existsSync(working)) return await fromFile();
      destination = await DuckDbDestination.open(working, {
        readOnly: true,
        memoryLimitBytes: config.duckdbMemoryLimitBytes,
      });
    } else {
      destination = await openDestination({ ...config, dryRun: config.dryRun ?? false }, logger, () => undefined);
    }
  } catch (error) {
    if (!(error instanceof WarehouseBusyError)) throw error;
    logger.info(
      `the warehouse is open in another run; reading the state file ${config.statePath}, which that run keeps as a copy of its state`,
    );
    return fromFile();
  }
  try {
    const table = destination.can.state;
    const rows = table === undefined ? [] : await table.readState();
    if (table === undefined || rows.length === 0) return await fromFile();
    return { document: await StateStore.readWith(config.statePath, table, options), location: table.stateLocation };
  } finally {
    await destination.close().catch(() => undefined);
  }
}
