/**
 * `npm run bench:publish [-- 100k,1m]`: what publishing the read copy costs (docs/analysts.md).
 * For each size, a working file of that many events (~1 KB of text each, hex digests that compress
 * about as well as model text, over 90 days, as a sync writes them) plus 10% as many users, then:
 *
 * - the candidates, timed on the same file: a copy of the quiescent file renamed into place,
 *   `COPY FROM DATABASE` into a new file, and query-sync's publish (Parquet per day + a catalog of
 *   views), first in full, then after a write of 2,000 new events to today (what a 5-minute publish
 *   during a long drain sees);
 * - the extra disk of each (the working file is the sync's own; the published set is the extra).
 *
 * Sizes: `100k`, `1m`, `10m` (10m needs ~12 GB of disk and a long while on two cores).
 */
import { copyFileSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { systemClock } from '../src/core/clock.js';
import { DuckDbDestination } from '../src/load/duckdb/destination.js';
import { layoutOf } from '../src/publish/layout.js';
import { RESOURCES } from '../connectors/index.js';
import { partitionedTables } from '../src/publish/partitions.js';
import { Publisher } from '../src/publish/publisher.js';

const SIZES: Record<string, number> = { '100k': 100_000, '1m': 1_000_000, '10m': 10_000_000 };
const DAY_MS = 86_400_000;
const NEW_EVENTS = 2_000;

function bytesUnder(path: string): number {
  const s = statSync(path, { throwIfNoEntry: false });
  if (s === undefined) return 0;
  if (!s.isDirectory()) return s.size;
  return readdirSync(path).reduce((n, f) => n + bytesUnder(join(path, f)), 0);
}

const mb = (bytes: number): string => `${(bytes / 1e6).toFixed(0)} MB`;
const sec = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

/** A working file as a sync leaves it: events (~1 KB each) over 90 days, and users. */
async function makeWorkingFile(path: string, events: number): Promise<void> {
  const instance = await DuckDBInstance.create(path, { memory_limit: '1GB', threads: '2' });
  const c = await instance.connect();
  await c.run("SET TimeZone = 'UTC'");
  const today = Math.floor(Date.now() / DAY_MS) * DAY_MS;
  await c.run(`CREATE TABLE events AS SELECT
      'default' AS project_id, 'e' || i AS id,
      make_timestamptz(CAST((${today - 89 * DAY_MS} + i * ${Math.floor((90 * DAY_MS) / events)}) * 1000 AS BIGINT)) AS "timestamp",
      'u' || (i % ${Math.max(1, Math.floor(events / 10))}) AS user_id, 'c' || (i % 50000) AS convo_id,
      ['completion', 'tool_use', 'feedback', 'agent_step'][1 + i % 4] AS event_name,
      array_to_string(list_transform(range(14), j -> md5(CAST(i * 100 + j AS VARCHAR))), '') AS user_input,
      array_to_string(list_transform(range(14), j -> md5(CAST(i * 100 + 50 + j AS VARCHAR))), '') AS assistant_output,
      CAST('{"model":"m' || (i % 7) || '","tokens":' || (i % 4000) || '}' AS JSON) AS properties,
      make_timestamptz(${today} * 1000) AS _synced_at, 'bench-run' AS _run_id
    FROM range(${events}) t(i) ORDER BY "timestamp"`);
  await c.run(`CREATE TABLE users AS SELECT 'default' AS project_id, 'u' || i AS id, make_timestamptz(${today} * 1000) AS last_seen,
      CAST('{"plan":"pro"}' AS JSON) AS traits, make_timestamptz(${today} * 1000) AS _synced_at, 'bench-run' AS _run_id FROM range(${Math.max(1, Math.floor(events / 10))}) t(i)`);
  await c.run('CHECKPOINT');
  c.closeSync();
  instance.closeSync();
}

/** Wall time, and CPU time of this process (DuckDB's threads included): on a shared machine the CPU time is the figure that carries over. */
let lastCpuMs = 0;
async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const cpu = process.cpuUsage();
  const value = await work();
  const used = process.cpuUsage(cpu);
  lastCpuMs = (used.user + used.system) / 1000;
  return [value, performance.now() - started];
}

