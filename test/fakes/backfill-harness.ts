import { runBackfill, type BackfillOptions, type BackfillSummary } from '../../src/sync/backfill.js';
import { BACKFILL_DEFAULTS, runOptionsOf, withPipeline, type PipelineTarget } from './harness.js';

/** A backfill through the harness: where it runs, its range and windows, and any other backfill option (every resource unless set). */
export type BackfillRun = PipelineTarget &
  Partial<BackfillOptions> &
  Pick<BackfillOptions, 'fromMs' | 'toMs' | 'windowMs'>;

/** One backfill, in-process, through the same parts the CLI wires (the `backfill` state lock). */
export function backfillOnce(opts: BackfillRun): Promise<BackfillSummary> {
  return withPipeline(opts, 'backfill', (deps) => runBackfill({ ...BACKFILL_DEFAULTS, ...runOptionsOf(opts) }, deps));
}
