import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../../src/core/clock.js';
import type { StateCommit, StateRow, StateTable } from '../../../src/core/state-table.js';
import { StateStore } from '../../../src/state/store.js';
import { tempDir } from '../../fakes/tmp.js';

/**
 * The commit as data (issue 33 item 3): the store hands a batch's state rows to the destination,
 * which commits them with the batch's rows and resolves, or rejects. Here the destination is a
 * warehouse double whose transactions the test lands by hand, one at a time, in any order: what
 * reaches it, when, and with which rows is what the store decides. (The DuckDB transaction itself
 * is `state-commit.test.ts`'s, on a real file.)
 */

/** A transaction the double holds until the test lands it. */
interface Held {
  readonly label: string;
  readonly commit: StateCommit;
  land(committed: boolean): void;
}

class HeldWarehouse implements StateTable {
  readonly stateLocation = 'the test warehouse';
  /** The state rows of the transactions committed so far. */
  readonly committed = new Map<string, string>();
  /** Transactions that reached the warehouse, in arrival order (landed ones stay). */
  readonly arrived: Held[] = [];
  private waiters: (() => void)[] = [];

  readState(): Promise<readonly StateRow[]> {
    return Promise.resolve([...this.committed].map(([key, value]) => ({ key, value })));
  }

  writeState(commit: StateCommit): Promise<void> {
    return this.transaction('alone', commit);
  }

