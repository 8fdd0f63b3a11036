import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { signals } from '../../connectors/signals.js';
import { statusCommand } from '../../src/cli/commands/status.js';
import { resolveStatusConfig, resolveSyncConfig } from '../../src/config/index.js';
import { syncCommand } from '../../src/cli/commands/sync.js';
import type { StatusReport } from '../../src/reports/status.js';
import { systemClock } from '../../src/core/clock.js';
import { BACKFILL_SECTION, readLedger, updateStreamLedger, type BackfillLedger } from '../../src/state/books/ledger.js';
import { StateStore } from '../../src/state/store.js';
import { backfillOnce } from '../fakes/backfill-harness.js';
import { dbPathOf, statePathOf, syncOnce } from '../fakes/harness.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { keepStateIn } from '../../src/run/state-home.js';
import { dir, emulator } from '../fakes/lifecycle.js';

const DAY = 86_400_000;
const iso = (ms: number): string => new Date(ms).toISOString();

async function status(folder: string, json: boolean): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const config = resolveStatusConfig({
    state: statePathOf(folder),
    duckdbPath: dbPathOf(folder),
    json,
    resources: 'events,signals,users',
  });
  const code = await statusCommand(config, { print: (l) => lines.push(l) });
  return { code, out: lines.join('\n') };
}

