import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import type { ApiRecord } from '../../src/core/types.js';
import type { Emulator } from '../../emulator/index.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { cursorMillis } from '../../src/normalize/normalize.js';
import { runCli } from '../fakes/cli.js';
import { backfillOnce } from '../fakes/backfill-harness.js';
import { dbPathOf, expectTableMatches, readTable, statePathOf, type PipelineTarget } from '../fakes/harness.js';
import { StateStore } from '../../src/state/store.js';
import { BUDGET_SECTION } from '../../src/run/budget-carry.js';
// The rows the sync wrote: its working file (`--duckdb-path` is the published read copy: docs/analysts.md).
import { workingPathForReading } from '../../src/publish/layout.js';
import { asTheCliLaysItOut, cliWarehouse, DAY, dayStart, iso } from '../fakes/cli-warehouse.js';

/** A harness run into the warehouse the CLI runs of the test then read: its working file, published at the end. */
const seedOf = (emu: Emulator, dir: string): PipelineTarget => ({
  baseUrl: emu.url,
  apiKey: emu.apiKey,
  dir,
  destination: asTheCliLaysItOut(dir),
});

async function setup(): Promise<{
  emu: Emulator;
  dir: string;
  files: readonly string[];
  fromMs: number;
  toMs: number;
}> {
  const { emu, dir, files } = await cliWarehouse({ seed: 41, eventsPerProject: 400 });
  return { emu, dir, files, fromMs: dayStart(8), toMs: dayStart(2) };
}

/**
 * The request starts the last writing run left in state for the next run's budget
 * (`run/budget-carry.ts`), those at or after `sinceMs` when given.
 */
async function carriedSpend(folder: string, sinceMs = 0): Promise<number> {
  const doc = await StateStore.read(statePathOf(folder));
  const owners = Object.values(
    (doc.sections[BUDGET_SECTION] ?? {}) as Record<string, { starts: Record<string, number[]> }>,
  );
  return owners.reduce(
    (n, o) => n + Object.values(o.starts).reduce((m, s) => m + s.filter((at) => at >= sinceMs).length, 0),
    0,
  );
}

