import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterEach, describe, expect, it } from 'vitest';
import { SPEC_RATE_LIMITS, startEmulator } from '../../emulator/index.js';
import { layoutOf } from '../../src/publish/layout.js';
import { readManifest } from '../../src/publish/manifest.js';
import { CLI, runCli } from '../fakes/cli.js';
import { asTheCliLaysItOut } from '../fakes/cli-warehouse.js';
import { dbPathOf, statePathOf, syncOnce } from '../fakes/harness.js';
import { tempDir } from '../fakes/tmp.js';

/**
 * The published read copy (docs/analysts.md), with real processes and real DuckDB files: readers
 * open `--duckdb-path` at any moment during a sync that is killed and resumed, and never make it
 * wait; what they read is one commit's tables; the Parquet set equals the tables.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A reader in its own process: every 200 ms it opens the published copy read-only, reads which
 * publish it is and each table's row count, checks that events and their bridge rows (written in
 * one transaction) agree, and prints one JSON line. It starts once the copy exists.
 */
const READER = `
import { DuckDBInstance } from '@duckdb/node-api';
import { existsSync } from 'node:fs';
const path = process.argv[1];
const tables = ['events', 'event_signals', 'traces', 'users', 'conversations', 'signals'];
let stop = false;
process.stdin.on('data', () => { stop = true; });
process.stdin.on('end', () => { stop = true; });
while (!stop) {
  if (existsSync(path)) {
    const line = { at: Date.now() };
    try {
      const instance = await DuckDBInstance.create(path, { access_mode: 'READ_ONLY' });
      const c = await instance.connect();
      const one = async (sql) => (await c.runAndReadAll(sql)).getRows()[0]?.[0];
      line.publish = Number(await one('SELECT publish FROM _query_sync_published'));
      const views = (await c.runAndReadAll("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'")).getRows().map((r) => r[0]);
      line.counts = {};
      for (const t of tables) if (views.includes(t)) line.counts[t] = Number(await one('SELECT count(*) FROM ' + t));
      if (views.includes('event_signals')) {
        line.bridge = Number(await one("SELECT coalesce(sum(json_array_length(signals)), 0) FROM events WHERE json_type(signals) = 'ARRAY'"));
      }
      c.closeSync();
      instance.closeSync();
      line.ok = true;
    } catch (error) {
      line.ok = false;
      line.error = String(error && error.message);
    }
    process.stdout.write(JSON.stringify(line) + '\\n');
  }
  await new Promise((r) => setTimeout(r, 200));
}
`;

interface ReaderLine {
  readonly at: number;
  readonly ok: boolean;
  readonly error?: string;
  readonly publish?: number;
  readonly counts?: Record<string, number>;
  readonly bridge?: number;
}

function startReader(path: string): { lines: ReaderLine[]; stop(): Promise<void> } {
  const child = spawn(process.execPath, ['--input-type=module', '-e', READER, path], {
    stdio: ['pipe', 'pipe', 'inherit'],
    cwd: process.cwd(),
  });
  const lines: ReaderLine[] = [];
  let buffer = '';
  child.stdout.on('data', (b: Buffer) => {
    buffer += b.toString();
    const parts = buffer.split('\n');
    buffer = parts.pop() ?? '';
    for (const p of parts) if (p.trim() !== '') lines.push(JSON.parse(p) as ReaderLine);
  });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return {
    lines,
    stop: async () => {
      child.stdin.end();
      await exited;
    },
  };
}

/** Rows in `a` not in `b` and in `b` not in `a` (bags), for one table. */
async function difference(
  sqlA: string,
  sqlB: string,
  connectionOf: () => Promise<{ runAndReadAll(sql: string): Promise<{ getRows(): unknown[][] }> }>,
): Promise<number> {
  const c = await connectionOf();
  const one = async (sql: string): Promise<number> => Number((await c.runAndReadAll(sql)).getRows()[0]?.[0] ?? -1);
  return (
    (await one(`SELECT count(*) FROM (${sqlA} EXCEPT ALL ${sqlB})`)) +
    (await one(`SELECT count(*) FROM (${sqlB} EXCEPT ALL ${sqlA})`))
  );
}

