import { afterEach, describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { startEmulator, type ApiRecord, type Emulator } from '../../emulator/index.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { RECONCILE_TABLE } from '../../src/reconcile/step.js';
import { layoutOf } from '../../src/publish/layout.js';
import { asTheCliLaysItOut } from '../fakes/cli-warehouse.js';
import { runCli } from '../fakes/cli.js';
import { dbPathOf, readTable, statePathOf, syncOnce } from '../fakes/harness.js';
import { tempDir } from '../fakes/tmp.js';

/**
 * Issue 31, the paths the server matrix does not take: `--deletions keep` says a window once, not on
 * every run; a row marked deleted that the list returns again has its mark cleared. The first sync
 * is a means (in-process, into the CLI's layout); the runs under test are the CLI's.
 */

const HOUR = 3_600_000;
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
const iso = (ms: number): string => new Date(ms).toISOString();

async function synced(): Promise<{ emu: Emulator; dir: string; args: string[] }> {
  const emu = await startEmulator({ seed: 31, projects: ['beta'], eventsPerProject: 200, historyDays: 2 });
  cleanups.push(() => emu.close());
  const d = tempDir();
  cleanups.push(d.cleanup);
  const first = await syncOnce({
    baseUrl: emu.url,
    apiKey: emu.apiKey,
    dir: d.dir,
    project: 'beta',
    resources: [events],
    destination: asTheCliLaysItOut(d.dir),
  });
  expect(first.ok).toBe(true);
  const args = [
    'sync',
    '--project',
    'beta',
    '--resources',
    'events',
    '--duckdb-path',
    dbPathOf(d.dir),
    '--state',
    statePathOf(d.dir),
  ];
  return { emu, dir: d.dir, args };
}

/** Events of one hour well inside the checked range (closed, within two days). */
function hourOf(emu: Emulator): { fromMs: number; events: ApiRecord[] } {
  const base = Math.floor(Date.now() / HOUR) * HOUR;
  for (let back = 3; back < 40; back += 1) {
    const fromMs = base - back * HOUR;
    const inHour = emu.snapshot('events', 'beta').filter((e) => {
      const ms = Date.parse(String(e.timestamp));
      return ms >= fromMs && ms < fromMs + HOUR;
    });
    if (inHour.length >= 3) return { fromMs, events: inHour };
  }
  throw new Error('no busy hour');
}

describe('deletions at the source (issue 31)', () => {
  it('--deletions keep leaves the rows, says so once for the window, and exits 0 on both runs', async () => {
    const { emu, dir, args } = await synced();
    const { fromMs, events: inHour } = hourOf(emu);
    const gone = emu.deleteEvents('beta', { ids: inHour.slice(0, 2).map((e) => String(e.id)) });
    const keep = [...args, '--deletions', 'keep'];
    const first = await runCli(emu, keep);
    expect(first.code, first.stdout + first.stderr).toBe(0);
    const line = `reconcile: events beta [${iso(fromMs)}, ${iso(fromMs + HOUR)}) expected ${inHour.length - 2}, found ${inHour.length}: 2 records no longer listed (deleted at the source), kept as they are (--deletions keep; said once for this window); ${inHour.length - 2} listed`;
    expect(first.stdout).toContain(line);
    const second = await runCli(emu, [...keep, '--json']);
    expect(second.code, second.stdout + second.stderr).toBe(0);
    const summary = JSON.parse(second.stdout.trim().split('\n').pop() ?? '{}') as {
      reconcile: { windows: unknown[]; deletions: { keptBefore: number; found: number } };
    };
    // Said before, counts unchanged: neither said nor read again.
    expect(summary.reconcile.windows).toEqual([]);
    expect(summary.reconcile.deletions).toMatchObject({ keptBefore: 1, found: 0 });
    const rows = await readTable(dir, 'events');
    for (const e of gone) expect(rows.find((r) => r.id === e.id)?._deleted_at ?? null).toBeNull();
    const recorded = await readTable(dir, RECONCILE_TABLE);
    expect(recorded.map((r) => [r.outcome, r.deletion, JSON.parse(String(r.deleted_ids))])).toEqual([
      ['kept', 'kept', gone.map((e) => String(e.id)).sort()],
    ]);
  });

  it('a row marked deleted that the list returns again has its mark cleared by the next sync', async () => {
    const { emu, dir, args } = await synced();
    const { fromMs, events: inHour } = hourOf(emu);
    const back = inHour.slice(0, 2).map((e) => String(e.id));
    // As a run that saw them gone would have left them (the records came back since, or never left).
    const db = await DuckDbDestination.open(layoutOf(dbPathOf(dir)).work);
    try {
      await db.query('ALTER TABLE events ADD COLUMN _deleted_at TIMESTAMPTZ');
      await db.query(`UPDATE events SET _deleted_at = now() WHERE id IN (${back.map((id) => `'${id}'`).join(', ')})`);
    } finally {
      await db.close();
    }
    const run = await runCli(emu, args);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toContain(
      `reconcile: events beta [${iso(fromMs)}, ${iso(fromMs + HOUR)}) expected ${inHour.length}, found ${inHour.length - 2}: repaired (${inHour.length} after the re-read; 2 listed again, their deletion mark cleared)`,
    );
    const rows = await readTable(dir, 'events');
    for (const id of back) expect(rows.find((r) => r.id === id)?._deleted_at ?? null).toBeNull();
  });
});
