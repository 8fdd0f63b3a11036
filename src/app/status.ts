import { existsSync } from 'node:fs';
import type { StatusCommandConfig, StatusConfig } from '../config.js';
import { silentLogger } from '../core/log.js';
import { systemClock } from '../core/clock.js';
import type { Destination } from '../load/destination.js';
import type { StateDocument } from '../state/store.js';
import {
  analystTablesOf,
  buildStatus,
  type StatusReport,
  type TableCounts,
  type WarehouseStatus,
} from '../pipeline/status.js';
import { readStateFrom } from './state-home.js';
import { openReadOnly } from './open-destination.js';
import { workingPathForReading } from '../publish/layout.js';
import { publishedStatus, type PublishedStatus } from '../publish/status.js';
import type { CommandIo } from './io.js';
import { owedChildren, type OwedByResource } from './owed.js';

/**
 * What `query-sync status` reports: state (read without taking any run lock), warehouse counts and,
 * for DuckDB, the published read copy. A warehouse another process holds open (a running sync) is
 * reported as unavailable, not an error.
 */
export async function statusOf(
  config: StatusCommandConfig,
  io: CommandIo,
): Promise<{ readonly report: StatusReport; readonly published: PublishedStatus | undefined }> {
  const { document: doc, location } = await readStateFrom(config, silentLogger());
  const nowMs = (io.clock ?? systemClock).now();
  const { warehouse, owed } = await readWarehouse(config, doc, io, nowMs);
  const report = buildStatus(location, doc, config.resources, warehouse, config.limits, nowMs, owed);
  const published =
    config.destination === 'duckdb' ? publishedStatus(config.duckdbPath, (io.clock ?? systemClock).now()) : undefined;
  return { report, published };
}

async function readWarehouse(
  config: StatusConfig,
  doc: StateDocument,
  io: CommandIo,
  nowMs: number,
): Promise<{ readonly warehouse: WarehouseStatus; readonly owed?: OwedByResource }> {
  const location =
    config.destination === 'duckdb'
      ? config.duckdbPath
      : `${config.bigquery?.projectId ?? '?'}.${config.bigquery?.dataset ?? '?'}`;
  const base = { destination: config.destination, location };
  if (config.destination === 'duckdb' && !existsSync(workingPathForReading(config.duckdbPath))) {
    return { warehouse: { ...base, available: false, reason: 'no warehouse file yet', tables: {} } };
  }
  let destination: Destination | undefined;
  try {
    destination = await openReadOnly(config, io.print);
    const tables: Record<string, TableCounts> = {};
    for (const table of [...config.resources.map((r) => r.name), ...analystTablesOf(doc)]) {
      const rows = await destination.count(table);
      const byProject = await destination.can.byProject?.countByProject(table);
      tables[table] = { rows, byProject };
    }
    const owed = await owedChildren(destination, doc, config.resources, { nowMs });
    return { warehouse: { ...base, available: true, tables }, owed };
  } catch (error) {
    return { warehouse: { ...base, available: false, reason: (error as Error).message, tables: {} } };
  } finally {
    await destination?.close().catch(() => undefined);
  }
}