describe('status', () => {
  it('shows marks, last runs, the backfill ledger with its gaps, and row counts per project', async () => {
    const emu = await emulator({ seed: 51, eventsPerProject: 300 });
    const d = dir();
    const empty = await status(d, true);
    expect(empty.code).toBe(0);
    expect((JSON.parse(empty.out) as StatusReport).warehouse).toMatchObject({
      available: false,
      reason: 'no warehouse file yet',
    });

    const sync = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      project: 'alpha',
      resources: [events],
    });
    expect(sync.ok).toBe(true);
    const now = new Date();
    const toMs = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) - 2 * DAY;
    const fromMs = toMs - 6 * DAY;
    const bf = await backfillOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      project: '*',
      fromMs,
      toMs,
      windowMs: DAY,
      resources: [events, signals],
    });
    expect(bf.ok).toBe(true);
    // As if a run had died before finishing the third window: it is a gap (in the warehouse's state).
    const store = await StateStore.open(statePathOf(d), { clock: systemClock, purpose: 'backfill' });
    const db = await DuckDbDestination.open(dbPathOf(d));
    await keepStateIn(store, db);
    await store.updateSection<BackfillLedger>(BACKFILL_SECTION, (cur) =>
      updateStreamLedger(readLedger({ sections: { [BACKFILL_SECTION]: cur } }), 'events:*', (s) => {
        // The six windows are one finished interval: cut the third out of it.
        const [all] = s.done;
        expect(s.done).toHaveLength(1);
        expect(all).toMatchObject({ from: iso(fromMs), to: iso(toMs), windows: 6 });
        const whole = all as NonNullable<typeof all>;
        return {
          ...s,
          done: [
            { ...whole, to: iso(fromMs + 2 * DAY), windows: 2 },
            { ...whole, from: iso(fromMs + 3 * DAY), windows: 3 },
          ],
        };
      }),
    );
    await db.close();
    await store.close();

    const { code, out } = await status(d, true);
    expect(code).toBe(0);
    const report = JSON.parse(out) as StatusReport;
    expect(report.warehouse.available).toBe(true);
    const ev = report.resources.find((r) => r.resource === 'events');
    const total = emu.snapshot('events', 'alpha').length;
    expect(ev?.rowsByProject?.alpha).toBe(total);
    expect(ev?.tableRows).toBe(Object.values(ev?.rowsByProject ?? {}).reduce((a, b) => a + b, 0));
    const alpha = ev?.scopes.find((s) => s.project === 'alpha');
    expect(alpha?.sync?.highWaterMark).toBe(sync.startedAt);
    expect(alpha?.sync?.lastRun).toMatchObject({ outcome: 'ok', rows: total });
    expect(alpha?.tableRows).toBe(total);
    const star = ev?.scopes.find((s) => s.project === '*');
    expect(star?.backfill).toMatchObject({
      requested: [{ from: iso(fromMs), to: iso(toMs) }],
      windowsDone: 5,
      gaps: [{ from: iso(fromMs + 2 * DAY), to: iso(fromMs + 3 * DAY) }],
      running: [],
      lastRun: { outcome: 'ok', windows: 6 },
    });
    // One shape of lastRun (state/document.ts): a backfill's counts its pages and requests as a sync's does, and adds its span and windows.
    const backfillRun = star?.backfill?.lastRun;
    expect(Object.keys(backfillRun ?? {})).toEqual(
      expect.arrayContaining(Object.keys(alpha?.sync?.lastRun ?? { missing: true })),
    );
    expect(backfillRun).toMatchObject({ from: iso(fromMs), to: iso(toMs), skipped: 0 });
    expect(backfillRun?.pages).toBeGreaterThan(0);
    expect(backfillRun?.requests).toBeGreaterThanOrEqual(backfillRun?.pages ?? Infinity);
    expect(star?.tableRows).toBe(ev?.tableRows);
    const sig = report.resources.find((r) => r.resource === 'signals');
    expect(sig?.scopes.map((s) => s.project)).toEqual(['alpha', 'beta', 'default']);
    expect(sig?.scopes[0]?.backfill?.fullRead?.rows).toBe(emu.snapshot('signals', 'alpha').length);
    expect(report.resources.find((r) => r.resource === 'users')).toMatchObject({ tableRows: 0, scopes: [] });

    const text = await status(d, false);
    expect(text.out).toMatch(
      new RegExp(`sync     alpha\\s+mark ${sync.startedAt.replace(/\./g, '\\.')}\\s+last run .* ok rows=${total}`),
    );
    expect(text.out).toMatch(/backfill \*\s+requested \[.*\)\s+done 5 windows \(\d+ rows\)\s+gaps \[.*\)/);
    expect(text.out).toMatch(/users: table 0 rows\n {2}never synced or backfilled/);
  });

  it("saved searches and aggregates: how far each search was read and with what query, when counts were refreshed, their tables' rows", async () => {
    const emu = await emulator({ seed: 52, eventsPerProject: 200, projects: ['alpha', 'beta'] });
    const d = dir();
    // The sync that writes what status reads, in-process through the CLI's own config and command.
    const lines: string[] = [];
    const config = resolveSyncConfig(
      {
        baseUrl: emu.url,
        apiKey: emu.apiKey,
        project: '*',
        resources: 'events',
        search: ['err=error', 'orders=order #\\d+,mode=regex'],
        aggregates: true,
        quiet: true,
        json: true,
        duckdbPath: dbPathOf(d),
        state: statePathOf(d),
      },
      {},
    );
    const code = await syncCommand(config, { print: (line) => void lines.push(line) });
    expect(code, lines.join('\n')).toBe(0);
    const startedAt = (JSON.parse(lines.join('\n')) as { startedAt: string }).startedAt;
    const report = JSON.parse((await status(d, true)).out) as StatusReport;
    expect(report.analysts?.searches).toEqual([
      { search: 'err', project: 'alpha', mark: startedAt, query: 'error', mode: 'text' },
      { search: 'err', project: 'beta', mark: startedAt, query: 'error', mode: 'text' },
      { search: 'orders', project: 'alpha', mark: startedAt, query: 'order #\\d+', mode: 'regex' },
      { search: 'orders', project: 'beta', mark: startedAt, query: 'order #\\d+', mode: 'regex' },
    ]);
    expect(report.analysts?.aggregates).toEqual([
      { project: 'alpha', interval: 'day', refreshed: startedAt },
      { project: 'beta', interval: 'day', refreshed: startedAt },
    ]);
    const db = await DuckDbDestination.open(dbPathOf(d), { readOnly: true });
    const own = await db.query(`SELECT project_id, COUNT(*) AS n FROM search_results GROUP BY 1 ORDER BY 1`);
    await db.close();
    expect(report.analysts?.tables.search_results?.byProject).toEqual(
      Object.fromEntries(own.map((r) => [r.project_id, Number(r.n)])),
    );
    expect(report.analysts?.tables.event_counts?.rows).toBeGreaterThan(0);

    const text = (await status(d, false)).out;
    expect(text).toMatch(/^search_results: table \d+ rows \(alpha \d+, beta \d+\)$/m);
    expect(text).toContain(`  search   orders@alpha read up to ${startedAt}  query "order #\\\\d+" (regex)`);
    expect(text).toMatch(/^ {2}counts {3}beta {9}daily counts refreshed /m);
  });
});
