import { mkdirSync } from 'node:fs';
import { open, readFile, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { StateError } from '../core/errors.js';
import type { Clock } from '../core/types.js';
import { acquireLock, type Lock } from './lock.js';
import { STATE_VERSION, validateState, type ValidateOptions } from './validate.js';

/** A walk in progress: the window being read and the cursor of the next page not yet stored. */
export interface PendingWindow {
  readonly from: string;
  readonly to: string;
  readonly cursor?: string;
}

/**
 * A window read as sub-windows at once (a split walk): the sub-windows not yet stored to the end,
 * each with the cursor of its next page once it has one. The mark moves to `to` when none is left.
 */
export interface SplitWindow {
  readonly from: string;
  readonly to: string;
  readonly parts: readonly PendingWindow[];
}

export interface LastRun {
  readonly at: string;
  readonly outcome: 'ok' | 'failed';
  readonly rows: number;
  readonly pages: number;
  readonly requests: number;
  readonly seconds: number;
  readonly error?: string;
}

/** State of one (resource, project scope) stream. */
export interface StreamState {
  /**
   * High-water mark: every record whose cursor value is below it was stored, as far as the API
   * showed it then. The next sync re-reads from `mark − lookback`.
   */
  readonly mark?: string;
  readonly pending?: PendingWindow;
  /** A split walk in progress; resumed before anything else. */
  readonly split?: SplitWindow;
  readonly lastRun?: LastRun;
  /**
   * Settle mark (resources that are enriched late): every record before it was read at least once
   * after it had settled. Lags the mark by `--settle`.
   */
  readonly settled?: string;
  /** A settle re-read in progress (window and the cursor of its next page). */
  readonly settlePending?: PendingWindow;
  /** How late records arrive (receipt − own time) in the last run that read any. */
  readonly lateness?: Lateness;
}

export interface Lateness {
  readonly at: string;
  readonly records: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export interface StateDocument {
  /** Format version (`STATE_VERSION`); an older file is migrated on read (see `validate.ts`). */
  readonly version: typeof STATE_VERSION;
  readonly streams: Readonly<Record<string, StreamState>>;
  /** Project slugs seen in all-projects reads, for endpoints that need one request per project. */
  readonly projects: readonly string[];
  /** Free-form sections owned by other commands (e.g. backfill ledgers), kept as they are. */
  readonly sections: Readonly<Record<string, unknown>>;
}

const EMPTY: StateDocument = { version: STATE_VERSION, streams: {}, projects: [], sections: {} };

export function streamKey(resource: string, scopeKey: string): string {
  return `${resource}:${scopeKey}`;
}

export interface StateStoreOptions {
  readonly clock: Clock;
  /** Purpose of the run lock, e.g. `sync`. One run per purpose per state file. */
  readonly purpose: string;
  /** Wait this long for another run holding the same lock. @default 0 */
  readonly lockWaitMs?: number;
  /**
   * Keep changes in memory only (a dry run loads nothing, so it must not move any mark).
   * @default false
   */
  readonly inMemory?: boolean;
  /** Told when a lease left by a killed run is taken over (for a log line). */
  readonly onLockTakeOver?: (message: string) => void;
  /** Told when the run lease is lost while held: the run should stop. */
  readonly onLockLost?: (error: Error) => void;
  /** Resource names a stream key may name (a state file naming another is refused). @default any */
  readonly resources?: readonly string[];
}

/**
 * The state file. Writes are atomic (temp file, fsync, rename, fsync of the folder). A run holds a
 * lock for its purpose for its whole life; each write re-reads the file under a short write lock and
 * changes only its own streams, so runs of different purposes (a sync and a backfill) can share it.
 */
export class StateStore {
  readonly path: string;
  private doc: StateDocument;
  private readonly options: StateStoreOptions;
  private readonly runLock: Lock;
  private chain: Promise<unknown> = Promise.resolve();

  private constructor(path: string, doc: StateDocument, options: StateStoreOptions, runLock: Lock) {
    this.path = path;
    this.doc = doc;
    this.options = options;
    this.runLock = runLock;
  }

  static async open(path: string, options: StateStoreOptions): Promise<StateStore> {
    mkdirSync(dirname(path), { recursive: true });
    const lock = await acquireLock(`${path}.${options.purpose}.lock`, {
      purpose: options.purpose,
      waitMs: options.lockWaitMs,
      clock: options.clock,
      onTakeOver: options.onLockTakeOver,
      onLost: options.onLockLost,
    });
    try {
      return new StateStore(path, await readState(path, options), options, lock);
    } catch (error) {
      await lock.release();
      throw error;
    }
  }

  /**
   * A store kept in memory only, over `doc`: a full refresh's streams live here until its tables
   * are swapped in, so the state file never describes rows that are only in a shadow table.
   */
  static memory(doc: StateDocument, clock: Clock): StateStore {
    return new StateStore('(memory)', doc, { clock, purpose: 'memory', inMemory: true }, { release: () => Promise.resolve() });
  }

  /** Read a state file without locking (for `status`). */
  static read(path: string, options: ValidateOptions = {}): Promise<StateDocument> {
    return readState(path, options);
  }

  get document(): StateDocument {
    return this.doc;
  }

  stream(key: string): StreamState {
    return this.doc.streams[key] ?? {};
  }

  /** Change one stream and write the file. Resolves once the new state is durable. */
  updateStream(key: string, change: (current: StreamState) => StreamState): Promise<void> {
    return this.write((doc) => ({ ...doc, streams: { ...doc.streams, [key]: change(doc.streams[key] ?? {}) } }));
  }

  addProjects(slugs: Iterable<string>): Promise<void> {
    const add = [...slugs].filter((s) => !this.doc.projects.includes(s));
    if (add.length === 0) return Promise.resolve();
    return this.write((doc) => ({ ...doc, projects: [...new Set([...doc.projects, ...add])].sort() }));
  }

  updateSection<T>(name: string, change: (current: T | undefined) => T): Promise<void> {
    return this.write((doc) => ({ ...doc, sections: { ...doc.sections, [name]: change(doc.sections[name] as T | undefined) } }));
  }

  async close(): Promise<void> {
    await this.chain.catch(() => undefined);
    await this.runLock.release();
  }

  private write(change: (doc: StateDocument) => StateDocument): Promise<void> {
    if (this.options.inMemory === true) {
      this.doc = change(this.doc);
      return Promise.resolve();
    }
    const next = this.chain.then(async () => {
      const lock = await acquireLock(`${this.path}.write.lock`, {
        purpose: 'state write',
        waitMs: 30_000,
        pollMs: 10,
        clock: this.options.clock,
        onTakeOver: this.options.onLockTakeOver,
      });
      try {
        // Re-read: another purpose's run may have written its own streams since.
        const latest = change(await readState(this.path, this.options));
        await writeAtomically(this.path, `${JSON.stringify(latest, null, 2)}\n`);
        this.doc = latest;
      } finally {
        await lock.release();
      }
    });
    this.chain = next.catch(() => undefined);
    return next;
  }
}

async function readState(path: string, options: ValidateOptions): Promise<StateDocument> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return EMPTY;
    throw new StateError(`cannot read state file ${path}: ${(error as Error).message}`, { cause: error });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new StateError(
      `state file ${path} is not valid query-sync state: not JSON (${(error as Error).message}). Nothing was changed; ` +
        `move it aside to start over (a full re-sync is safe: loads merge on the key).`,
      { cause: error },
    );
  }
  const checked = validateState(parsed, options);
  if ('where' in checked) {
    throw new StateError(
      `state file ${path}: ${checked.where}: ${checked.problem}. Nothing was changed and no stream was read; ` +
        `correct or remove that entry (or move the file aside to start over: a full re-sync is safe, loads merge on the key).`,
    );
  }
  return checked.doc as unknown as StateDocument;
}

/** Temp file in the same folder, fsync, rename over the target, fsync the folder. */
export async function writeAtomically(path: string, content: string): Promise<void> {
  const dir = dirname(path);
  const tmp = join(dir, `.${basename(path)}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`);
  const handle = await open(tmp, 'w');
  try {
    await handle.writeFile(content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(tmp, path);
  } catch (error) {
    await unlink(tmp).catch(() => undefined);
    throw error;
  }
  const dirHandle = await open(dir, 'r');
  try {
    await dirHandle.sync();
  } finally {
    await dirHandle.close();
  }
}
