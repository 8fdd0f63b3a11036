import {
  runBackfill,
  type BackfillSettings,
  type BackfillSummary,
  type BackfillTargets,
} from '../../src/sync/backfill.js';
import { engineRun } from '../../src/sync/context.js';
import { BACKFILL_DEFAULTS, runOptionsOf, withPipeline, type PipelineTarget } from './harness.js';

/** A backfill's options in one object, as a test names them: what it reads, its settings, its run id and stop. */
type BackfillRunOptions = BackfillTargets &
  BackfillSettings & { readonly runId?: string; readonly signal?: AbortSignal };

/** A backfill through the harness: where it runs, its range and windows, and any other backfill option (every resource unless set). */
export type BackfillRun = PipelineTarget &
  Partial<BackfillRunOptions> &
  Pick<BackfillRunOptions, 'fromMs' | 'toMs' | 'windowMs'>;

/** One backfill, in-process, through the same parts the CLI wires (the `backfill` state lock). */
export function backfillOnce(opts: BackfillRun): Promise<BackfillSummary> {
  return withPipeline(opts, 'backfill', (deps) => {
    const { resources, declared, project, projectIds, fromMs, toMs, windowMs, runId, signal, ...settings } = {
      ...BACKFILL_DEFAULTS,
      ...runOptionsOf(opts),
    };
    return runBackfill(
      {
        resources,
        project,
        fromMs,
        toMs,
        windowMs,
        ...(declared === undefined ? {} : { declared }),
        ...(projectIds === undefined ? {} : { projectIds }),
      },
      { ...engineRun(deps, { runId, signal }), settings },
    );
  });
}
