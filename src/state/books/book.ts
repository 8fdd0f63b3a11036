import type { StateWriter } from '../batch.js';

/**
 * A book: how a producer of work units records a unit's progress in state. Every place a mark,
 * a cursor or a done window moves is a book in this folder: the sync's (`sync.ts`: mark, pending,
 * split parts, settle mark), the backfill ledger's (`ledger.ts`: running → done windows) and the
 * trace queue's (`traces.ts`: pending → done parent ids). A checkpoint is written through the
 * writer of the batch whose rows it describes (`StateStore.withBatch`), so it commits with them.
 */
export interface Book<U> {
  /** The unit's rows up to `nextCursor` are stored; `null`: it is done. Written through `state`, the batch's writer. */
  checkpoint(unit: U, nextCursor: string | null, state: StateWriter): Promise<void>;
  /** The server refused the unit's cursor: it restarts from its first page. */
  cursorRejected(unit: U): Promise<void>;
  /** A unit not yet read is replaced by `subs` that cover it (a re-split). */
  replace?(unit: U, subs: readonly { readonly fromMs: number; readonly toMs: number }[]): Promise<void>;
}
