import type { BackfillSummary } from '../../src/sync/backfill.js';
import type { BackfillTargets } from '../../src/sync/backfill.js';
import { BACKFILL_DEFAULTS, handedWarehouse, runInProcess, type PipelineTarget } from './harness.js';

/** A backfill through the harness: where it runs, its range and windows, and the backfill's settings (every resource unless set). */
export type BackfillRun = PipelineTarget &
  Partial<Omit<BackfillTargets, 'declared'>> &
  Pick<BackfillTargets, 'fromMs' | 'toMs' | 'windowMs'> & {
    readonly concurrency?: number;
    readonly batchRows?: number;
    readonly batchBytes?: number;
    readonly signal?: AbortSignal;
  };

/**
 * One backfill, in-process, through the run object as `query-sync backfill` runs it (`openRun`,
 * `run.backfill()`, `close`: the contract, the run's row in `_query_sync_runs`, the views, the spend
 * kept in state), under the `backfill` lock, on the warehouse the harness hands it (`syncOnce`'s:
 * the test's destination, else DuckDB at `dbPathOf(dir)`, no read copy published). Returns the run's
 * summary, its exit code and its output; a run that fails before its walk throws its FAILED line.
 */
export async function backfillOnce(
  opts: BackfillRun,
): Promise<BackfillSummary & { readonly code: number; readonly output: readonly string[] }> {
  const { config, destination } = await handedWarehouse(opts);
  const outcome = await runInProcess(
    'backfill',
    opts,
    {
      ...config,
      range: { fromMs: opts.fromMs, toMs: opts.toMs, windowMs: opts.windowMs },
      concurrency: opts.concurrency ?? BACKFILL_DEFAULTS.concurrency,
      batchRows: opts.batchRows ?? BACKFILL_DEFAULTS.batchRows,
      batchBytes: opts.batchBytes ?? BACKFILL_DEFAULTS.batchBytes,
    },
    { destination, signal: opts.signal },
  );
  // A backfill's step reports a backfill's summary (`run/backfill.ts`).
  const summary = outcome.summary as BackfillSummary | undefined;
  if (summary === undefined) throw new Error(outcome.output.join('\n'));
  return { ...summary, code: outcome.code, output: outcome.output };
}
