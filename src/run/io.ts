import type { Clock } from '../core/types.js';
import type { PublisherHooks } from '../publish/publisher.js';

/** What a command is given besides its config: where its output goes, its clock and its stop signal. */
export interface CommandIo {
  /** Command output (summaries): stdout by default. Logs go to stderr. */
  readonly print: (line: string) => void;
  readonly clock?: Clock;
  readonly signal?: AbortSignal;
  /** Points of `query-sync publish` a test stops the process at (`cli/main.ts` reads them from its environment). */
  readonly publishHooks?: PublisherHooks;
}
