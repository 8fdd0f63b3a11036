import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../../../src/core/clock.js';
import { StateError } from '../../../../src/core/errors.js';
import { acquireLock, holderIsDead } from '../../../../src/state/leases/file.js';
import { LEASE_MS, type LeaseOwner } from '../../../../src/state/leases/lease.js';
import { leaveLease } from '../../../fakes/lease.js';
import { tempDir } from '../../../fakes/tmp.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
function leasePath(): string {
  const d = tempDir();
  cleanups.push(() => d.cleanup());
  return join(d.dir, 'state.json.sync.lock');
}

describe('the run lease', () => {
  it('a live lease of another host is refused with who holds it and when it expires; after its expiry it is taken over, with a log line', async () => {
    const path = leasePath();
    leaveLease(path, { host: 'pod-7f9c', pid: 1, renewedMsAgo: 2_000 });
    const error = await acquireLock(path, { purpose: 'sync', clock: systemClock }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StateError);
    expect((error as Error).message).toMatch(
      /held by sync \(pid 1 on pod-7f9c, since .*\).*renewed 2 s ago and expires in 28 s.*--lock-wait/,
    );

    // The other host's run died: its heartbeat stopped more than a lease ago.
    leaveLeaseAgain(path, { host: 'pod-7f9c', pid: 1, renewedMsAgo: LEASE_MS + 1_000 });
    const logged: string[] = [];
    const lock = await acquireLock(path, { purpose: 'sync', clock: systemClock, onTakeOver: (m) => logged.push(m) });
    expect(logged).toEqual([
      expect.stringMatching(
        /took over the lease .* from sync \(pid 1 on pod-7f9c.*its lease expired \(last renewed 31 s ago, lease 30 s\)/,
      ),
    ]);
    const owner = JSON.parse(readFileSync(`${path}.owner.json`, 'utf8')) as LeaseOwner;
    expect(owner.pid).toBe(process.pid);
    expect(owner.inode).toBe(statSync(path).ino);
    await lock.release();
    expect(existsSync(path)).toBe(false);
    expect(existsSync(`${path}.owner.json`)).toBe(false);
  });

  it('a lease whose owner record states no usable length is judged by the run lease: it still expires', async () => {
    const path = leasePath();
    leaveLease(path, {
      host: 'pod-7f9c',
      pid: 1,
      renewedMsAgo: LEASE_MS + 1_000,
      leaseMs: 'forever' as unknown as number,
    });
    const logged: string[] = [];
    const lock = await acquireLock(path, { purpose: 'sync', clock: systemClock, onTakeOver: (m) => logged.push(m) });
    expect(logged).toEqual([expect.stringMatching(/its lease expired \(last renewed 31 s ago, lease 30 s\)/)]);
    await lock.release();
  });

  it('a second run waits with --lock-wait and gets the lease once the first releases it', async () => {
    const path = leasePath();
    const first = await acquireLock(path, { purpose: 'sync', clock: systemClock });
    setTimeout(() => void first.release(), 300);
    const second = await acquireLock(path, { purpose: 'sync', clock: systemClock, waitMs: 10_000, pollMs: 20 });
    expect(JSON.parse(readFileSync(`${path}.owner.json`, 'utf8'))).toMatchObject({ pid: process.pid, purpose: 'sync' });
    await second.release();
  });

  it('a holder that is a zombie (killed, not yet reaped) counts as dead: the next run starts at once', async () => {
    // `sleep 2` is a child of the shell, which then becomes `sleep 120` and never reaps it. The child
    // must outlive the shell's exec: a `sleep 0` that had already exited was now and then reaped by
    // the shell before it exec'd (once in a CI run: its /proc entry was gone).
    const parent = spawn('sh', ['-c', 'sleep 2 & echo $!; exec sleep 120'], { stdio: ['ignore', 'pipe', 'ignore'] });
    cleanups.push(() => parent.kill('SIGKILL'));
    const zombiePid = await new Promise<number>((resolve) =>
      parent.stdout.once('data', (b: Buffer) => resolve(Number(b.toString().trim()))),
    );
    let state = '';
    // Until the child has run and exited: on a loaded machine that took more than the 2 s this
    // once allowed. The deadline is a net for a hang, not a bound on the time.
    for (const deadline = Date.now() + 60_000; Date.now() < deadline && state !== 'Z'; ) {
      state = readFileSync(`/proc/${zombiePid}/stat`, 'utf8').split(') ')[1]?.[0] ?? '';
      if (state !== 'Z') await new Promise((r) => setTimeout(r, 20));
    }
    expect(state, 'the child is a zombie').toBe('Z');
    expect(() => process.kill(zombiePid, 0), 'kill(pid, 0) believes it alive').not.toThrow();

    const path = leasePath();
    leaveLease(path, { pid: zombiePid });
    const logged: string[] = [];
    const lock = await acquireLock(path, { purpose: 'sync', clock: systemClock, onTakeOver: (m) => logged.push(m) });
    expect(logged[0]).toMatch(/no longer runs \(gone, a zombie, or its pid reused\)/);
    await lock.release();
  });

  it('a live holder on this host keeps its lease; the same pid with another start time (pid reused) does not', () => {
    const alive = { host: hostname(), pidNamespace: nsOfThis(), pid: process.ppid, startTicks: ticksOf(process.ppid) };
    expect(holderIsDead(alive)).toBe(false);
    expect(holderIsDead({ ...alive, startTicks: '1' })).toBe(true);
    // Our own pid in a record we did not write: a former process (a container restarted as pid 1).
    expect(holderIsDead({ ...alive, pid: process.pid })).toBe(true);
    // Another host or another pid namespace (another container): only the expiry decides.
    expect(holderIsDead({ ...alive, startTicks: '1', host: 'elsewhere' })).toBe(false);
    expect(holderIsDead({ ...alive, startTicks: '1', pidNamespace: 'pid:[1]' })).toBe(false);
    const exited = Number(
      spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString(),
    );
    expect(holderIsDead({ ...alive, pid: exited, startTicks: undefined })).toBe(true);
  });

  it('the holder renews its lease; when another run took it (the heartbeat finds it changed), the holder is told it lost it', async () => {
    const path = leasePath();
    const lost: Error[] = [];
    const lock = await acquireLock(path, {
      purpose: 'sync',
      clock: systemClock,
      leaseMs: 3_000,
      onLost: (e) => lost.push(e),
    });
    const acquired = statSync(path).mtimeMs;
    // The heartbeat (every second here) is awaited, not a fixed sleep: a loaded machine delays timers.
    for (let i = 0; i < 200 && statSync(path).mtimeMs <= acquired; i++) await new Promise((r) => setTimeout(r, 50));
    expect(statSync(path).mtimeMs, 'renewed by the heartbeat').toBeGreaterThan(acquired);
    expect(lost).toEqual([]);
    // Another run, believing it expired, takes it over.
    spawnSync('rm', ['-rf', path]);
    leaveLease(path, { host: 'elsewhere', pid: 7, renewedMsAgo: 5_000 }); // an mtime the holder never wrote
    for (let i = 0; i < 60 && lost.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(lost[0]).toBeInstanceOf(StateError);
    expect(lost[0]?.message).toMatch(/lost the lease .* while running/);
    await lock.release(); // leaves the other run's lease alone
    expect(existsSync(path)).toBe(true);
  });

  it('a lease this process holds is live to another taker in the same process (its record names our pid and start time)', async () => {
    const path = leasePath();
    const held = await acquireLock(path, { purpose: 'sync', clock: systemClock });
    cleanups.push(() => held.release());
    const record = JSON.parse(readFileSync(`${path}.owner.json`, 'utf8')) as LeaseOwner;
    expect(record).toMatchObject({ pid: process.pid, startTicks: ticksOf(process.pid) });
    expect(holderIsDead(record)).toBe(false);
    const second = await acquireLock(path, { purpose: 'backfill', clock: systemClock }).catch((e: unknown) => e);
    expect(second).toBeInstanceOf(StateError);
    expect((second as Error).message).toMatch(/is held by sync \(pid \d+/);
    // Released: the next taker gets it at once.
    await held.release();
    const third = await acquireLock(path, { purpose: 'backfill', clock: systemClock });
    await third.release();
  });

  it('a lease whose owner record belongs to an earlier lease (another inode) is judged by its age only', async () => {
    const path = leasePath();
    leaveLease(path, { pid: 999_999, inode: 1 });
    await expect(acquireLock(path, { purpose: 'sync', clock: systemClock })).rejects.toThrow(/held by another run/);
  });
});

function leaveLeaseAgain(path: string, owner: Parameters<typeof leaveLease>[1]): void {
  spawnSync('rm', ['-rf', path, `${path}.owner.json`]);
  leaveLease(path, owner);
}

function nsOfThis(): string | undefined {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return undefined;
  }
}

function ticksOf(pid: number): string | undefined {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[19];
}
