import type { TraceRead } from '../core/state-table.js';
import type { StateDocument, StreamState } from './document.js';

/**
 * The changes a batch collects: how state is written, not where it is committed. A checkpoint is
 * committed, with the rows it describes, in `StateStore.withBatch` (`store.ts`).
 */

/** A change to the state document. */
export type Change = (doc: StateDocument) => StateDocument;

/**
 * What writes state: the store itself (each write durable on its own), or the batch a write belongs
 * to (`StateStore.withBatch`: committed with that batch's rows, in the same transaction). Code that
 * records progress inside a batch (a unit's checkpoint, the traces a batch enqueues) is handed the
 * batch's writer and writes through it; there is no ambient "current batch".
 */
export interface StateWriter {
  /** Change one stream. */
  updateStream(key: string, change: (current: StreamState) => StreamState): Promise<void>;
  addProjects(slugs: Iterable<string>): Promise<void>;
  updateSection<T>(name: string, change: (current: T | undefined) => T): Promise<void>;
  /** Run `callback` once what this writer wrote so far is committed (at once for the store). */
  whenCommitted(callback: () => void): void;
  /** Append reads to the trace book (`_query_sync_children`), committed as this writer commits. */
  recordTraceReads(reads: readonly TraceRead[]): Promise<void>;
}

export const streamChange =
  (key: string, change: (current: StreamState) => StreamState): Change =>
  (doc) => ({ ...doc, streams: { ...doc.streams, [key]: change(doc.streams[key] ?? {}) } });

export const sectionChange =
  <T>(name: string, change: (current: T | undefined) => T): Change =>
  (doc) => ({ ...doc, sections: { ...doc.sections, [name]: change(doc.sections[name] as T | undefined) } });

/** The change that adds the slugs `doc` lacks; `undefined` when it has them all (nothing to write). */
export function projectsChange(doc: StateDocument, slugs: Iterable<string>): Change | undefined {
  const add = [...slugs].filter((s) => !doc.projects.includes(s));
  if (add.length === 0) return undefined;
  return (d) => ({ ...d, projects: [...new Set([...d.projects, ...add])].sort() });
}

/**
 * The state changes of one batch, collected while its `changes` run, then committed with its rows
 * by `StateStore.withBatch`; the callbacks wait for that commit. Closed once taken: a write after
 * that would belong to no commit, and is refused.
 */
export class StateBatch implements StateWriter {
  private readonly changes: Change[] = [];
  private readonly callbacks: (() => void)[] = [];
  private readonly reads: TraceRead[] = [];
  private closed = false;

  /** `current`: the store's state as last committed (a project already known is not written again). */
  constructor(private readonly current: () => StateDocument) {}

  updateStream(key: string, change: (current: StreamState) => StreamState): Promise<void> {
    return this.add(streamChange(key, change));
  }

  addProjects(slugs: Iterable<string>): Promise<void> {
    const change = projectsChange(this.current(), slugs);
    return change === undefined ? Promise.resolve() : this.add(change);
  }

  updateSection<T>(name: string, change: (current: T | undefined) => T): Promise<void> {
    return this.add(sectionChange(name, change));
  }

  whenCommitted(callback: () => void): void {
    this.open();
    this.callbacks.push(callback);
  }

  recordTraceReads(reads: readonly TraceRead[]): Promise<void> {
    try {
      this.open();
    } catch (error) {
      return Promise.reject(error as Error);
    }
    this.reads.push(...reads);
    return Promise.resolve();
  }

  /** The changes, trace reads and callbacks collected; the batch takes no more. */
  take(): {
    readonly changes: readonly Change[];
    readonly reads: readonly TraceRead[];
    readonly callbacks: readonly (() => void)[];
  } {
    this.open();
    this.closed = true;
    return { changes: this.changes, reads: this.reads, callbacks: this.callbacks };
  }

  private add(change: Change): Promise<void> {
    try {
      this.open();
    } catch (error) {
      return Promise.reject(error as Error);
    }
    this.changes.push(change);
    return Promise.resolve();
  }

  private open(): void {
    if (this.closed)
      throw new Error(
        'a state change was made through a batch already committed (a bug: it would belong to no commit)',
      );
  }
}
