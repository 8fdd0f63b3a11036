import type { SyncConfig } from '../config/index.js';
import type { RunStoppedError } from '../core/errors.js';
import type { RunEndCode } from '../core/exit-codes.js';
import type { ColumnDef, ResourceDefinition } from '../core/types.js';
import type { Logger } from '../core/log.js';
import type { BillingTotals, Destination } from '../load/destination.js';
import { withContract } from '../normalize/contract.js';
import { columnsOf, recordRun, schemaChanges, type RunRecord, type SchemaChange } from '../analysts/run-history.js';
import type { StreamResult } from '../sync/frame.js';
import { defineViews } from '../analysts/views.js';
import { writeDbtSources } from '../analysts/dbt-sources.js';
import type { Runtime } from './runtime.js';
import { isStopConsequence, stoppedLine, type RunStop } from './stop.js';

/**
 * The envelope every writing run (sync, backfill) puts round its walk, in the order the runs need
 * it: the columns as they were (the contract and the schema changes are measured against them),
 * the progress started; then the display stopped and the stop mapped onto the streams,
 * the billing read and the run's row in `_query_sync_runs`, and the closing line of a stopped run.
 * The walks themselves, and what each run reports, stay with the run (`sync.ts`, `backfill.ts`).
 */

/** A writing run as it starts (its id is the run's, `Run.runId`): the tables' columns before it, its resources under the contract. */
export interface StartedRun {
  readonly columnsBefore: Map<string, readonly ColumnDef[] | undefined>;
  /** The configured resources, each checked against its table as it was when the run started. */
  readonly resources: ResourceDefinition[];
  /** Every table whose columns are compared at the end (the resources' and the extra ones). */
  readonly tables: readonly string[];
}

/** Read the columns, start the progress display: after the plan, before the walk. */
export async function startRun(
  runtime: Runtime,
  destination: Destination,
  config: Pick<SyncConfig, 'resources' | 'schemaContract'>,
  extraTables: readonly string[] = [],
): Promise<StartedRun> {
  const tables = [...config.resources.map((r) => r.name), ...extraTables];
  const columnsBefore = await columnsOf(destination, tables);
  runtime.tracker.markStart();
  runtime.display.start();
  // The contract is checked against the tables as they were when the run started.
  const resources = config.resources.map((r) => withContract(r, columnsBefore.get(r.name), config.schemaContract));
  return { columnsBefore, resources, tables };
}

/**
 * The walk is over: the display stops (its last frame stays), and a stream that failed only because
 * the run was stopped (an aborted request) carries the stop as its error, so it reports as stopped.
 */
export function endRun<S extends StreamResult>(
  runtime: Runtime,
  stop: RunStop,
  streams: readonly S[],
): { readonly reason: RunStoppedError | undefined; readonly streams: S[] } {
  runtime.tracker.finish();
  runtime.display.stop();
  const reason = stop.reason;
  return {
    reason,
    streams:
      reason === undefined
        ? [...streams]
        : streams.map((s) => (isStopConsequence(s.error, stop) ? { ...s, error: reason } : s)),
  };
}

/** Read once, before the run's own history row is written, so the row and the summary agree. */
export function billingOf(config: Pick<SyncConfig, 'dryRun'>, destination: Destination): BillingTotals | undefined {
  return config.dryRun ? undefined : destination.can.billing?.billing();
}

/**
 * The run's row in `_query_sync_runs` and the schema changes it made (none for a dry run, which
 * writes nothing) under the run's id: returns that id and the changes, undefined when nothing was.
 */
export async function recordWritingRun(
  config: Pick<SyncConfig, 'dryRun'>,
  destination: Destination,
  started: StartedRun,
  runId: string,
  run: Omit<RunRecord, 'endedAt' | 'requests' | 'rateLimited' | 'end'> & { readonly end: RunEndCode },
  { clock, logger, client, budget }: Pick<Runtime, 'clock' | 'logger' | 'client' | 'budget'>,
): Promise<{ readonly runId: string; readonly changes: readonly SchemaChange[] } | undefined> {
  if (config.dryRun) return undefined;
  const changes = schemaChanges(started.columnsBefore, await columnsOf(destination, started.tables));
  await recordRun(
    destination,
    {
      ...run,
      endedAt: new Date(clock.now()).toISOString(),
      // The run's own totals, not the streams' sum: the plan, probes, reconcile and settle re-reads too.
      requests: client.requestsSent,
      rateLimited: budget.stats().rateLimited,
    },
    changes,
    logger,
    runId,
  );
  return { runId, changes };
}

/** The closing line of a stopped run (none when it was not stopped), with the rows it wrote. */
export function stoppedLines(
  command: string,
  reason: RunStoppedError | undefined,
  streams: readonly StreamResult[],
): string[] {
  return reason === undefined
    ? []
    : [
        stoppedLine(
          command,
          reason,
          streams.reduce((n, s) => n + s.rows, 0),
        ),
      ];
}

/**
 * What readers use besides the tables, brought up to date at a run's end (not for a dry run, which
 * writes nothing): the views, and the dbt sources file when `--dbt-sources` names one (a file that
 * cannot be written is a warning: the run's data and state are stored).
 */
export async function defineWarehouseExtras(
  config: Pick<SyncConfig, 'dryRun' | 'dbtSourcesPath' | 'destination' | 'bigquery' | 'duckdbPath' | 'publishEveryMs'>,
  destination: Destination,
  logger: Logger,
): Promise<void> {
  if (!config.dryRun) {
    await defineViews(destination, logger);
    if (config.dbtSourcesPath !== undefined) {
      const written = await writeDbtSources(destination, config.dbtSourcesPath, {
        destination: config.destination,
        bigquery: config.bigquery,
        duckdbPath: config.duckdbPath,
        publishEveryMs: config.publishEveryMs ?? 0,
      }).catch((error: unknown) => {
        logger.warn(
          { err: (error as Error).message },
          `could not write the dbt sources to ${config.dbtSourcesPath ?? ''}`,
        );
        return undefined;
      });
      if (written !== undefined) logger.info({ path: written.path }, `dbt sources written to ${written.path}`);
    }
  }
}
