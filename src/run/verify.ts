import { RESOURCE_NAMES } from '../../connectors/index.js';
import type { VerifyConfig } from '../config/index.js';
import { exitCodeFor, runEndCode, runExitCode, type RunEndCode } from '../core/exit-codes.js';
import type { Destination } from '../load/destination.js';

import {
  repairWindows,
  verifyCounts,
  verifyProjects,
  verifyWindows,
  type VerifyReport,
  type VerifyWindow,
} from '../reconcile/verify.js';
import { formatBackfillStreams, formatVerify } from '../reports/text.js';
import { StateStore } from '../state/store.js';
import { openDestination } from './open-destination.js';
import { backfillProgressHooks, createRuntime, type Runtime } from './runtime.js';
import { stoppedLine } from './stop.js';
import type { CommandIo } from './io.js';
import { budgetOwner, seedBudget } from './budget-carry.js';
import type { RunOutcome } from './writing.js';
import type { RunContext } from './context.js';
import { runSettings } from '../reports/run-json.js';

/**
 * A verify run without `--repair` (`query-sync verify --from --to`): compare API counts with
 * warehouse counts per window and project, printing as it goes; exit 5 on any mismatch. It only
 * reads (no lease). `--repair` is a writing run, the run object's step (`verifyRepairStep`).
 */
export async function verifyRead(config: VerifyConfig, io: CommandIo): Promise<number> {
  const runtime = createRuntime({ ...config, progress: 'off' }, io);
  let destination: Destination | undefined;
  try {
    destination = await openDestination(config, runtime.logger, io.print);
    const doc = await StateStore.readWith(config.statePath, destination.can.state, { resources: RESOURCE_NAMES });
    // The last writing run's requests still in the rate-limit windows count against this one's.
    seedBudget(doc, runtime.budget, budgetOwner(config.baseUrl, config.apiKey), runtime.logger);
    const report = await countAndPrint(config, io, runtime, destination, doc.projects);
    return runExitCode({ mismatch: report.mismatches > 0 });
  } catch (error) {
    io.print(`verify FAILED: ${(error as Error).message}`);
    return exitCodeFor(error);
  } finally {
    await destination?.close().catch(() => undefined);
    await runtime.close().catch(() => undefined);
  }
}

/** Count every window in the API and the warehouse, and print the report. */
async function countAndPrint(
  config: VerifyConfig,
  io: CommandIo,
  runtime: Runtime,
  destination: Destination,
  knownProjects: readonly string[],
): Promise<VerifyReport> {
  const report = await verifyCounts(
    {
      resources: config.resources,
      project: config.project,
      projectIds: config.projectIds,
      knownProjects,
      ...config.range,
    },
    { client: runtime.client, destination, logger: runtime.logger },
  );
  for (const line of formatVerify(report)) io.print(line);
  return report;
}

/**
 * `verify --repair`, the run object's step (`run.verifyRepair()`: the `backfill` lease, the run's
 * stop, the rate-limit spend carried between runs, the read copy published at its end): count,
 * re-read the mismatched windows with the backfill's window walk, count them again.
 */
export async function verifyRepairStep(run: RunContext<VerifyConfig>): Promise<RunOutcome> {
  const { config, io, runtime, stop, state, destination } = run;
  const print = io.print;
  const { client, clock, logger } = runtime;
  const report = await countAndPrint(config, io, runtime, destination, state.document.projects);
  const projects = verifyProjects({
    project: config.project,
    projectIds: config.projectIds,
    knownProjects: state.document.projects,
  });
  if (report.mismatches === 0) return { code: runExitCode({}), output: [] };

  const mismatched = report.windows.filter((w) => !w.match);
  print(`repair: re-reading ${mismatched.length} window${mismatched.length === 1 ? '' : 's'}`);
  // A repair writes as a sync does: under the run's schema contract, with its run id, recorded.
  const started = await run.begin();
  const startedAt = new Date(clock.now()).toISOString();
  const streams = await repairWindows(
    mismatched,
    {
      resources: started.resources,
      runId: run.runId,
      concurrency: config.concurrency,
      batchRows: config.batchRows,
      batchBytes: config.batchBytes,
      signal: stop.signal,
      hooks: backfillProgressHooks(runtime.tracker),
    },
    { client, destination, state, clock, logger },
  );
  const { reason } = run.end(streams);
  for (const line of formatBackfillStreams(streams)) print(`repair: ${line}`);
  const record = (end: RunEndCode): Promise<unknown> =>
    run.record(started, {
      startedAt,
      streams,
      settings: {
        ...runSettings(config),
        from: new Date(config.range.fromMs).toISOString(),
        to: new Date(config.range.toMs).toISOString(),
        repair: true,
      },
      end,
    });
  if (reason !== undefined) {
    print(
      stoppedLine(
        'verify --repair',
        reason,
        streams.reduce((n, s) => n + s.rows, 0),
      ),
    );
    const end = runEndCode({ stop: reason });
    await record(end);
    return { code: end.code, output: [] };
  }
  const repaired = config.resources.filter((r) => mismatched.some((w) => w.resource === r.name));
  const again = await verifyWindows(repaired, projects, windowsOf(mismatched), { client, destination, logger });
  print('after repair:');
  for (const line of formatVerify(again)) print(line);
  if (again.windows.some((w) => !w.match && w.warehouse > w.api)) {
    print(
      'note: the warehouse has rows the API no longer counts: records deleted at the source are not deleted in the warehouse (see README)',
    );
  }
  const end = runEndCode(
    { failed: streams.find((s) => s.outcome !== 'ok'), mismatch: again.mismatches > 0 },
    'mismatch-first',
  );
  await record(end);
  return { code: end.code, output: [] };
}

function windowsOf(
  mismatched: readonly VerifyWindow[],
): (resource: string, project: string) => { fromMs: number; toMs: number }[] {
  return (resource, project) =>
    mismatched
      .filter((w) => w.resource === resource && w.project === project)
      .map((w) => ({ fromMs: Date.parse(w.from), toMs: Date.parse(w.to) }));
}