async function bench(label: string, events: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'publish-bench-'));
  try {
    const layout = layoutOf(join(dir, 'warehouse.duckdb'));
    const [, makeMs] = await timed(() => makeWorkingFile(layout.work, events));
    const workBytes = bytesUnder(layout.work);
    console.log(
      `\n== ${label}: ${events.toLocaleString('en')} events (working file ${mb(workBytes)}, made in ${sec(makeMs)}) ==`,
    );

    // 1. A copy of the quiescent file, renamed into place (the writer waits for the whole copy).
    const cpu: Record<string, number> = {};
    const [, copyMs] = await timed(async () => {
      copyFileSync(layout.work, `${layout.published}.copy`);
      renameSync(`${layout.published}.copy`, join(dir, 'copied.duckdb'));
    });
    cpu.copy = lastCpuMs;
    const copyBytes = bytesUnder(join(dir, 'copied.duckdb'));
    rmSync(join(dir, 'copied.duckdb'));

    // 2. COPY FROM DATABASE into a new file (the writer's snapshot is held for the whole copy).
    const [, copyDbMs] = await timed(async () => {
      const instance = await DuckDBInstance.create(':memory:', { memory_limit: '256MB', threads: '2' });
      const c = await instance.connect();
      await c.run(`ATTACH '${layout.work}' AS w (READ_ONLY)`);
      await c.run(`ATTACH '${join(dir, 'copydb.duckdb')}' AS n`);
      await c.run('COPY FROM DATABASE w TO n');
      c.closeSync();
      instance.closeSync();
    });
    cpu.copyDb = lastCpuMs;
    const copyDbBytes = bytesUnder(join(dir, 'copydb.duckdb'));
    rmSync(join(dir, 'copydb.duckdb'), { force: true });

    // 3. query-sync's publish, at the default memory limit the sync runs with.
    const db = await DuckDbDestination.open(layout.work);
    const publisher = new Publisher(layout.published, db, systemClock, { partitioned: partitionedTables(RESOURCES) });
    const [full] = await timed(() => publisher.publish(false));
    cpu.full = lastCpuMs;
    const fullBytes = bytesUnder(layout.files) + bytesUnder(layout.published);
    // A write of new events to today, as a long drain makes between two publishes.
    const today = Math.floor(Date.now() / DAY_MS) * DAY_MS;
    await db.exclusive(async (c) => {
      await c.run(`INSERT INTO main.events SELECT 'default', 'n' || i, make_timestamptz(CAST((${today} + i) * 1000 AS BIGINT)), 'u1', 'c1', 'completion',
        repeat('x', 448), repeat('y', 448), CAST('{}' AS JSON), now(), 'bench-run-2' FROM range(${NEW_EVENTS}) t(i)`);
    });
    publisher.mark('events', [`dt=${new Date(today).toISOString().slice(0, 10)}`]);
    const [incremental] = await timed(() => publisher.publish(false));
    cpu.incremental = lastCpuMs;
    const afterBytes = bytesUnder(layout.files) + bytesUnder(layout.published);
    await db.close();

    const rows: [string, string, string, string, string][] = [
      ['file copy + rename', sec(copyMs), sec(cpu.copy ?? 0), sec(copyMs), mb(copyBytes)],
      ['COPY FROM DATABASE', sec(copyDbMs), sec(cpu.copyDb ?? 0), sec(copyDbMs), mb(copyDbBytes)],
      ['publish, first (all partitions)', sec(full.totalMs), sec(cpu.full ?? 0), sec(full.heldMs), mb(fullBytes)],
      [
        `publish after ${NEW_EVENTS} new events (1 day)`,
        sec(incremental.totalMs),
        sec(cpu.incremental ?? 0),
        sec(incremental.heldMs),
        `+${mb(afterBytes - fullBytes)} (old day kept 1 h)`,
      ],
    ];
    console.log(
      `${'mechanism'.padEnd(44)} ${'wall'.padStart(9)} ${'cpu'.padStart(9)} ${'writer waits'.padStart(13)} ${'extra disk'.padStart(12)}`,
    );
    for (const [name, t, c, held, disk] of rows)
      console.log(`${name.padEnd(44)} ${t.padStart(9)} ${c.padStart(9)} ${held.padStart(13)} ${disk.padStart(12)}`);
    console.log(`partitions rewritten: first ${full.rewritten}, then ${incremental.rewritten}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const wanted = (process.argv[2] ?? '100k,1m').split(',');
for (const label of wanted) {
  const events = SIZES[label];
  if (events === undefined) throw new Error(`unknown size ${label}: give 100k, 1m or 10m (comma-separated)`);
  await bench(label, events);
}