describe('the published read copy (real CLI, real reader processes, real DuckDB files)', () => {
  it('a reader opening the copy every 200 ms through a sync killed -9 and resumed: every open succeeds, every answer is one commit, the Parquet set equals the tables', async () => {
    expect(existsSync(CLI), `build first: ${CLI}`).toBe(true);
    // Paced at 8 requests a second (below the documented limits, which the emulator enforces), the
    // sync's ~50 requests take several seconds: several publishes land during it. The pace, not the
    // data, makes the run long.
    const emu = await startEmulator({ seed: 31, eventsPerProject: 500, limits: { ...SPEC_RATE_LIMITS } });
    cleanups.push(() => emu.close());
    const d = tempDir();
    cleanups.push(d.cleanup);
    const layout = layoutOf(dbPathOf(d.dir));
    const args = [
      'sync',
      '--project',
      '*',
      '--duckdb-path',
      dbPathOf(d.dir),
      '--state',
      statePathOf(d.dir),
      '--log-level',
      'info',
      '--log-format',
      'json',
      '--batch-rows',
      '200',
      '--publish-every',
      '1s',
      '--max-rps',
      '8',
    ];
    const reader = startReader(layout.published);
    cleanups.push(() => reader.stop());

    // Killed once a publish during the run has landed (the manifest exists while the run goes on).
    const killed = await runCli(emu, args, {
      killWhen: () => (readManifest(layout.manifest)?.publish ?? 0) >= 2,
      timeoutMs: 120_000,
    });
    expect(killed.signal, killed.stderr.slice(-2000)).toBe('SIGKILL');
    const afterKill = readManifest(layout.manifest);
    expect(afterKill?.final).toBe(false);

    const resumed = await runCli(emu, args, { timeoutMs: 280_000 });
    expect(resumed.code, resumed.stderr.slice(-2000)).toBe(0);
    // The reader never made the sync wait: no lock message, no busy warehouse.
    expect(resumed.stderr + resumed.stdout).not.toMatch(
      /Could not set lock|Conflicting lock|open in another process|E_WAREHOUSE_BUSY/,
    );
    const final = readManifest(layout.manifest);
    expect(final?.final).toBe(true);
    // Wait (on events, not time) until the reader has read the final publish twice.
    while (reader.lines.filter((l) => l.publish === final?.publish).length < 2)
      await new Promise((r) => setTimeout(r, 50));
    await reader.stop();

    const lines = reader.lines;
    expect(lines.length).toBeGreaterThan(10);
    // Every open succeeded (the copy exists from the first publish on and is never half-written).
    expect(lines.filter((l) => !l.ok)).toEqual([]);
    const publishes = new Set(lines.map((l) => l.publish));
    expect(publishes.size).toBeGreaterThanOrEqual(3); // the reader saw the copy move on during the runs
    // One publish is one snapshot: the same counts whenever it is read; later publishes never have fewer rows.
    const byPublish = new Map<number, Record<string, number>>();
    for (const l of lines) {
      const seen = byPublish.get(l.publish ?? -1);
      if (seen === undefined) byPublish.set(l.publish ?? -1, l.counts ?? {});
      else expect(l.counts, `publish ${l.publish}`).toEqual(seen);
    }
    // Events and their bridge rows are committed together: a copy mixing two moments would not match.
    // Checked on every read of a copy that has the bridge, and the reader saw such copies.
    const bridged = lines.filter((l) => l.counts?.event_signals !== undefined);
    expect(bridged.length, 'reads of a copy with the event_signals bridge').toBeGreaterThan(0);
    for (const l of bridged) expect(l.counts?.event_signals, `publish ${l.publish}`).toBe(l.bridge);
    const ordered = [...byPublish.entries()].sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < ordered.length; i++) {
      for (const [table, n] of Object.entries(ordered[i - 1]?.[1] ?? {}))
        expect(ordered[i]?.[1][table] ?? 0).toBeGreaterThanOrEqual(n);
    }

    // The final copy equals the working database, table by table, and so does the Parquet set.
    const instance = await DuckDBInstance.create(':memory:');
    const connection = await instance.connect();
    cleanups.push(() => {
      connection.closeSync();
      instance.closeSync();
    });
    await connection.run("SET TimeZone = 'UTC'");
    await connection.run(`ATTACH '${layout.work}' AS w (READ_ONLY)`);
    await connection.run(`ATTACH '${layout.published}' AS p (READ_ONLY)`);
    const tables = Object.keys(final?.tables ?? {});
    expect(tables).toEqual(
      expect.arrayContaining([
        'events',
        'traces',
        'users',
        'conversations',
        'signals',
        'signal_groups',
        '_query_sync_runs',
      ]),
    );
    expect(tables).not.toContain('_query_sync_state');
    for (const table of tables) {
      const work = `SELECT * FROM w.main."${table}"`;
      expect(
        await difference(work, `SELECT * FROM p.main."${table}"`, async () => connection),
        `published ${table}`,
      ).toBe(0);
      const rows = final?.tables[table]?.rows ?? 0;
      if (rows === 0) continue;
      const parquet = `SELECT * FROM read_parquet('${layout.files}/${table}/**/*.parquet', hive_partitioning = false)`;
      expect(await difference(work, parquet, async () => connection), `Parquet ${table}`).toBe(0);
    }
    // Events are cut by day, and the manifest's counts are the rows.
    expect(Object.keys(final?.tables.events?.partitions ?? {}).every((k) => /^dt=\d{4}-\d{2}-\d{2}$/.test(k))).toBe(
      true,
    );
    const eventRows = Number((await connection.runAndReadAll('SELECT count(*) FROM w.main.events')).getRows()[0]?.[0]);
    expect(final?.tables.events?.rows).toBe(eventRows);
  }, 480_000);

  it('a reader holding the copy open (read-write, as the DuckDB CLI opens a file) for a whole sync: the sync publishes past it, and the reader keeps its old copy', async () => {
    const emu = await startEmulator({ seed: 32, eventsPerProject: 300 });
    cleanups.push(() => emu.close());
    const d = tempDir();
    cleanups.push(d.cleanup);
    const layout = layoutOf(dbPathOf(d.dir));
    const args = [
      'sync',
      '--project',
      '*',
      '--duckdb-path',
      dbPathOf(d.dir),
      '--state',
      statePathOf(d.dir),
      '--log-format',
      'json',
    ];
    // The first sync only makes the copy to hold: in-process, into the CLI's layout, published at its end.
    const first = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d.dir,
      project: '*',
      destination: asTheCliLaysItOut(d.dir),
    });
    expect(first.ok, JSON.stringify(first.streams.map((s) => s.error?.message))).toBe(true);
    const before = readManifest(layout.manifest);

    // This process holds the copy open for the whole next sync, with a transaction open on it.
    const holder = await DuckDBInstance.create(layout.published);
    const held = await holder.connect();
    cleanups.push(() => {
      held.closeSync();
      holder.closeSync();
    });
    await held.run('BEGIN TRANSACTION');
    const countHeld = async (): Promise<number> =>
      Number((await held.runAndReadAll('SELECT count(*) FROM events')).getRows()[0]?.[0]);
    const eventsBefore = await countHeld();

    for (const p of ['default', 'alpha', 'beta']) emu.addEvents(p, 40);
    const second = await runCli(emu, args);
    expect(second.code, second.stderr.slice(-2000)).toBe(0);
    expect(second.stderr + second.stdout).not.toMatch(
      /Could not set lock|Conflicting lock|open in another process|could not publish/,
    );
    const after = readManifest(layout.manifest);
    expect(after?.publish).toBeGreaterThan(before?.publish ?? 0);

    // The holder still reads its old copy, whole; a new open reads the new one.
    expect(await countHeld()).toBe(eventsBefore);
    const fresh = await DuckDBInstance.create(layout.published, { access_mode: 'READ_ONLY' });
    const c = await fresh.connect();
    const eventsAfter = Number((await c.runAndReadAll('SELECT count(*) FROM events')).getRows()[0]?.[0]);
    c.closeSync();
    fresh.closeSync();
    expect(eventsAfter).toBe(eventsBefore + 120);
    // Only the days the new events fell on were rewritten; the other partitions kept their files.
    const kept = Object.entries(after?.tables.events?.partitions ?? {}).filter(
      ([k, p]) => before?.tables.events?.partitions[k]?.version === p.version,
    );
    expect(kept.length).toBeGreaterThan(0);
  }, 180_000);

  it('a publish target that is not writable: the sync still succeeds, the error names the folder and what to do, the previous copy stays readable', async () => {
    const emu = await startEmulator({ seed: 33, eventsPerProject: 100 });
    cleanups.push(() => emu.close());
    const d = tempDir();
    cleanups.push(d.cleanup);
    const layout = layoutOf(dbPathOf(d.dir));
    const args = [
      'sync',
      '--project',
      '*',
      '--duckdb-path',
      dbPathOf(d.dir),
      '--state',
      statePathOf(d.dir),
      '--log-format',
      'json',
    ];
    // The copy that must stay readable: written in-process, into the CLI's layout, published at its end.
    expect(
      (
        await syncOnce({
          baseUrl: emu.url,
          apiKey: emu.apiKey,
          dir: d.dir,
          project: '*',
          destination: asTheCliLaysItOut(d.dir),
        })
      ).ok,
    ).toBe(true);
    const before = readManifest(layout.manifest);
    // A folder (with a file in it) where the next publish must write its new catalog: that publish fails.
    const { mkdirSync, writeFileSync } = await import('node:fs');
    const blocked = `${layout.published}.publish-${(before?.publish ?? 0) + 1}.tmp`;
    mkdirSync(blocked);
    writeFileSync(join(blocked, 'x'), 'in the way');
    for (const p of ['default', 'alpha']) emu.addEvents(p, 10);
    const run = await runCli(emu, args);
    expect(run.code, run.stderr.slice(-2000)).toBe(0);
    expect(run.stderr).toContain(`could not publish the read copy ${layout.published}`);
    expect(run.stderr).toMatch(/the previous published copy stays readable/);
    expect(readManifest(layout.manifest)?.publish).toBe(before?.publish);
    // The previous copy: still opens, still whole; the files the failed publish wrote are gone.
    const reader = await DuckDBInstance.create(layout.published, { access_mode: 'READ_ONLY' });
    const c = await reader.connect();
    cleanups.push(() => {
      c.closeSync();
      reader.closeSync();
    });
    expect(Number((await c.runAndReadAll('SELECT count(*) FROM users')).getRows()[0]?.[0])).toBe(
      before?.tables.users?.rows,
    );
    expect(Number((await c.runAndReadAll('SELECT count(*) FROM events')).getRows()[0]?.[0])).toBe(
      before?.tables.events?.rows,
    );
    const { readdirSync } = await import('node:fs');
    const versions = readdirSync(join(layout.files, '_versions'), { recursive: true })
      .map(String)
      .filter((f) => f.endsWith('.parquet'));
    const referenced = new Set(
      Object.values(before?.tables ?? {}).flatMap((t) => Object.values(t.partitions).map((p) => p.version)),
    );
    expect(versions.map((f) => `_versions/${f}`).filter((f) => !referenced.has(f))).toEqual([]);
  }, 120_000);
});
