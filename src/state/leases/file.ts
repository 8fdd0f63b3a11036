import { randomUUID } from 'node:crypto';
import { readFileSync, readlinkSync, type Stats } from 'node:fs';
import { readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import lockfile from 'proper-lockfile';
import { StateError } from '../../core/errors.js';

/**
 * A run's exclusive hold on a state file or a warehouse: a lease with a heartbeat (this protocol).
 *
 * The holder renews the lease every `LEASE_MS / 3`; anyone may take over a lease not renewed for
 * `LEASE_MS`, whatever host or pid left it, so a killed container never blocks the next run. No
 * decision rests on "is that pid alive" alone, which zombies and pid reuse in containers (every
 * container's first process is pid 1) get wrong. One exception makes a kill -9 on one machine
 * cheap: when the holder ran on this host and in this pid namespace and its process is gone, a
 * zombie, or a newer process with the same pid (its start time differs), the lease is taken over
 * at once instead of after expiry.
 *
 * `FileLeases` keeps the lease beside a file with `proper-lockfile` (an atomic `mkdir` whose mtime
 * is the heartbeat: the library renews it, through its `update` option, every `LEASE_MS / 3`, and
 * reports a compromise when someone else touched it). BigQuery keeps its lease in a table
 * (`bigquery.ts`: insert-if-absent, renew `expires_at`, take over when `expires_at` < now): the
 * callers only see this interface.
 */

import { LEASE_MS, type LeaseOwner, type LeaseProvider, type Lock, type LockOptions } from './lease.js';

/** Leases as folders beside files (`<name>` is the folder, `<name>.owner.json` says who holds it). */
export const fileLeases: LeaseProvider = { acquire: (name, options) => acquireLock(name, options) };

/** Take the lease at `path` (a folder), waiting up to `waitMs` for its holder. */
export async function acquireLock(path: string, options: LockOptions): Promise<Lock> {
  const deadline = options.clock.now() + (options.waitMs ?? 0);
  const leaseMs = options.leaseMs ?? LEASE_MS;
  for (;;) {
    const seen = await inspect(path, leaseMs);
    if (seen !== undefined && seen.takeOver !== undefined) {
      // Stale: remove it, unless it changed hands since we looked (then look again).
      const again = await inspect(path, leaseMs);
      if (again?.inode === seen.inode && again.takeOver !== undefined) {
        await rm(path, { recursive: true, force: true });
        options.onTakeOver?.(takeOverMessage(path, seen), seen.owner);
      }
      continue;
    }
    if (seen === undefined) {
      const lock = await tryLock(path, options);
      if (lock !== undefined) return lock;
      continue; // someone else got it between our look and our mkdir
    }
    if (options.clock.now() >= deadline) {
      const o = seen.owner;
      const who = o === undefined ? 'another run' : `${o.purpose} (pid ${o.pid} on ${o.host}, since ${o.since})`;
      throw new StateError(
        `${path} is held by ${who}; its lease was renewed ${Math.round(seen.ageMs / 1000)} s ago and expires in ` +
          `${Math.max(0, Math.ceil((seen.leaseMs - seen.ageMs) / 1000))} s unless renewed. Another run uses this state: ` +
          `wait for it to finish (or pass --lock-wait, e.g. --lock-wait 10m). A run that was killed leaves a lease that ` +
          `is taken over automatically ${seen.leaseMs / 1000} s after its last renewal.`,
      );
    }
    await options.clock.sleep(Math.min(options.pollMs ?? 200, Math.max(1, deadline - options.clock.now())));
  }
}

interface Seen {
  readonly inode: number;
  readonly ageMs: number;
  /** Its length: its owner record's, or (no record) the one the caller uses for this lease. */
  readonly leaseMs: number;
  readonly owner: LeaseOwner | undefined;
  /** Why it may be taken over now, or `undefined` while it is live. */
  readonly takeOver: 'expired' | 'holder-dead' | undefined;
}

async function inspect(path: string, callerLeaseMs: number): Promise<Seen | undefined> {
  let info: Stats;
  try {
    info = await stat(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new StateError(`cannot read lease ${path}: ${(error as Error).message}`, { cause: error });
  }
  const ageMs = Date.now() - info.mtimeMs;
  let owner = await readOwner(info.isDirectory() ? ownerPath(path) : path);
  // An owner record written for an earlier lease of the same name says nothing about this one.
  if (
    info.isDirectory() &&
    owner !== undefined &&
    (owner.inode !== info.ino || (owner.born !== undefined && owner.born !== info.birthtimeMs))
  )
    owner = undefined;
  // A file (not a folder) is a lock left by query-sync before leases: judged by its age alone.
  const leaseMs = owner?.leaseMs ?? callerLeaseMs;
  const takeOver = ageMs > leaseMs ? 'expired' : owner !== undefined && holderIsDead(owner) ? 'holder-dead' : undefined;
  return { inode: info.ino, ageMs, leaseMs, owner, takeOver };
}

function takeOverMessage(path: string, seen: Seen): string {
  const o = seen.owner;
  const who =
    o === undefined ? 'a run that left no owner record' : `${o.purpose} (pid ${o.pid} on ${o.host}, since ${o.since})`;
  const why =
    seen.takeOver === 'expired'
      ? `its lease expired (last renewed ${Math.round(seen.ageMs / 1000)} s ago, lease ${seen.leaseMs / 1000} s)`
      : 'its process on this host no longer runs (gone, a zombie, or its pid reused)';
  return `took over the lease ${path} from ${who}: ${why}`;
}

async function tryLock(path: string, options: LockOptions): Promise<Lock | undefined> {
  let lost = false;
  let releaseLease: () => Promise<void>;
  try {
    releaseLease = await lockfile.lock(path, {
      lockfilePath: path,
      realpath: false,
      stale: options.leaseMs ?? LEASE_MS,
      update: (options.leaseMs ?? LEASE_MS) / 3,
      retries: 0,
      onCompromised: (error: Error) => {
        lost = true;
        options.onLost?.(new StateError(`lost the lease ${path} while running: ${error.message}`, { cause: error }));
      },
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ELOCKED') return undefined;
    throw new StateError(`cannot create lease ${path}: ${(error as Error).message}`, { cause: error });
  }
  const owner: LeaseOwner = {
    ...SELF,
    id: randomUUID(),
    purpose: options.purpose,
    since: new Date(options.clock.now()).toISOString(),
    leaseMs: options.leaseMs ?? LEASE_MS,
    ...(await folderIdentity(path)),
  };
  // Written whole then renamed, so a reader never sees half a record.
  const tmp = `${ownerPath(path)}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(owner)}\n`)
    .then(() => rename(tmp, ownerPath(path)))
    .catch(() => undefined);
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      if (lost) return; // another run holds it now: leave its lease alone
      // The record goes first and our id last, so no one sees our record without us holding it.
      await rm(ownerPath(path), { force: true });
      await releaseLease().catch(() => undefined);
    },
  };
}

async function folderIdentity(path: string): Promise<{ inode: number; born: number }> {
  const info = await stat(path);
  return { inode: info.ino, born: info.birthtimeMs };
}

function ownerPath(path: string): string {
  return `${path}.owner.json`;
}

async function readOwner(path: string): Promise<LeaseOwner | undefined> {
  try {
    const parsed = JSON.parse(await readFile(path, 'utf8')) as Partial<LeaseOwner>;
    if (typeof parsed.pid !== 'number' || typeof parsed.host !== 'string') return undefined;
    return {
      id: String(parsed.id ?? ''),
      purpose: String(parsed.purpose ?? 'another run'),
      host: parsed.host,
      pidNamespace: parsed.pidNamespace,
      pid: parsed.pid,
      startTicks: parsed.startTicks,
      since: String(parsed.since),
      // A lease is judged by the length its record states: one that is not a positive number (a
      // damaged record) falls back to the run lease, never to a lease that cannot expire.
      leaseMs:
        typeof parsed.leaseMs === 'number' && Number.isFinite(parsed.leaseMs) && parsed.leaseMs > 0
          ? parsed.leaseMs
          : LEASE_MS,
      inode: parsed.inode,
      born: parsed.born,
    };
  } catch {
    return undefined;
  }
}

/** This process, as an owner record describes it. */
const SELF = { host: hostname(), pidNamespace: pidNamespace(), pid: process.pid, startTicks: ownStartTicks() };

function ownStartTicks(): string | undefined {
  const own = procStat(process.pid);
  return typeof own === 'object' ? own.startTicks : undefined;
}

/**
 * Whether a holder on this host and pid namespace certainly no longer runs. Anything we cannot see
 * (another host, another namespace, no /proc) is "alive": the lease's expiry decides then.
 */
export function holderIsDead(
  owner: Pick<LeaseOwner, 'host' | 'pidNamespace' | 'pid' | 'startTicks'> & { readonly id?: string },
): boolean {
  if (owner.host !== SELF.host || owner.pidNamespace !== SELF.pidNamespace) return false;
  // Our own pid: a lease this process holds now (the record names our start time: only a release
  // ends it, or its expiry if it leaked), or one a former process with our pid left (a restarted
  // container's pid 1: another start time, or a record from before ids). No process-wide list of
  // held leases is needed: the record says which process wrote it.
  if (owner.pid === process.pid) return owner.id === undefined || owner.startTicks !== SELF.startTicks;
  const proc = procStat(owner.pid);
  if (proc === 'gone') return true;
  if (proc === undefined) return false;
  if (proc.state === 'Z' || proc.state === 'X') return true; // killed, not yet reaped
  return owner.startTicks !== undefined && proc.startTicks !== owner.startTicks; // pid reused
}

function procStat(pid: number): { state: string; startTicks: string } | 'gone' | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ESRCH') return existsProc() ? 'gone' : undefined;
    return undefined;
  }
  // "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  const startTicks = fields[19];
  return state === undefined || startTicks === undefined ? undefined : { state, startTicks };
}

function existsProc(): boolean {
  try {
    readFileSync('/proc/self/stat');
    return true;
  } catch {
    return false;
  }
}

function pidNamespace(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}