  /** A batch's transaction: its rows (named by `label`) and `commit`'s state, both or neither. */
  transaction(label: string, commit: StateCommit): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.arrived.push({
        label,
        commit,
        land: (committed) => {
          if (!committed) return reject(new Error(`${label}: rolled back`));
          for (const row of commit.rows)
            if (row.value === null) this.committed.delete(row.key);
            else this.committed.set(row.key, row.value);
          resolve();
        },
      });
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  /** The transaction labelled `label`, once it has reached the warehouse. */
  async reached(label: string): Promise<Held> {
    for (;;) {
      const held = this.arrived.find((h) => h.label === label);
      if (held !== undefined) return held;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  /** The `n`th transaction to reach the warehouse, once it has. */
  async arrival(n: number): Promise<Held> {
    for (;;) {
      const held = this.arrived[n - 1];
      if (held !== undefined) return held;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  labels(): string[] {
    return this.arrived.map((h) => h.label);
  }
}

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function open(): Promise<{ state: StateStore; warehouse: HeldWarehouse }> {
  const d = tempDir();
  cleanups.push(d.cleanup);
  const state = await StateStore.open(join(d.dir, 'state.json'), { clock: systemClock, purpose: 'sync' });
  cleanups.push(() => state.close());
  const warehouse = new HeldWarehouse();
  await state.attach(warehouse);
  return { state, warehouse };
}

/** One batch: `label` names its rows; `changes` its state. */
function batch(
  state: StateStore,
  warehouse: HeldWarehouse,
  label: string,
  changes: Parameters<StateStore['withBatch']>[0],
): Promise<void> {
  return state.withBatch(changes, (commit) =>
    commit === undefined ? Promise.resolve() : warehouse.transaction(label, commit),
  );
}

const stored = (commit: StateCommit, key: string): unknown => {
  const row = commit.rows.find((r) => r.key === key);
  return row === undefined ? undefined : JSON.parse(row.value ?? 'null');
};

type Queue = Record<string, string>;

describe('the commit as data', () => {
  it("commits of different keys are in flight at once: one held in the destination holds back no other key's, and the riders ride with each", async () => {
    const { state, warehouse } = await open();
    let asked = 0;
    state.withEachCommit(() => {
      const n = ++asked;
      return (doc) => ({ ...doc, sections: { ...doc.sections, rider: { n } } });
    });
    const a = batch(state, warehouse, 'events', (w) => w.updateStream('events:*', () => ({ mark: 'a1' })));
    const heldA = await warehouse.reached('events');
    const b = batch(state, warehouse, 'users', (w) => w.updateStream('users:*', () => ({ mark: 'b1' })));
    const heldB = await warehouse.reached('users');
    expect(stored(heldA.commit, 'section:rider')).toEqual({ n: 1 });
    expect(stored(heldB.commit, 'section:rider')).toEqual({ n: 2 });
    // The later one lands first: its change is the store's at once, the held one's not yet.
    heldB.land(true);
    await b;
    expect(state.stream('users:*').mark).toBe('b1');
    expect(state.stream('events:*').mark).toBeUndefined();
    heldA.land(true);
    await a;
    expect(state.stream('events:*').mark).toBe('a1');
    expect(state.document.sections['rider']).toEqual({ n: 1 });
  });

  it('of one key, one commit in flight: the next waits before it reaches the destination, then carries every change of the first, across keys', async () => {
    const { state, warehouse } = await open();
    // An events batch: its checkpoint and the traces it enqueued, one commit.
    const parent = batch(state, warehouse, 'parent', async (w) => {
      await w.updateSection<Queue>('queue', (q = {}) => ({ ...q, p1: 'owed' }));
      await w.updateStream('events:*', () => ({ mark: 'after p1' }));
    });
    const heldParent = await warehouse.reached('parent');
    // A drain's chunk changes the queue too; a stream of another key goes past both.
    const drain = batch(state, warehouse, 'drain', (w) =>
      w.updateSection<Queue>('queue', (q = {}) => ({ ...q, p0: 'read' })),
    );
    const other = batch(state, warehouse, 'users', (w) => w.updateStream('users:*', () => ({ mark: 'u1' })));
    await warehouse.reached('users');
    expect(warehouse.labels()).toEqual(['parent', 'users']);
    heldParent.land(true);
    const heldDrain = await warehouse.reached('drain');
    // Its queue holds the parent's enqueue: landing after the parent's commit, it keeps it.
    expect(stored(heldDrain.commit, 'section:queue')).toEqual({ p1: 'owed', p0: 'read' });
    expect(stored(heldDrain.commit, 'stream:events:*')).toBeUndefined();
    heldDrain.land(true);
    (await warehouse.reached('users')).land(true);
    await Promise.all([parent, drain, other]);
    expect(JSON.parse(warehouse.committed.get('section:queue') ?? 'null')).toEqual({ p1: 'owed', p0: 'read' });
    expect(JSON.parse(warehouse.committed.get('stream:events:*') ?? 'null')).toEqual({ mark: 'after p1' });
  });

  it('a commit that fails leaves nothing for the next of its key to carry, in the warehouse or the store', async () => {
    const { state, warehouse } = await open();
    const add = (part: string) => (w: Parameters<Parameters<StateStore['withBatch']>[0]>[0]) =>
      w.updateSection<string[]>('parts', (parts = []) => [...parts, part]);
    const first = batch(state, warehouse, 'first', add('first'));
    const heldFirst = await warehouse.reached('first');
    const second = batch(state, warehouse, 'second', add('second'));
    heldFirst.land(false);
    await expect(first).rejects.toThrow(/first: rolled back/);
    const heldSecond = await warehouse.reached('second');
    expect(stored(heldSecond.commit, 'section:parts')).toEqual(['second']);
    heldSecond.land(true);
    await second;
    expect(state.document.sections['parts']).toEqual(['second']);
    expect(JSON.parse(warehouse.committed.get('section:parts') ?? 'null')).toEqual(['second']);
  });

  it('a state write of its own (a window end, a lastRun) waits for the batch in flight of its key, and holds its checkpoint', async () => {
    const { state, warehouse } = await open();
    const walk = batch(state, warehouse, 'batch', (w) => w.updateStream('events:*', (s) => ({ ...s, mark: 'm1' })));
    const heldBatch = await warehouse.reached('batch');
    const end = state.updateStream('events:*', (s) => ({ ...s, settled: 's1' }));
    const other = state.updateStream('users:*', () => ({ mark: 'u1' }));
    const alone = await warehouse.reached('alone');
    expect(stored(alone.commit, 'stream:users:*')).toEqual({ mark: 'u1' });
    alone.land(true);
    await other;
    expect(warehouse.labels()).toEqual(['batch', 'alone']);
    heldBatch.land(true);
    await walk;
    const ended = await warehouse.arrival(3);
    expect(stored(ended.commit, 'stream:events:*')).toEqual({ mark: 'm1', settled: 's1' });
    ended.land(true);
    await end;
    expect(state.stream('events:*')).toEqual({ mark: 'm1', settled: 's1' });
  });
});

describe('a write that changes nothing', () => {
  it('reaches no destination, and resolves after a turn of the event loop: a loop of such writes starves no I/O', async () => {
    const { state, warehouse } = await open();
    const first = state.updateStream('events:*', () => ({ mark: 'm1' }));
    (await warehouse.arrival(1)).land(true);
    await first;
    // A stream reader's take once wrote the same cut again at once, forever (the walk's part was gone):
    // resolved among microtasks, those writes never let the pages it waited for arrive.
    let turned = false;
    setImmediate(() => {
      turned = true;
    });
    let writes = 0;
    while (!turned && writes < 1000) {
      await state.updateStream('events:*', (s) => s);
      writes += 1;
    }
    expect(turned).toBe(true);
    expect(warehouse.labels()).toEqual(['alone']);
    expect(state.stream('events:*').mark).toBe('m1');
  });
});
