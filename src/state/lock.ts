import { hostname } from 'node:os';
import { open, readFile, stat, unlink } from 'node:fs/promises';
import { StateError } from '../core/errors.js';
import type { Clock } from '../core/types.js';

interface LockOwner {
  readonly pid: number;
  readonly host: string;
  readonly since: string;
  readonly purpose: string;
}

export interface LockOptions {
  /** What holds the lock, for the message another run sees (`sync`, `backfill`). */
  readonly purpose: string;
  /** How long to wait for a held lock before failing. @default 0 (fail at once) */
  readonly waitMs?: number;
  /** Poll interval while waiting. @default 200 */
  readonly pollMs?: number;
  readonly clock: Clock;
}

/** A held lock; `release` is idempotent. */
export interface Lock {
  release(): Promise<void>;
}

/**
 * An exclusive lock file (`O_EXCL`). A lock left by a process that no longer exists on this host
 * (a kill -9) is taken over, so a crash never blocks the next scheduled run.
 */
export async function acquireLock(path: string, options: LockOptions): Promise<Lock> {
  const deadline = options.clock.now() + (options.waitMs ?? 0);
  for (;;) {
    const owner: LockOwner = { pid: process.pid, host: hostname(), since: new Date(options.clock.now()).toISOString(), purpose: options.purpose };
    try {
      const handle = await open(path, 'wx');
      await handle.writeFile(JSON.stringify(owner));
      await handle.sync();
      await handle.close();
      let released = false;
      return {
        release: async () => {
          if (released) return;
          released = true;
          await unlink(path).catch(() => undefined);
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new StateError(`cannot create lock file ${path}: ${(error as Error).message}`, { cause: error });
      }
    }
    const holder = await readOwner(path);
    if (holder === 'gone') continue; // released between our open and read: try again
    if (holder === undefined ? await olderThan(path, HALF_WRITTEN_GRACE_MS) : isStale(holder)) {
      // The holder is gone, or a crashed writer left the file half-written: take it over.
      await unlink(path).catch(() => undefined);
      continue;
    }
    if (holder !== undefined && options.clock.now() >= deadline) {
      throw new StateError(
        `${path} is held by ${holder.purpose} (pid ${holder.pid} on ${holder.host}, since ${holder.since}). ` +
          `Another run uses this state file: wait for it to finish (or pass --lock-wait), ` +
          `or, if that process no longer exists, delete ${path}.`,
      );
    }
    await options.clock.sleep(options.pollMs ?? 200);
  }
}

/** A lock file that does not parse may be one being written right now; give its writer this long. */
const HALF_WRITTEN_GRACE_MS = 5_000;

async function olderThan(path: string, ms: number): Promise<boolean> {
  try {
    return Date.now() - (await stat(path)).mtimeMs > ms;
  } catch {
    return true;
  }
}

async function readOwner(path: string): Promise<LockOwner | 'gone' | undefined> {
  try {
    const parsed = JSON.parse(await readFile(path, 'utf8')) as Partial<LockOwner>;
    if (typeof parsed.pid !== 'number' || typeof parsed.host !== 'string') return undefined;
    return { pid: parsed.pid, host: parsed.host, since: String(parsed.since), purpose: String(parsed.purpose ?? 'another run') };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'gone';
    return undefined;
  }
}

function isStale(owner: LockOwner): boolean {
  if (owner.host !== hostname()) return false; // cannot see processes of another host: trust it
  if (owner.pid === process.pid) return false;
  try {
    process.kill(owner.pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}
