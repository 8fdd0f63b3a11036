import { RESOURCE_NAMES } from '../../connectors/index.js';
import type { VerifyConfig } from '../config.js';
import { EXIT_CODES, exitCode, exitCodeFor } from '../core/exit-codes.js';
import type { Destination } from '../load/destination.js';

import { repairWindows, verifyCounts, verifyProjects, verifyWindows, type VerifyWindow } from '../pipeline/verify.js';
import { formatBackfillStreams, formatVerify } from './reports.js';
import { StateStore } from '../state/store.js';
import { openDestination } from './open-destination.js';
import { keepStateIn } from './state-home.js';
import { backfillProgressHooks, createRuntime } from './runtime.js';
import { createRunStop, stoppedLine } from './stop.js';
import type { CommandIo } from './io.js';
import { openRunState } from './writing-run.js';
import { publishDuringRun, type RunPublishing } from '../publish/during-run.js';

/**
 * A verify run (`query-sync verify --from --to [--repair]`): compare API counts with warehouse
 * counts per window and project, printing as it goes; exit 5 on any mismatch. `--repair` re-reads
 * the mismatched windows (the backfill's window walk, under the `backfill` run lock, in the state
 * and stop of a writing run: `openRunState`, `createRunStop`) and checks them again.
 */
export async function verifyRun(config: VerifyConfig, io: CommandIo): Promise<number> {
  const print = io.print;
  const runtime = createRuntime({ ...config, progress: config.repair ? config.progress : 'off' }, io);
  const { clock, logger, client } = runtime;
  const stop = createRunStop({ outer: io.signal, maxRunTimeMs: config.maxRunTimeMs, logger });
  let destination: Destination | undefined;
  let state: StateStore | undefined;
  let publishing: RunPublishing | undefined;
  try {
    destination = await openDestination(config, logger, io.print);
    const doc = await StateStore.readWith(config.statePath, destination.can.state, { resources: RESOURCE_NAMES });
    const projects = verifyProjects({ project: config.project, projectIds: config.projectIds, knownProjects: doc.projects });
    const deps = { client, destination, logger };
    const report = await verifyCounts(
      { resources: config.resources, project: config.project, projectIds: config.projectIds, knownProjects: doc.projects, ...config.range },
      deps,
    );
    for (const line of formatVerify(report)) print(line);
    if (report.mismatches === 0 || !config.repair) return exitCode(report.mismatches === 0 ? 'ok' : 'mismatch');

    const mismatched = report.windows.filter((w) => !w.match);
    print(`repair: re-reading ${mismatched.length} window${mismatched.length === 1 ? '' : 's'}`);
    state = await openRunState(config, 'backfill', { clock, logger, stop }, destination);
    await keepStateIn(state, destination);
    // The repaired rows reach the published read copy at the repair's end, as a sync's do (docs/analysts.md).
    publishing = config.dryRun ? undefined : publishDuringRun(destination, { path: config.duckdbPath, everyMs: 0, clock, logger });
    runtime.tracker.markStart();
    runtime.display.start();
    const streams = await repairWindows(
      mismatched,
      { resources: config.resources, concurrency: config.concurrency, batchRows: config.batchRows, batchBytes: config.batchBytes, signal: stop.signal, hooks: backfillProgressHooks(runtime.tracker) },
      { client, destination: publishing?.destination ?? destination, state, clock, logger },
    );
    runtime.display.stop();
    await publishing?.finish();
    publishing = undefined;
    for (const line of formatBackfillStreams(streams)) print(`repair: ${line}`);
    if (stop.reason !== undefined) {
      print(stoppedLine('verify --repair', stop.reason, streams.reduce((n, s) => n + s.rows, 0)));
      return exitCodeFor(stop.reason);
    }
    const repaired = config.resources.filter((r) => mismatched.some((w) => w.resource === r.name));
    const again = await verifyWindows(repaired, projects, windowsOf(mismatched), deps);
    print('after repair:');
    for (const line of formatVerify(again)) print(line);
    const failed = streams.find((s) => s.outcome !== 'ok');
    if (again.mismatches > 0) {
      if (again.windows.some((w) => w.warehouse > w.api)) {
        print('note: the warehouse has rows the API no longer counts: records deleted at the source are not deleted in the warehouse (see README)');
      }
      return EXIT_CODES.mismatch;
    }
    return failed === undefined ? EXIT_CODES.ok : exitCodeFor(failed.error);
  } catch (error) {
    print(`verify FAILED: ${(error as Error).message}`);
    return exitCodeFor(error);
  } finally {
    stop.dispose();
    // A repair that failed or was stopped: publish what it committed.
    await publishing?.finish();
    await destination?.close().catch(() => undefined);
    await runtime.close().catch(() => undefined);
    await state?.close().catch(() => undefined);
  }
}

function windowsOf(mismatched: readonly VerifyWindow[]): (resource: string, project: string) => { fromMs: number; toMs: number }[] {
  return (resource, project) =>
    mismatched.filter((w) => w.resource === resource && w.project === project).map((w) => ({ fromMs: Date.parse(w.from), toMs: Date.parse(w.to) }));
}
