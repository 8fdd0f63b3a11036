import { RESOURCES } from '../../connectors/index.js';
import type { ResourceDefinition } from '../../src/core/types.js';
import { runBackfill, type BackfillSummary } from '../../src/pipeline/backfill.js';
import { withPipeline, type PipelineTarget } from './harness.js';

export interface BackfillRun extends PipelineTarget {
  readonly fromMs: number;
  readonly toMs: number;
  readonly windowMs: number;
  readonly project?: string;
  readonly projectIds?: readonly string[];
  readonly resources?: readonly ResourceDefinition[];
  readonly concurrency?: number;
  readonly batchRows?: number;
}

/** One backfill, in-process, through the same parts the CLI wires (the `backfill` state lock). */
export function backfillOnce(opts: BackfillRun): Promise<BackfillSummary> {
  return withPipeline(opts, 'backfill', (deps) =>
    runBackfill(
      {
        resources: opts.resources ?? RESOURCES,
        project: opts.project,
        projectIds: opts.projectIds,
        fromMs: opts.fromMs,
        toMs: opts.toMs,
        windowMs: opts.windowMs,
        concurrency: opts.concurrency,
        batchRows: opts.batchRows,
      },
      deps,
    ),
  );
}
