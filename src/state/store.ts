import { existsSync, mkdirSync } from 'node:fs';
import { open, readFile, rename, stat, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { StateError } from '../core/errors.js';
import { redact } from '../core/log.js';
import type { TraceRead, StateCommit, StateRow, StateTable } from '../core/state-table.js';
import type { Clock } from '../core/types.js';
import { projectsChange, sectionChange, StateBatch, streamChange, type Change, type StateWriter } from './batch.js';

export type { Change } from './batch.js';
import { acquireLock, fileLeases } from './leases/file.js';
import { WRITE_LEASE_MS, type LeaseProvider, type Lock } from './leases/lease.js';
import type { StateDocument, StreamState } from './document.js';
import { documentFromRows, rowsOfChange, rowsOfDocument } from './rows.js';
import { STATE_VERSION, validateState, type ValidateOptions } from './validate.js';

export type { StateWriter } from './batch.js';
export type { LastRun, Lateness, StateDocument, StreamState } from './document.js';

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
  /**
   * Secrets (the API key) never written: taken out of every state row and of the file as they are
   * serialized, whatever put them in the state (an error message echoing the key).
   */
  readonly secrets?: readonly string[];
  /** Resource names a stream key may name (a state file naming another is refused). @default any */
  readonly resources?: readonly string[];
  /**
   * Where the run lease lives: beside the state file (`fileLeases`, the default), or in the
   * warehouse (BigQuery: no file is shared between pods).
   */
  readonly leases?: LeaseProvider;
  /** Told once how state was restored or migrated (a log line). */
  readonly onNote?: (message: string) => void;
}

/**
 * The run's state: in the warehouse once `attach`ed (the `_query_sync_state` table, committed with
 * the batches it describes: see `core/state-table.ts`), and in the state file, which is then a cache
 * and an export, written after each warehouse commit. Without a warehouse (a dry run, a destination
 * that keeps no state) the file is the state, as before.
 *
 * File writes are atomic (temp file, fsync, rename, fsync of the folder). A run holds a lease for
 * its purpose for its whole life; each file write re-reads the file under a short write lock and
 * changes only its own streams, so runs of different purposes (a sync and a backfill) can share it.
 * Warehouse rows are keyed per stream and per section, so they can share the table the same way.
 */
export class StateStore implements StateWriter {
  readonly path: string;
  private doc: StateDocument;
  private readonly options: StateStoreOptions;
  private readonly runLock: Lock;
  private chain: Promise<unknown> = Promise.resolve();
  /** The export of the file not started yet, which commits landing now join (see `exportFile`). */
  private nextExport: { readonly changes: Change[]; readonly written: Promise<void> } | undefined;
  /** The warehouse that holds the state, once attached. */
  private warehouse: StateTable | undefined;
  /** The file as this store last wrote it (see `writeFile`). */
  private lastWritten: { readonly stamp: FileStamp; readonly doc: StateDocument } | undefined;
  /** Per state key, the landing of the commit in flight that writes it (see `commit`). */
  private readonly landing = new Map<string, Promise<void>>();
  /** Changes made afresh with every commit (`withEachCommit`). */
  private readonly riders: (() => Change)[] = [];

  private constructor(path: string, doc: StateDocument, options: StateStoreOptions, runLock: Lock) {
    this.path = path;
    this.doc = doc;
    this.options = options;
    this.runLock = runLock;
  }

