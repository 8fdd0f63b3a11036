import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { layoutOf } from '../../src/publish/layout.js';
import { dbPathOf, expectTableMatches, readTable, syncRunOnce } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

describe('the in-process harness through the run object (syncRunOnce: what `query-sync sync` runs)', () => {
  it('writes the rows, its _query_sync_runs row and the published read copy, and reconciles', async () => {
    const emu = await emulator({ seed: 41, eventsPerProject: 60 });
    const d = dir();
    const run = await syncRunOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      flags: { project: 'alpha', resources: 'events,users' },
    });
    expect(run.code, run.output.join('\n')).toBe(0);
    expect(run.output.at(-1)).toMatch(/^sync ok in /);
    // The read copy is published at the run's end: the tables read here are the published ones.
    expect(existsSync(layoutOf(dbPathOf(d)).manifest)).toBe(true);
    expectTableMatches(await readTable(d, 'events'), emu.snapshot('events', 'alpha'), 'id', 'events');
    const runs = await readTable(d, '_query_sync_runs');
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ command: 'sync', outcome: 'ok' });
    // Reconcile ran after the walk (its brief is kept in the run's row).
    expect(JSON.parse(String(runs[0]?.reconcile))).toMatchObject({ mode: 'repair' });
  });

  it('puts the resources under --schema-contract: freeze refuses a new table', async () => {
    const emu = await emulator({ seed: 42, eventsPerProject: 20 });
    const run = await syncRunOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: dir(),
      flags: { project: 'alpha', resources: 'users', schemaContract: 'freeze' },
    });
    expect(run.code).toBe(1);
    expect(run.output.join('\n')).toMatch(
      /the table "users" does not exist and --schema-contract freeze allows no new table/,
    );
  });
});