describe('verify (the real CLI against the emulator)', () => {
  it('finds a row deleted from the warehouse, exits non-zero, and --repair restores it', async () => {
    const { emu, dir, files, fromMs, toMs } = await setup();
    const range = ['--from', iso(fromMs), '--to', iso(toMs), '--project', '*'];
    // The warehouse verify reads: loaded in-process (the backfill is a means here, not under test).
    const loaded = await backfillOnce({
      ...seedOf(emu, dir),
      project: '*',
      fromMs,
      toMs,
      windowMs: DAY,
      resources: [events],
    });
    expect(loaded.ok, JSON.stringify(loaded.streams.map((s) => s.error?.message))).toBe(true);
    // The setup's backfill runs as the CLI's does: it leaves its spend in state.
    const setupRequests = emu.stats().requests;

    const clean = await runCli(emu, ['verify', ...range, ...files, '--resources', 'events,users,conversations']);
    expect(clean.code, clean.stdout + clean.stderr).toBe(0);
    // Every project is counted on its own (projects from state), every day.
    expect(clean.stdout).toMatch(/verify: 18 windows checked, 18 match, 0 mismatches/);
    expect(clean.stdout).toMatch(/users\s+-\s+no count endpoint is documented for \/v1\/users: not verifiable/);
    expect(clean.stdout).toMatch(/conversations\s+-\s+.*not verifiable/);

    // Delete one event of beta, three days back.
    const victimDay = dayStart(5);
    const db = await DuckDbDestination.open(workingPathForReading(dbPathOf(dir)));
    const [victim] = await db.query(
      `SELECT id, timestamp FROM events WHERE project_id = 'beta' AND timestamp >= '${iso(victimDay)}' AND timestamp < '${iso(victimDay + DAY)}' ORDER BY id LIMIT 1`,
    );
    expect(victim).toBeDefined();
    await db.query(`DELETE FROM events WHERE project_id = 'beta' AND id = '${String(victim?.id)}'`);
    await db.close();

    const found = await runCli(emu, ['verify', ...range, ...files, '--resources', 'events']);
    expect(found.code).toBe(5);
    const mismatches = found.stdout.split('\n').filter((l) => l.includes('MISMATCH'));
    expect(mismatches).toHaveLength(1);
    expect(mismatches[0]).toMatch(
      new RegExp(
        `^events\\s+beta\\s+${iso(victimDay)} → ${iso(victimDay + DAY)}\\s+api=(\\d+) warehouse=\\d+\\s+MISMATCH \\(warehouse -1\\)$`,
      ),
    );
    expect(found.stdout).toMatch(/verify: 18 windows checked, 17 match, 1 mismatch$/m);

    emu.resetStats();
    // The verifies that only read left the spend as the setup's backfill left it.
    expect(await carriedSpend(dir)).toBe(setupRequests);
    const repairFrom = Date.now();
    const repaired = await runCli(emu, ['verify', ...range, ...files, '--resources', 'events', '--repair', '--quiet']);
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    // A repair is a writing run (the run object): it leaves its rate-limit spend for the next run, as a sync does.
    expect(await carriedSpend(dir, repairFrom)).toBe(emu.stats().requests);
    expect(repaired.stdout).toMatch(/repair: re-reading 1 window/);
    expect(repaired.stdout).toMatch(/repair: events\s+beta\s+windows=1 skipped=0 rows=\d+ .* ok/);
    expect(repaired.stdout).toMatch(
      /after repair:\n.*events\s+beta .* ok\nverify: 1 windows checked, 1 match, 0 mismatches/,
    );
    // Only the mismatched window was re-read, with the project as the header.
    const perPage = events.maxPageSize;
    const dayCount = emu.snapshot('events', 'beta').filter((r) => {
      const ms = cursorMillis(events, r) ?? 0;
      return ms >= victimDay && ms < victimDay + DAY;
    }).length;
    expect(emu.stats().byEndpoint['/v1/events']).toBe(Math.max(1, Math.ceil(dayCount / perPage)));

    const rows = await readTable(dir, 'events');
    expect(rows.some((r) => r.project_id === 'beta' && r.id === victim?.id)).toBe(true);
    const expected = emu.snapshot('events').filter((r: ApiRecord) => {
      const ms = cursorMillis(events, r) ?? 0;
      return ms >= fromMs && ms < toMs;
    });
    expectTableMatches(rows, expected, 'id');

    const again = await runCli(emu, ['verify', ...range, ...files, '--resources', 'events']);
    expect(again.code).toBe(0);
  });

  it('says what to do when it cannot verify: no project list for *', async () => {
    const { emu, files, fromMs, toMs } = await setup();
    const range = ['--from', iso(fromMs), '--to', iso(toMs)];
    const noProjects = await runCli(emu, ['verify', ...range, ...files, '--project', '*']);
    expect(noProjects.code).toBe(2);
    expect(noProjects.stdout).toMatch(/needs the list: pass --project-ids a,b/);

    expect(emu.stats().requests).toBe(0);

    // A warehouse that never saw the data: every window of the default project mismatches.
    const empty = await runCli(emu, ['verify', ...range, ...files, '--resources', 'events']);
    expect(empty.code).toBe(5);
    expect(empty.stdout).toMatch(/verify: 6 windows checked, 0 match, 6 mismatches/);
  });

  it('reconciles a whole range in one timeseries request per project when the windows fall on its buckets, else one count per window', async () => {
    const sent: string[] = [];
    const { emu, dir, files } = await cliWarehouse({
      seed: 43,
      eventsPerProject: 300,
      onRequest: (info) => sent.push(info.path),
    });
    const range = ['--from', iso(dayStart(8)), '--to', iso(dayStart(2)), '--project', 'alpha', '--resources', 'events'];
    expect(
      (
        await backfillOnce({
          ...seedOf(emu, dir),
          project: 'alpha',
          fromMs: dayStart(8),
          toMs: dayStart(2),
          windowMs: DAY,
          resources: [events],
        })
      ).ok,
    ).toBe(true);

    sent.length = 0;
    const daily = await runCli(emu, ['verify', ...range, ...files]);
    expect(daily.code, daily.stdout + daily.stderr).toBe(0);
    expect(daily.stdout).toMatch(/verify: 6 windows checked, 6 match, 0 mismatches/);
    expect(sent).toEqual(['/v1/events/timeseries']);

    sent.length = 0;
    const hourly = await runCli(emu, ['verify', ...range, '--window', '6h', ...files]);
    expect(hourly.stdout).toMatch(/verify: 24 windows checked, 24 match, 0 mismatches/);
    expect(sent).toEqual(['/v1/events/timeseries']);

    // Windows off the buckets (from 00:30): the count endpoint, once per window.
    sent.length = 0;
    const offset = await runCli(emu, [
      'verify',
      '--from',
      iso(dayStart(8) + 1_800_000),
      '--to',
      iso(dayStart(2) + 1_800_000),
      '--project',
      'alpha',
      '--resources',
      'events',
      ...files,
    ]);
    expect(offset.stdout).toMatch(/verify: 6 windows checked/);
    expect(sent).toEqual(Array(6).fill('/v1/events/count'));

    // A missing row is found the same way.
    const db = await DuckDbDestination.open(workingPathForReading(dbPathOf(dir)));
    await db.query(
      `DELETE FROM events WHERE id = (SELECT id FROM events WHERE project_id = 'alpha' AND timestamp >= '${iso(dayStart(4))}' AND timestamp < '${iso(dayStart(3))}' ORDER BY id LIMIT 1)`,
    );
    await db.close();
    const missing = await runCli(emu, ['verify', ...range, ...files]);
    expect(missing.code).toBe(5);
    expect(missing.stdout).toMatch(
      new RegExp(`${iso(dayStart(4)).replace(/\./g, '\\.')} → .*MISMATCH \\(warehouse -1\\)`),
    );
  });
});
