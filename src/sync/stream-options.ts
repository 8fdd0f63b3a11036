import type { Logger } from '../core/log.js';
import type { Clock } from '../core/types.js';
import type { ApiClient } from '../http/client.js';
import type { RequestMemo } from '../extract/memo.js';
import type { Destination } from '../load/destination.js';
import type { StateStore } from '../state/store.js';
import type { Capabilities } from './capabilities.js';
import type { SplitLimits } from './split/plan.js';
import type { WalkOptions } from './walk.js';

/** What a sync stream (`stream.ts`) is given: its services, and how it reads. */

export interface StreamDeps {
  readonly client: ApiClient;
  readonly destination: Destination;
  readonly state: StateStore;
  readonly clock: Clock;
  readonly logger: Logger;
  /** What this server offers (one book per run, shared by its streams); a new one over `state` when absent. */
  readonly capabilities?: Capabilities;
  /** The run's memo of aggregate answers (`extract/memo.ts`), shared by its streams; absent: each asks. */
  readonly aggregates?: RequestMemo;
}

export interface StreamOptions {
  /** End of every window this run reads (exclusive): the run's start. */
  readonly runStartMs: number;
  /** How far before the mark each sync re-reads, for late-indexed records. */
  readonly lookbackMs: number;
  /** Oldest instant a first sync reads. @default 0 (all history) */
  readonly startMs?: number;
  /** Rows buffered before a write + checkpoint. */
  readonly batchRows: number;
  /** Text buffered before a write (see `WalkOptions.batchBytes`). */
  readonly batchBytes: number;
  /** Stop once this many rows are written (a dry run's sample). */
  readonly sampleRows?: number;
  /** `_synced_at` of this run. */
  readonly syncedAt: string;
  readonly signal?: AbortSignal;
  /** Called with project slugs found in `project_id` of all-projects reads. */
  readonly onProjects?: (slugs: ReadonlySet<string>) => void;
  /** Called after each page (progress display). */
  readonly onPage?: WalkOptions['onPage'];
  /**
   * Re-read each window of a resource that `settles` once it is this old (late enrichment); 0 turns
   * the settle pass off. @default 0
   */
  readonly settleMs?: number;
  /** Called with each stored batch before its checkpoint (per-parent children enqueue from it). */
  readonly onStored?: WalkOptions['onStored'];
  /**
   * Most sub-windows of one large window walked at once (split walks, `sync/split/plan.ts`); the controller
   * finds how many help at the latency seen. 1 reads every window in one walk.
   */
  readonly concurrency: number;
  /** The configured rate limits (`--max-rps`, `--max-rpm`): a split is sized by them. */
  readonly limits: SplitLimits;
}
