import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { WarehouseBusyError } from '../../src/core/errors.js';
import { availableParallelism } from 'node:os';
import { WRITER_THREADS } from '../../src/load/duckdb/connection.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { tempDir } from '../fakes/tmp.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * Another process holding the DuckDB file until `release()` (a line on its stdin); resolves once it
 * has opened it. Released by a message, not after a fixed time, so a loaded machine cannot let the
 * file go before the test has seen it held.
 */
function holdFile(path: string): Promise<{ release: () => void; exited: Promise<void> }> {
  const script = `
    import { DuckDBInstance } from '@duckdb/node-api';
    const instance = await DuckDBInstance.create(${JSON.stringify(path)});
    const c = await instance.connect();
    await c.run('CREATE TABLE IF NOT EXISTS t (a INTEGER)');
    process.stdout.write('open\\n');
    process.stdin.once('data', () => { c.closeSync(); instance.closeSync(); process.exit(0); });`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
    cwd: process.cwd(),
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  cleanups.push(() => child.kill('SIGKILL'));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => {
      if (b.toString().includes('open')) resolve({ release: () => child.stdin.end('release\n'), exited });
    });
    child.on('exit', (code) => reject(new Error(`holder exited early (${String(code)})`)));
  });
}

describe('DuckDbDestination.open while another process holds the file', () => {
  it('fails at once by default, saying what to do; with waitMs it waits for the file', async () => {
    const d = tempDir();
    cleanups.push(d.cleanup);
    const path = join(d.dir, 'warehouse.duckdb');
    const holder = await holdFile(path);

    const error = await DuckDbDestination.open(path).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(WarehouseBusyError);
    expect((error as Error).message).toMatch(
      /warehouse\.duckdb is open in another process \(.*PID \d+\).*pass --lock-wait/,
    );

    // The wait is asked while the file is held, and the file is let go only after 300 ms of it: the
    // open must not resolve before that release.
    let released = false;
    const waited = DuckDbDestination.open(path, { waitMs: 20_000 }).then((opened) => ({ opened, released }));
    setTimeout(() => {
      released = true;
      holder.release();
    }, 300);
    const { opened: db, released: afterRelease } = await waited;
    expect(afterRelease, 'the open waited for the holder to let go').toBe(true);
    expect(await db.count('t')).toBe(0);
    await db.close();
    await holder.exited;
  });

  it('counts a window of one project, and rows per project', async () => {
    const d = tempDir();
    cleanups.push(d.cleanup);
    const db = await DuckDbDestination.open(join(d.dir, 'w.duckdb'));
    cleanups.push(() => db.close());
    expect(
      await db.countWindow('events', {
        projectId: 'a',
        column: 'timestamp',
        fromIso: '2026-01-01T00:00:00Z',
        toIso: '2026-01-02T00:00:00Z',
      }),
    ).toBe(0);
    expect(await db.countByProject('events')).toEqual({});
    await db.query(`CREATE TABLE events (project_id VARCHAR, id VARCHAR, "timestamp" TIMESTAMPTZ)`);
    await db.query(`INSERT INTO events VALUES
      ('a', '1', '2026-01-01T00:00:00Z'), ('a', '2', '2026-01-01T23:59:59.999Z'), ('a', '3', '2026-01-02T00:00:00Z'),
      ('b', '1', '2026-01-01T12:00:00Z')`);
    const window = { column: 'timestamp', fromIso: '2026-01-01T00:00:00.000Z', toIso: '2026-01-02T00:00:00.000Z' };
    expect(await db.countWindow('events', { ...window, projectId: 'a' })).toBe(2);
    expect(await db.countWindow('events', { ...window, projectId: 'b' })).toBe(1);
    expect(await db.countByProject('events')).toEqual({ a: 3, b: 1 });
  });

  it('a writer runs DuckDB on WRITER_THREADS threads; a reader on one per core, as DuckDB does', async () => {
    const d = tempDir();
    cleanups.push(d.cleanup);
    const path = join(d.dir, 'w.duckdb');
    const writer = await DuckDbDestination.open(path);
    expect(await writer.query("SELECT current_setting('threads') AS n")).toEqual([{ n: BigInt(WRITER_THREADS) }]);
    await writer.close();
    const reader = await DuckDbDestination.open(path, { readOnly: true });
    cleanups.push(() => reader.close());
    expect(await reader.query("SELECT current_setting('threads') AS n")).toEqual([
      { n: BigInt(availableParallelism()) },
    ]);
  });
});
