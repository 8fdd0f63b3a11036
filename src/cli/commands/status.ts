import { existsSync } from 'node:fs';
import type { StatusCommandConfig, StatusConfig } from '../../config/index.js';
import { silentLogger } from '../../core/log.js';
import { systemClock } from '../../core/clock.js';
import type { Destination } from '../../load/destination.js';
import { StateStore, type StateDocument } from '../../state/store.js';
import { evaluateFreshness, freshLine, type FreshnessFacts, type StreamFreshness } from '../../reports/freshness.js';
import {
  analystTablesOf,
  buildStatus,
  type StatusReport,
  type TableCounts,
  type WarehouseStatus,
} from '../../reports/status.js';
import { workingPathForReading } from '../../publish/layout.js';
import { publishedLine, publishedStatus, type PublishedStatus } from '../../publish/status.js';
import type { CommandIo } from '../../run/io.js';
import { EXIT_CODES, exitCodeFor } from '../../core/exit-codes.js';
import { formatStatus } from '../../reports/text.js';
import { owedTraces, type OwedByResource } from '../../reports/owed.js';

/**
 * What `query-sync status` reports: state (read without taking any run lock), warehouse counts and,
 * for DuckDB, the published read copy. A warehouse another process holds open (a running sync) is
 * reported as unavailable, not an error.
 */
async function statusOf(
  config: StatusCommandConfig,
  io: CommandIo,
): Promise<{ readonly report: StatusReport; readonly published: PublishedStatus | undefined }> {
  const { readStateFrom } = await import('../../run/state-home.js');
  const { document: doc, location } = await readStateFrom(config, silentLogger());
  const nowMs = (io.clock ?? systemClock).now();
  const { warehouse, owed } = await readWarehouse(config, doc, io, nowMs);
  const report = buildStatus(location, doc, config.resources, warehouse, config.limits, nowMs, owed);
  const published =
    config.destination === 'duckdb' ? publishedStatus(config.duckdbPath, (io.clock ?? systemClock).now()) : undefined;
  return { report, published };
}

/**
 * The facts `status --check` judges, read from state and the published copy's manifest only: no
 * lease, no table counted, no API request. With DuckDB, the state file (which a run rewrites after
 * each commit, as the export of the warehouse's state) is read rather than the working file: a
 * probe that opened that file, even read-only, for the instant a scheduled sync starts would make
 * the sync exit 4 (DuckDB lets one process open a file to write, or many to read, never both).
 * Without a state file (never written, or lost), the state is read as `status` reads it.
 */
async function freshnessOf(config: StatusCommandConfig, io: CommandIo): Promise<FreshnessFacts> {
  const nowMs = (io.clock ?? systemClock).now();
  const doc =
    config.destination === 'duckdb' && existsSync(config.statePath)
      ? await StateStore.read(config.statePath)
      : (await (await import('../../run/state-home.js')).readStateFrom(config, silentLogger())).document;
  const unread: WarehouseStatus = { destination: config.destination, location: '', available: false, tables: {} };
  const report = buildStatus(config.statePath, doc, config.resources, unread, config.limits, nowMs, owedInState(doc));
  const published = config.destination === 'duckdb' ? publishedStatus(config.duckdbPath, nowMs) : undefined;
  return freshnessFacts(report, published, nowMs);
}

/**
 * What each per-event drain left owed when it last ended (`lastRun.owed`, counted from the
 * warehouse's trace book): the check reads state alone, so it takes the drains' word for it.
 * Undefined where no drain recorded one (the state queue's pending is read then).
 */
function owedInState(doc: StateDocument): OwedByResource | undefined {
  const out: Record<string, Record<string, number>> = {};
  for (const [key, stream] of Object.entries(doc.streams)) {
    const owed = stream.lastRun?.owed;
    if (owed === undefined) continue;
    const at = key.indexOf(':');
    const resource = key.slice(0, at);
    const project = key.slice(at + 1);
    out[resource] = { ...(out[resource] ?? {}), [project]: owed };
  }
  return Object.keys(out).length === 0 ? undefined : out;
}

/** A status report's facts for `evaluateFreshness`: each sync stream's as-of, each backlog's forecast. */
function freshnessFacts(report: StatusReport, published: PublishedStatus | undefined, nowMs: number): FreshnessFacts {
  const streams: StreamFreshness[] = [];
  for (const r of report.resources) {
    for (const scope of r.scopes) {
      const sync = scope.sync;
      if (sync === undefined) continue;
      const run = sync.lastRun;
      // A stream without a mark (read whole each run, or one event at a time) holds what its last good run read.
      const asOf = sync.highWaterMark ?? (run?.outcome === 'ok' ? run.at : undefined);
      streams.push({
        resource: r.resource,
        project: scope.project,
        ...(asOf === undefined ? {} : { asOf }),
        ...(run === undefined
          ? {}
          : {
              lastRun: { at: run.at, outcome: run.outcome, ...(run.error === undefined ? {} : { error: run.error }) },
            }),
      });
    }
  }
  return {
    nowMs,
    ...(published === undefined ? {} : { published: { path: published.path, asOf: published.asOf } }),
    streams,
    backlogs: report.resources.flatMap((r) => (r.backlog === undefined ? [] : [r.backlog.forecast])),
  };
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
    const { openReadOnly } = await import('../../run/open-destination.js');
    destination = await openReadOnly(config, io.print);
    const tables: Record<string, TableCounts> = {};
    for (const table of [...config.resources.map((r) => r.name), ...analystTablesOf(doc)]) {
      const rows = await destination.count(table);
      const byProject = await destination.can.byProject?.countByProject(table);
      tables[table] = { rows, byProject };
    }
    const owed = await owedTraces(destination, doc, config.resources, { nowMs });
    return { warehouse: { ...base, available: true, tables }, owed };
  } catch (error) {
    return { warehouse: { ...base, available: false, reason: (error as Error).message, tables: {} } };
  } finally {
    await destination?.close().catch(() => undefined);
  }
}

/**
 * `query-sync status [--json]`: state (read without taking any run lock) and warehouse counts.
 * A warehouse another process holds open (a running sync) is reported as unavailable, not an error.
 * `status --check`: freshness judged against `--max-lag` and `--max-backlog-eta`: one line per
 * breach and exit 7 (`stale`), else one line and 0; for a probe beside a running sync.
 */
export async function statusCommand(config: StatusCommandConfig, io: CommandIo): Promise<number> {
  try {
    if (config.check !== undefined) {
      const facts = await freshnessOf(config, io);
      const breaches = evaluateFreshness(facts, config.check);
      if (breaches.length === 0) {
        io.print(freshLine(facts, config.check));
        return EXIT_CODES.ok;
      }
      for (const b of breaches) io.print(b.line);
      return EXIT_CODES.stale;
    }
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
