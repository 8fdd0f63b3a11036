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
import { readStateFrom } from '../app/state-home.js';
import { openReadOnly } from '../app/open-destination.js';
import { workingPathForReading } from '../publish/layout.js';
import { publishedLine, publishedStatus, type PublishedStatus } from '../publish/status.js';
import type { CommandIo } from '../app/io.js';
import { EXIT_CODES, exitCodeFor } from '../core/exit-codes.js';
import { formatStatus } from '../app/reports.js';

/**
 * What `query-sync status` reports: state (read without taking any run lock), warehouse counts and,
 * for DuckDB, the published read copy. A warehouse another process holds open (a running sync) is
 * reported as unavailable, not an error.
 */
async function statusOf(
  config: StatusCommandConfig,
  io: CommandIo,
): Promise<{ readonly report: StatusReport; readonly published: PublishedStatus | undefined }> {
  const { document: doc, location } = await readStateFrom(config, silentLogger());
  const warehouse = await readWarehouse(config, doc, io);
  const report = buildStatus(
    location,
    doc,
    config.resources,
    warehouse,
    config.limits,
    (io.clock ?? systemClock).now(),
  );
  const published =
    config.destination === 'duckdb' ? publishedStatus(config.duckdbPath, (io.clock ?? systemClock).now()) : undefined;
  return { report, published };
}

async function readWarehouse(config: StatusConfig, doc: StateDocument, io: CommandIo): Promise<WarehouseStatus> {
  const location =
    config.destination === 'duckdb'
      ? config.duckdbPath
      : `${config.bigquery?.projectId ?? '?'}.${config.bigquery?.dataset ?? '?'}`;
  const base = { destination: config.destination, location };
  if (config.destination === 'duckdb' && !existsSync(workingPathForReading(config.duckdbPath))) {
    return { ...base, available: false, reason: 'no warehouse file yet', tables: {} };
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
    return { ...base, available: true, tables };
  } catch (error) {
    return { ...base, available: false, reason: (error as Error).message, tables: {} };
  } finally {
    await destination?.close().catch(() => undefined);
  }
}

/**
 * `query-sync status [--json]`: state (read without taking any run lock) and warehouse counts.
 * A warehouse another process holds open (a running sync) is reported as unavailable, not an error.
 */
export async function statusCommand(config: StatusCommandConfig, io: CommandIo): Promise<number> {
  try {
    const { report, published } = await statusOf(config, io);
    if (config.json) io.print(JSON.stringify(published === undefined ? report : { ...report, published }, null, 2));
    else {
      for (const line of formatStatus(report)) io.print(line);
      if (published !== undefined) io.print(publishedLine(published));
    }
    return EXIT_CODES.ok;
  } catch (error) {
    io.print(`status FAILED: ${(error as Error).message}`);
    return exitCodeFor(error);
  }
}
