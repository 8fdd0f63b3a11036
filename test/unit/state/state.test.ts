import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/core/clock.js';
import { StateError } from '../../../src/core/errors.js';
import { keepStateIn } from '../../../src/run/state-home.js';
import { DuckDbDestination } from '../../../src/load/duckdb/destination.js';
import { acquireLock } from '../../../src/state/leases/file.js';
import { WRITE_LEASE_MS } from '../../../src/state/leases/lease.js';
import { StateStore } from '../../../src/state/store.js';
import { leaveLease } from '../../fakes/lease.js';
import { tempDir } from '../../fakes/tmp.js';

const dirs: Array<{ cleanup(): void }> = [];
afterEach(() => {
  for (const d of dirs.splice(0)) d.cleanup();
});
function statePath(): string {
  const d = tempDir();
  dirs.push(d);
  return join(d.dir, 'sub', 'state.json');
}

describe('StateStore', () => {
  it('writes streams atomically and reads them back', async () => {
    const path = statePath();
    const store = await StateStore.open(path, { clock: systemClock, purpose: 'sync' });
    await store.updateStream('events:*', (s) => ({ ...s, mark: '2026-11-21T00:00:00.000Z' }));
    await store.addProjects(['beta', 'alpha']);
    await store.close();
    const doc = await StateStore.read(path);
    expect(doc.streams['events:*']?.mark).toBe('2026-11-21T00:00:00.000Z');
    expect(doc.projects).toEqual(['alpha', 'beta']);
    expect(readFileSync(path, 'utf8')).not.toMatch(/tmp/);
  });

  it('takes its secrets out of everything it writes, the file and the warehouse rows, whatever put them in', async () => {
    const key = 'qs_org_s3cret/KEY+42';
    const path = statePath();
    const db = await DuckDbDestination.open(join(path, '..', 'w.duckdb'));
    const store = await StateStore.open(path, { clock: systemClock, purpose: 'sync', secrets: [key] });
    await keepStateIn(store, db);
    const lastRun = {
      at: '2026-11-21T00:00:00.000Z',
      outcome: 'failed' as const,
      rows: 0,
      pages: 0,
      requests: 1,
      seconds: 1,
      error: `server said: bad key ${key} (${JSON.stringify(key)})`,
    };
    await store.updateStream('events:*', (s) => ({ ...s, lastRun }));
    await store.close();
    const rows = await db.query(`SELECT value FROM _query_sync_state`);
    await db.close();
    const stored = [readFileSync(path, 'utf8'), JSON.stringify(rows)].join('\n');
    expect(stored).toMatch(/bad key \[redacted\]/);
    expect(stored.includes('s3cret')).toBe(false);
  });

  it('keeps a second run of the same purpose off the file, with a message saying what to do', async () => {
    const path = statePath();
    const first = await StateStore.open(path, { clock: systemClock, purpose: 'sync' });
    await expect(StateStore.open(path, { clock: systemClock, purpose: 'sync' })).rejects.toThrow(
      /held by sync.*wait for it/,
    );
    await expect(StateStore.open(path, { clock: systemClock, purpose: 'sync' })).rejects.toBeInstanceOf(StateError);
    await first.close();
    const again = await StateStore.open(path, { clock: systemClock, purpose: 'sync' });
    await again.close();
  });

  it('takes over a lease left by a process that was killed on this host, without waiting for its expiry', async () => {
    const path = statePath();
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
    const pid = Number(dead.stdout.toString());
    await StateStore.open(path, { clock: systemClock, purpose: 'sync' }).then((s) => s.close());
    leaveLease(`${path}.sync.lock`, { pid });
    const takeOvers: string[] = [];
    const store = await StateStore.open(path, {
      clock: systemClock,
      purpose: 'sync',
      onLockTakeOver: (m) => takeOvers.push(m),
    });
    await store.close();
    expect(takeOvers).toEqual([
      expect.stringMatching(/took over the lease .*sync\.lock from sync \(pid \d+ .*no longer runs/),
    ]);
    expect(existsSync(`${path}.sync.lock`)).toBe(false);
  });

  it('a write lease a killed run left without its owner record is taken over after the short write lease, not the run lease', async () => {
    const path = statePath();
    const takeOvers: string[] = [];
    const store = await StateStore.open(path, {
      clock: systemClock,
      purpose: 'sync',
      onLockTakeOver: (m) => takeOvers.push(m),
    });
    // What a run killed between making the write lease's folder and writing its owner record leaves.
    const writeLock = `${path}.write.lock`;
    mkdirSync(writeLock);
    const backdate = (ms: number): void => utimesSync(writeLock, new Date(Date.now() - ms), new Date(Date.now() - ms));
    // Younger than the write lease: it may be a live writer's, so it is waited for, not taken.
    backdate(WRITE_LEASE_MS - 3_000);
    const young = await acquireLock(writeLock, {
      purpose: 'state write',
      clock: systemClock,
      leaseMs: WRITE_LEASE_MS,
    }).catch((e: unknown) => e);
    expect(young).toBeInstanceOf(StateError);
    expect((young as Error).message).toMatch(
      /held by another run; its lease was renewed 2 s ago and expires in 3 s .*taken over automatically 5 s after/,
    );
    // Older than the write lease (still far younger than a run's 30 s): the next write takes it over.
    backdate(WRITE_LEASE_MS + 1_000);
    await store.updateStream('events:*', (s) => ({ ...s, mark: '2026-11-21T00:00:00.000Z' }));
    await store.close();
    expect(takeOvers).toEqual([
      expect.stringMatching(
        /took over the lease .*state\.json\.write\.lock from a run that left no owner record: its lease expired \(last renewed 6 s ago, lease 5 s\)/,
      ),
    ]);
    expect((await StateStore.read(path)).streams['events:*']?.mark).toBe('2026-11-21T00:00:00.000Z');
    expect(existsSync(writeLock)).toBe(false);
  });

  it("lets runs of different purposes share the file without losing each other's writes", async () => {
    const path = statePath();
    const sync = await StateStore.open(path, { clock: systemClock, purpose: 'sync' });
    const backfill = await StateStore.open(path, { clock: systemClock, purpose: 'backfill' });
    await Promise.all([
      ...Array.from({ length: 20 }, (_, i) =>
        sync.updateStream(`s${i}`, () => ({ mark: new Date(i * 1000).toISOString() })),
      ),
      ...Array.from({ length: 20 }, (_, i) => backfill.updateSection<number[]>('ledger', (l) => [...(l ?? []), i])),
    ]);
    await sync.close();
    await backfill.close();
    const doc = await StateStore.read(path);
    expect(Object.keys(doc.streams)).toHaveLength(20);
    expect((doc.sections.ledger as number[]).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
  });

  it('refuses a corrupt state file without touching it', async () => {
    const path = statePath();
    await StateStore.open(path, { clock: systemClock, purpose: 'sync' }).then((s) => s.close());
    writeFileSync(path, '{"not":"state"');
    await expect(StateStore.open(path, { clock: systemClock, purpose: 'sync' })).rejects.toThrow(
      /not valid query-sync state/,
    );
    expect(readFileSync(path, 'utf8')).toBe('{"not":"state"');
  });
});

describe('StateStore in memory (dry runs)', () => {
  it('applies changes for the run but never writes the file', async () => {
    const path = statePath();
    const real = await StateStore.open(path, { clock: systemClock, purpose: 'sync' });
    await real.updateStream('events:*', () => ({ mark: '2026-01-01T00:00:00.000Z' }));
    await real.close();
    const dry = await StateStore.open(path, { clock: systemClock, purpose: 'sync', inMemory: true });
    await dry.updateStream('events:*', () => ({ mark: '2026-11-21T00:00:00.000Z' }));
    expect(dry.stream('events:*').mark).toBe('2026-11-21T00:00:00.000Z');
    await dry.close();
    expect((await StateStore.read(path)).streams['events:*']?.mark).toBe('2026-01-01T00:00:00.000Z');
  });
});
