import { describe, expect, it } from 'vitest';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { readManifest } from '../../src/publish/manifest.js';
import { runCli } from '../fakes/cli.js';
import { cliWarehouse, dayStart, iso, readPublished } from '../fakes/cli-warehouse.js';

/**
 * Every command that changes the working file publishes the read copy at its end, as a sync does
 * (docs/analysts.md): backfill, verify --repair and reset. Real CLI processes, the emulator on
 * loopback, real DuckDB files; the published copy is read as an analyst would, read-only.
 */

describe('commands that change the working file publish at their end', () => {
  it('backfill publishes; verify --repair publishes the repaired row; reset publishes', async () => {
    const { emu, path, layout, files } = await cliWarehouse({ seed: 41, eventsPerProject: 400 });
    const range = ['--from', iso(dayStart(8)), '--to', iso(dayStart(2)), '--project', '*'];

    const loaded = await runCli(emu, ['backfill', ...range, ...files, '--resources', 'events', '--quiet']);
    expect(loaded.code, loaded.stdout + loaded.stderr).toBe(0);
    const afterBackfill = await readPublished(path);
    expect(afterBackfill.publish).toBe(1);
    expect(afterBackfill.events).toBeGreaterThan(0);

    // A row lost from the working file (as verify's own test does), published so readers see it missing.
    const db = await DuckDbDestination.open(layout.work);
    const [victim] = await db.query(`SELECT id FROM events WHERE project_id = 'beta' ORDER BY id LIMIT 1`);
    expect(victim).toBeDefined();
    await db.query(`DELETE FROM events WHERE project_id = 'beta' AND id = '${String(victim?.id)}'`);
    await db.close();
    const published = await runCli(emu, ['publish', '--duckdb-path', path]);
    expect(published.code, published.stdout + published.stderr).toBe(0);
    expect(await readPublished(path)).toEqual({ publish: 2, events: afterBackfill.events - 1 });

    const repaired = await runCli(emu, ['verify', ...range, ...files, '--resources', 'events', '--repair', '--quiet']);
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    expect(repaired.stdout).toMatch(/repair: re-reading 1 window/);
    // Readers see the repaired row without another sync or `publish`.
    expect(await readPublished(path)).toEqual({ publish: 3, events: afterBackfill.events });
    expect(readManifest(layout.manifest)?.tables.events?.rows).toBe(afterBackfill.events);

    // A sync makes the stream marks a reset forgets (a backfill keeps none); the reset publishes after it.
    const synced = await runCli(emu, ['sync', ...files, '--resources', 'events', '--project', '*', '--quiet']);
    expect(synced.code, synced.stdout + synced.stderr).toBe(0);
    const afterSync = await readPublished(path);
    expect(afterSync.publish).toBe(4);
    const reset = await runCli(emu, ['reset', '--resources', 'events', '--yes', ...files]);
    expect(reset.code, reset.stdout + reset.stderr).toBe(0);
    expect(reset.stdout).toMatch(/reset: published .* \(publish 5, \d+ partition file\(s\) rewritten\)$/m);
    expect(await readPublished(path)).toEqual({ publish: 5, events: afterSync.events });
  }, 120_000);
});
