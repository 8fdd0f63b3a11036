import { spawn } from 'node:child_process';
import { readdirSync, rmSync, watch } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import type { WarehouseLayout } from '../../src/publish/layout.js';
import { readManifest } from '../../src/publish/manifest.js';
import { CLI, runCli } from '../fakes/cli.js';
import { cliWarehouse, readPublished } from '../fakes/cli-warehouse.js';

/**
 * A publish killed with SIGKILL (a real `query-sync publish` process) at the two points where the
 * published state is split: after the Parquet files are written, while the new catalog is made
 * beside the old one (before its rename), and after the catalog's rename (before the manifest is
 * replaced). The kill is sent when the file that marks the point appears (fs.watch: an event, not
 * a clock). Each time the copy must open and read one publish's rows, and the next publish repairs
 * the set: catalog, manifest and the current files for globs agree again.
 */

/** Rows in the current files readers glob (`events/*\/data.parquet`), read without the catalog. */
async function globbed(layout: WarehouseLayout): Promise<number> {
  const instance = await DuckDBInstance.create(':memory:');
  try {
    const c = await instance.connect();
    const n = Number(
      (
        await c.runAndReadAll(`SELECT count(*) FROM read_parquet('${layout.files}/events/*/data.parquet')`)
      ).getRows()[0]?.[0],
    );
    c.closeSync();
    return n;
  } finally {
    instance.closeSync();
  }
}

/**
 * Run `query-sync publish` and SIGKILL it as soon as a file whose name matches `marker` appears in
 * `folder`. Resolves with how the process ended (a publish that ended before the signal landed: 0).
 */
async function publishKilledAt(
  emuEnv: NodeJS.ProcessEnv,
  path: string,
  folder: string,
  marker: RegExp,
): Promise<{ killed: boolean; code: number | null }> {
  const child = spawn(process.execPath, [CLI, 'publish', '--duckdb-path', path], {
    env: emuEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const watcher = watch(folder, { recursive: true }, (_event, name) => {
    if (name !== null && marker.test(String(name))) child.kill('SIGKILL');
  });
  try {
    return await new Promise((resolve) =>
      child.on('close', (code, signal) => resolve({ killed: signal === 'SIGKILL', code })),
    );
  } finally {
    watcher.close();
  }
}

describe('a publish killed -9 mid-way leaves a readable copy, and the next publish repairs it', () => {
  it('killed before the catalog rename, then after it (before the manifest): each time readable, then repaired', async () => {
    const { emu, path, layout, files } = await cliWarehouse({ seed: 7, eventsPerProject: 300 });
    const synced = await runCli(emu, ['sync', ...files, '--resources', 'events', '--quiet']);
    expect(synced.code, synced.stdout + synced.stderr).toBe(0);
    const first = await readPublished(path);
    expect(first.publish).toBe(1);
    const env = { ...process.env, QUERY_API_BASE_URL: emu.url, QUERY_API_KEY: emu.apiKey };

    /** Remove rows from the working file, so the next publish rewrites partitions and changes the count. */
    const removeSome = async (n: number): Promise<number> => {
      const db = await DuckDbDestination.open(layout.work);
      await db.query(`DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id LIMIT ${n})`);
      const [left] = await db.query('SELECT count(*) AS n FROM events');
      await db.close();
      return Number(left?.n);
    };

    // 1. Killed while the new catalog is being made (the Parquet files are written; the old catalog is in place).
    let before = first;
    let now = await removeSome(5);
    const atCatalog = await publishKilledAt(
      env,
      path,
      dirname(path),
      new RegExp(`^${basename(path)}\\.publish-\\d+\\.tmp$`),
    );
    expect(atCatalog.killed || atCatalog.code === 0).toBe(true);
    let read = await readPublished(path);
    // The old copy or (if the kill landed after the rename) the new one: one publish's rows, never a mix.
    expect([before, { publish: before.publish + 1, events: now }]).toContainEqual(read);
    expect(readManifest(layout.manifest)?.format).toBe('query-sync-publish/1');
    const repaired = await runCli(emu, ['publish', '--duckdb-path', path]);
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    read = await readPublished(path);
    expect(read.events).toBe(now);
    expect(readManifest(layout.manifest)).toMatchObject({ publish: read.publish, tables: { events: { rows: now } } });
    expect(await globbed(layout)).toBe(now);

    // 2. Killed after the catalog's rename, while the current files and the manifest follow it. That
    // step is too short to hit by timing on an idle machine, so the process is asked to stop there
    // (QSYNC_TEST_HOLD_AFTER_CATALOG) and killed on its marker: the split state (catalog newer
    // than the manifest) is reached every time.
    before = read;
    now = await removeSome(5);
    const atManifest = await publishKilledAt(
      { ...env, QSYNC_TEST_HOLD_AFTER_CATALOG: '1' },
      path,
      layout.files,
      /(^|\/)hold-after-catalog\.marker$/,
    );
    expect(atManifest.killed).toBe(true);
    rmSync(join(layout.files, 'hold-after-catalog.marker'), { force: true });
    read = await readPublished(path);
    expect([before, { publish: before.publish + 1, events: now }]).toContainEqual(read);
    const split = (readManifest(layout.manifest)?.publish ?? 0) < read.publish;
    expect(split).toBe(true);
    const again = await runCli(emu, ['publish', '--duckdb-path', path]);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    read = await readPublished(path);
    expect(read.events).toBe(now);
    expect(readManifest(layout.manifest)).toMatchObject({ publish: read.publish, tables: { events: { rows: now } } });
    expect(await globbed(layout)).toBe(now);
    // The Parquet files the killed publishes wrote and never named are removed by later publishes:
    // every version file of an earlier publish number is named by the manifest.
    const manifest = readManifest(layout.manifest);
    const named = new Set([
      ...Object.values(manifest?.tables ?? {}).flatMap((t) => Object.values(t.partitions).map((p) => p.version)),
      ...(manifest?.superseded ?? []).map((s) => s.file),
    ]);
    const versions = readdirSync(join(layout.files, '_versions'), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && Number(e.name.split('-')[0]) < (manifest?.publish ?? 0))
      .map((e) => relative(layout.files, join(e.parentPath, e.name)));
    expect(versions.length).toBeGreaterThan(0);
    expect(versions.filter((v) => !named.has(v))).toEqual([]);
  }, 120_000);
});