  static async open(path: string, options: StateStoreOptions): Promise<StateStore> {
    mkdirSync(dirname(path), { recursive: true });
    const lock = await (options.leases ?? fileLeases).acquire(`${path}.${options.purpose}.lock`, {
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
    return new StateStore(
      '(memory)',
      doc,
      { clock, purpose: 'memory', inMemory: true },
      { release: () => Promise.resolve() },
    );
  }

  /** Read a state file without locking (for `status`). */
  static read(path: string, options: ValidateOptions = {}): Promise<StateDocument> {
    return readState(path, options);
  }

  /**
   * The state as a run would restore it, without a lease (`status`, `plan`, `verify`, `reset`):
   * the warehouse's when it has any, else the file's (see `attach`).
   */
  static async readWith(
    path: string,
    warehouse: StateTable | undefined,
    options: ValidateOptions = {},
  ): Promise<StateDocument> {
    const file = await readState(path, options);
    const rows = warehouse === undefined ? [] : await warehouse.readState();
    if (warehouse === undefined || rows.length === 0) return file;
    return validRows(rows, warehouse.stateLocation, options);
  }

  get document(): StateDocument {
    return this.doc;
  }

  stream(key: string): StreamState {
    return this.doc.streams[key] ?? {};
  }

  /**
   * Whether state commits with the rows in a warehouse (so the trace book, appended in the same
   * transactions, is kept there too); a dry run's in-memory store and a file-only store do not.
   */
  get inWarehouse(): boolean {
    return this.warehouse !== undefined && this.options.inMemory !== true;
  }

  /** Where the state is read from and committed to, for messages. */
  get location(): string {
    return this.warehouse?.stateLocation ?? `state file ${this.path}`;
  }

  /**
   * Keep the state in `warehouse` from now on. Which wins: the warehouse's state when it has any
   * (it is committed with the rows, so it is never behind them); else the state file's, migrated
   * into the warehouse once (a state file from a version that kept state only in the file). The
   * file is rewritten as an export of what won. Validation applies to both (a bad one: exit 4).
   */
  async attach(warehouse: StateTable): Promise<void> {
    const rows = await warehouse.readState();
    if (this.options.inMemory === true) {
      // A dry run starts from the same state, and writes nothing anywhere.
      if (rows.length > 0) this.doc = validRows(rows, warehouse.stateLocation, this.options);
      return;
    }
    const fileHasState = existsSync(this.path) && !isEmpty(this.doc);
    if (rows.length > 0) {
      const restored = validRows(rows, warehouse.stateLocation, this.options);
      // Compared as values: the file lists its streams in the order they were written, the table
      // by key, so the text of the two differed after every first run.
      const differs = !isDeepStrictEqual(restored, this.doc);
      if (fileHasState && differs) {
        this.options.onNote?.(
          `state: ${warehouse.stateLocation} and the state file ${this.path} differ; the warehouse wins (it is committed with the rows) and the file is rewritten from it`,
        );
      } else if (!fileHasState) {
        this.options.onNote?.(`state: restored from ${warehouse.stateLocation} (no state file at ${this.path})`);
      }
      this.doc = restored;
      this.warehouse = warehouse;
      if (differs) await this.exportFile(() => restored);
      return;
    }
    this.warehouse = warehouse;
    if (fileHasState) {
      // One transaction: the warehouse holds all of the file's state or none of it.
      const doc = this.doc;
      await warehouse.writeState({ rows: this.cleanRows(rowsOfDocument(doc)) });
      this.options.onNote?.(
        `state: migrated the state file ${this.path} into ${warehouse.stateLocation}; the warehouse's state wins from now on`,
      );
    }
  }

  /**
   * The commit path of a batch, in order: `changes` record the state that describes the batch
   * through the writer they are handed; then `write` writes the rows with that state as their
   * `StateCommit`, data computed now from the state as last committed (a warehouse writes both in
   * one transaction; `write` must hand it to the destination, with no rows if it has none); once
   * `write` resolves, the change is the store's state and the file's; then the callbacks the
   * changes left (`whenCommitted`) run. Without a warehouse the writer is the store itself, and runs
   * after the rows are written: each change a file write, so state is never ahead of rows.
   */
  async withBatch<T>(
    changes: (state: StateWriter) => Promise<void>,
    write: (state: StateCommit | undefined) => Promise<T>,
  ): Promise<T> {
    if (this.warehouse === undefined || this.options.inMemory === true) {
      const result = await write(undefined);
      await changes(this);
      return result;
    }
    // 1. The state of the batch, collected.
    const batch = new StateBatch(() => this.doc);
    await changes(batch);
    const { changes: recorded, reads, callbacks } = batch.take();
    // 2. The rows, with that state.
    const result =
      recorded.length === 0 && reads.length === 0 ? await write(undefined) : await this.commit(recorded, reads, write);
    // 3. What waited for the commit.
    for (const callback of callbacks) callback();
    return result;
  }

  /**
   * Make `change()` (asked anew each time) part of every later commit: each batch's, in its
   * transaction, and each write of its own. What a run must not lose to a kill -9 rides with the
   * rows it has stored (the rate-limit spend: `run/budget-carry.ts`), at no commit of its own.
   * Commits land in any order, so a rider's change states all it carries as of when it is asked
   * (an older one may land after a newer one).
   */
  withEachCommit(change: () => Change): void {
    this.riders.push(change);
  }

  /** The store's writes are durable when they resolve: `callback` runs at once. */
  whenCommitted(callback: () => void): void {
    callback();
  }

  /** Change one stream and write the file. Resolves once the new state is durable. */
  updateStream(key: string, change: (current: StreamState) => StreamState): Promise<void> {
    return this.write(streamChange(key, change), `stream:${key}`);
  }

  addProjects(slugs: Iterable<string>): Promise<void> {
    const change = projectsChange(this.doc, slugs);
    return change === undefined ? Promise.resolve() : this.write(change);
  }

  updateSection<T>(name: string, change: (current: T | undefined) => T): Promise<void> {
    return this.write(sectionChange(name, change), `section:${name}`);
  }

  /** Reads of the trace book, in a commit of their own (nowhere without a warehouse: nothing keeps the book). */
  recordTraceReads(reads: readonly TraceRead[]): Promise<void> {
    if (!this.inWarehouse || reads.length === 0) return Promise.resolve();
    return this.commitAlone([], reads);
  }

  async close(): Promise<void> {
    await this.chain.catch(() => undefined);
    await this.runLock.release();
  }

  /** Serialized state with the secrets taken out: the one sanitising step of what is stored. */
  private clean(text: string): string {
    return redact(text, this.options.secrets ?? []);
  }

  private cleanRows(rows: readonly StateRow[]): StateRow[] {
    return rows.map((row) => (row.value === null ? row : { ...row, value: this.clean(row.value) }));
  }

  /** Write `change`, which changes at most the row `key` (when given). */
  private write(change: Change, key?: string): Promise<void> {
    if (this.options.inMemory === true) {
      this.doc = change(this.doc);
      return Promise.resolve();
    }
    if (this.warehouse !== undefined) {
      // Skipped, it still resolves after the event loop's turn, as a commit would: a caller that
      // writes again at once (a loop of writes that change nothing) must not starve I/O.
      if (key !== undefined && this.leavesAsCommitted(change, key))
        return new Promise((resolve) => setImmediate(resolve));
      return this.commitAlone([change]);
    }
    const all = [change, ...this.riders.map((rider) => rider())];
    return this.writeFile(all.length === 1 ? change : (doc) => all.reduce((d, c) => c(d), doc));
  }

  /**
   * Whether `change` (of the row `key` only) leaves the state as committed, with no commit of that
   * row in flight: a stream's lateness or settle mark measured the same again. Such a write is
   * skipped, not sent as a commit of nothing (on BigQuery a query job and its polls); the riders'
   * changes go with the next commit, or the run's last.
   */
  private leavesAsCommitted(change: Change, key: string): boolean {
    if (this.landing.has(key) || isEmpty(this.doc)) return false;
    return rowsOfChange(this.doc, change(this.doc)).every((row) => row.key === 'version');
  }

  private async commitAlone(changes: readonly Change[], reads: readonly TraceRead[] = []): Promise<void> {
    const warehouse = this.warehouse;
    if (warehouse === undefined) throw new Error('unreachable: commitAlone without a warehouse');
    await this.commit(changes, reads, (commit) => warehouse.writeState(commit));
  }

  /**
   * One commit of `changes`, with the riders' (asked as it leaves): its rows computed from the state
   * as last committed, handed to `send` (the destination's transaction), and taken into the store's
   * state, then the file's, once `send` resolves; nothing is taken in when it rejects.
   *
   * Commits of different keys run at once and land in any order. Of one key, one commit is in
   * flight at a time: a commit whose rows write a key another commit in flight writes waits, before
   * it is handed to the destination, for that one to land, then computes its rows again. Its rows so
   * hold every change committed before it and none still in flight, so the warehouse's state is
   * never ahead of its rows, even across keys (a batch's checkpoint and the traces it enqueued
   * commit together, and a later commit of either key holds both), and a failed commit leaves
   * nothing for the next ones to carry. The riders' keys are not waited for (see `withEachCommit`).
   */
  private async commit<T>(
    changes: readonly Change[],
    reads: readonly TraceRead[],
    send: (commit: StateCommit) => Promise<T>,
  ): Promise<T> {
    let base: StateDocument;
    let own: StateDocument;
    let rows: StateRow[];
    for (;;) {
      base = this.doc;
      own = changes.reduce((doc, change) => change(doc), base);
      rows = rowsOfChange(base, own);
      const busy = rows.flatMap((row) => this.landing.get(row.key) ?? []);
      if (busy.length === 0) break;
      await Promise.all(busy);
    }
    const ridden = this.riders.map((rider) => rider());
    const after = ridden.reduce((doc, change) => change(doc), own);
    const all = [...changes, ...ridden];
    const keys = rows.map((row) => row.key).filter((key) => key !== 'version');
    if (ridden.length > 0) {
      const byKey = new Map(rows.map((row) => [row.key, row]));
      for (const row of rowsOfChange(own, after)) byKey.set(row.key, row);
      rows = [...byKey.values()];
    }
    let land = (): void => undefined;
    const landed = new Promise<void>((resolve) => {
      land = resolve;
    });
    for (const key of keys) this.landing.set(key, landed);
    const release = (): void => {
      for (const key of keys) if (this.landing.get(key) === landed) this.landing.delete(key);
      land();
    };
    let result: T;
    try {
      result = await send({ rows: this.cleanRows(rows), ...(reads.length === 0 ? {} : { traceReads: reads }) });
    } catch (error) {
      release();
      throw error;
    }
    // Its keys were its alone since `base`; others may have moved: its changes go onto the state as it is now.
    this.doc = this.doc === base ? after : all.reduce((doc, change) => change(doc), this.doc);
    release();
    await this.exportFile((doc) => all.reduce((d, change) => change(d), doc));
    return result;
  }

  /**
   * The file as a cache and export of the warehouse's state: a failure to write it is told, not
   * fatal. Commits that land while a write of the file is under way share the next one (their
   * changes in landing order): one write and its fsyncs for all of them, where each commit's own
   * write would queue behind the others.
   */
  private exportFile(change: Change): Promise<void> {
    const open = this.nextExport;
    if (open !== undefined) {
      open.changes.push(change);
      return open.written;
    }
    const changes = [change];
    const written = this.chain.then(async () => {
      // From here on, a commit that lands waits for the write after this one.
      this.nextExport = undefined;
      try {
        await this.writeFile((doc) => changes.reduce((d, c) => c(d), doc), false);
      } catch (error) {
        this.options.onNote?.(
          `state: could not update the state file ${this.path} (the warehouse holds the state; the file is only a copy): ${(error as Error).message}`,
        );
      }
    });
    this.nextExport = { changes, written };
    return written;
  }

  private writeFile(change: Change, keepDoc = true): Promise<void> {
    const next = this.chain.then(async () => {
      const lock = await acquireLock(`${this.path}.write.lock`, {
        purpose: 'state write',
        leaseMs: WRITE_LEASE_MS,
        waitMs: 30_000,
        pollMs: 10,
        clock: this.options.clock,
        onTakeOver: this.options.onLockTakeOver,
      });
      try {
        // Re-read: another purpose's run may have written its own streams since. Every writer
        // replaces the file by rename, so the file still being the one this store wrote last (same
        // inode, size and time) means no one did: what it holds is what was written, and a long
        // backfill's ledger is not read back and validated after every window.
        const mine = this.lastWritten;
        const now = mine === undefined ? undefined : await fileStamp(this.path);
        const current =
          mine !== undefined && now !== undefined && sameStamp(mine.stamp, now)
            ? mine.doc
            : await readState(this.path, this.options);
        const latest = change(current);
        await writeAtomically(this.path, this.clean(`${JSON.stringify(latest, null, 2)}\n`));
        const stamp = await fileStamp(this.path);
        this.lastWritten = stamp === undefined ? undefined : { stamp, doc: latest };
        if (keepDoc) this.doc = latest;
      } finally {
        await lock.release();
      }
    });
    this.chain = next.catch(() => undefined);
    return next;
  }
}

/** The document held by state rows, checked as a state file is (a bad entry: exit 4). */
function validRows(
  rows: Parameters<typeof documentFromRows>[0],
  where: string,
  options: ValidateOptions,
): StateDocument {
  const checked = validateState(documentFromRows(rows, where), options);
  if ('where' in checked) {
    throw new StateError(
      `${where}: ${checked.where}: ${checked.problem}. Nothing was changed and no stream was read; ` +
        `correct or delete that row (deleting the table starts over: a full re-sync is safe, loads merge on the key).`,
    );
  }
  return checked.doc as unknown as StateDocument;
}

/** Whether a document holds no state at all. */
export function isEmpty(doc: StateDocument): boolean {
  return Object.keys(doc.streams).length === 0 && doc.projects.length === 0 && Object.keys(doc.sections).length === 0;
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

/** What tells one version of a file from another that replaced it. */
interface FileStamp {
  readonly ino: number;
  readonly size: number;
  readonly mtimeNs: bigint;
}

async function fileStamp(path: string): Promise<FileStamp | undefined> {
  try {
    const s = await stat(path, { bigint: true });
    return { ino: Number(s.ino), size: Number(s.size), mtimeNs: s.mtimeNs };
  } catch {
    return undefined;
  }
}

const sameStamp = (a: FileStamp, b: FileStamp): boolean =>
  a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs;

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
