import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { syncCommand } from '../../src/cli/commands/sync.js';
import { resolveSyncConfig } from '../../src/config/index.js';
import { EXIT_CODES } from '../../src/core/exit-codes.js';
import type { StateDocument } from '../../src/state/store.js';
import { keepStateIn } from '../../src/run/state-home.js';
import { systemClock } from '../../src/core/clock.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { StateStore } from '../../src/state/store.js';
import { runCli } from '../fakes/cli.js';
import { cliWarehouse, DAY, iso } from '../fakes/cli-warehouse.js';
import { statePathOf } from '../fakes/harness.js';

/**
 * `status --check` (docs/running.md): the real CLI judges a warehouse a sync wrote (real DuckDB
 * files, the emulator in its real-service flavor: traces read one event at a time). Time passes by
 * writing the state and the copy's manifest as they would be hours later, never by sleeping.
 */

const HOUR = 3_600_000;

/** A sync in-process, through the CLI's config and command (the step before the thing under test). */
async function syncInProcess(emu: { url: string; apiKey: string }, dir: string, path: string): Promise<void> {
  const lines: string[] = [];
  const config = resolveSyncConfig(
    {
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      project: 'alpha',
      resources: 'events,traces',
      maxRpm: '100000',
      maxRps: '10000',
      quiet: true,
      duckdbPath: path,
      state: statePathOf(dir),
    },
    {},
  );
  const code = await syncCommand(config, { print: (line) => void lines.push(line) });
  expect(code, lines.join('\n')).toBe(0);
}

/** Rewrite the state file as `change` says (what the check reads beside a DuckDB warehouse). */
function editState(dir: string, change: (doc: StateDocument) => StateDocument): void {
  const path = statePathOf(dir);
  writeFileSync(path, JSON.stringify(change(JSON.parse(readFileSync(path, 'utf8')) as StateDocument)));
}

const earlier = (text: string | undefined, ms: number): string | undefined =>
  text === undefined ? undefined : iso(Date.parse(text) - ms);

describe('status --check', () => {
  it('exits 0 with one line when fresh, 7 with a line per breach when the last sync is older than --max-lag or the traces backlog will not drain within --max-backlog-eta', async () => {
    const w = await cliWarehouse({ flavor: 'real', seed: 71, eventsPerProject: 30, projects: ['alpha'] });
    await syncInProcess(w.emu, w.dir, w.path);

    const fresh = await runCli(w.emu, ['status', '--check', ...w.files]);
    expect(fresh.code, fresh.stdout + fresh.stderr).toBe(EXIT_CODES.ok);
    expect(fresh.stdout.trim().split('\n')).toHaveLength(1);
    expect(fresh.stdout).toMatch(
      /^FRESH: 2 streams and the published copy within --max-lag 2 h \(oldest [^)]+\); backlog whole in 0 s/,
    );

    // Three hours later: every mark, run and the copy's as-of moved back by three hours.
    editState(w.dir, (doc) => ({
      ...doc,
      streams: Object.fromEntries(
        Object.entries(doc.streams).map(([key, s]) => [
          key,
          {
            ...s,
            ...(s.mark === undefined ? {} : { mark: earlier(s.mark, 3 * HOUR) }),
            ...(s.lastRun === undefined
              ? {}
              : { lastRun: { ...s.lastRun, at: earlier(s.lastRun.at, 3 * HOUR) as string } }),
          },
        ]),
      ),
    }));
    const manifest = JSON.parse(readFileSync(w.layout.manifest, 'utf8')) as { asOf: string };
    writeFileSync(w.layout.manifest, JSON.stringify({ ...manifest, asOf: earlier(manifest.asOf, 3 * HOUR) }));
    const stale = await runCli(w.emu, ['status', '--check', '--max-lag', '2h', ...w.files]);
    expect(stale.code, stale.stdout + stale.stderr).toBe(EXIT_CODES.stale);
    const lines = stale.stdout.trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(
      /^STALE published copy .*warehouse\.duckdb: as of .*, lag 3 h( \d+ min)? > --max-lag 2 h: /,
    );
    expect(lines[1]).toMatch(
      /^STALE events alpha: stored up to .*, lag 3 h( \d+ min)? > --max-lag 2 h \(last run .* ok\): run query-sync sync --resources events/,
    );
    expect(lines[2]).toMatch(/^STALE traces alpha: stored up to .*, lag 3 h( \d+ min)? > --max-lag 2 h/);
    // 5,000 events owing their traces, and 800,000 a day arriving (the limit reads 576,000): never
    // whole. Written as a run leaves them: the events in the warehouse with no read of their spans
    // in its trace book, the drain's count of them in its lastRun (the state the check reads),
    // and the daily arrivals in state (the warehouse's state table, the file its export).
    const yesterday = iso(Date.now() - DAY).slice(0, 10);
    const hourAgo = new Date(Date.now() - HOUR).toISOString();
    const store = await StateStore.open(statePathOf(w.dir), { clock: systemClock, purpose: 'sync' });
    const db = await DuckDbDestination.open(w.layout.work);
    try {
      await keepStateIn(store, db);
      await db.exclusive((c) =>
        c.run(
          `INSERT INTO events (id, project_id, timestamp) SELECT 'evt-queued-' || i, 'alpha', CAST('${hourAgo}' AS TIMESTAMPTZ) FROM range(5000) t(i)`,
        ),
      );
      await store.updateStream('traces:alpha', (stream) => ({
        ...stream,
        lastRun: {
          ...(stream.lastRun ?? { at: hourAgo, outcome: 'ok', rows: 0, pages: 0, requests: 0, seconds: 0 }),
          owed: 5000,
        },
      }));
      await store.updateSection('children-daily:traces', () => ({
        queued: { [yesterday]: 800_000 },
        shown: { [yesterday]: 400_000 },
      }));
    } finally {
      await db.close();
      await store.close();
    }
    const behind = await runCli(w.emu, ['status', '--check', '--max-lag', '1d', '--max-backlog-eta', '6h', ...w.files]);
    expect(behind.code, behind.stdout + behind.stderr).toBe(EXIT_CODES.stale);
    expect(behind.stdout.trim().split('\n')).toEqual([
      "BACKLOG traces: 5,000 events waiting, never whole at 400/min: at today's arrival rate the backlog grows by 224k a day: see docs/traces.md: read fewer (--traces traced or none), or ask the vendor for a higher limit (docs/traces.md)",
    ]);
    // `status --json` carries the same forecast.
    const json = JSON.parse(
      (await runCli(w.emu, ['status', '--json', ...w.files, '--resources', 'traces'])).stdout,
    ) as {
      resources: { backlog?: { forecast: { pending: number; wholeInSeconds: number | null; growthPerDay: number } } }[];
    };
    expect(json.resources[0]?.backlog?.forecast).toMatchObject({
      pending: 5000,
      wholeInSeconds: null,
      growthPerDay: 224_000,
    });
  });

  it('runs beside a sync that holds the warehouse: reads state and the copy, and the sync finishes undisturbed', async () => {
    // Counting the traces requests of the CLI's sync (the in-process one before it is not counted).
    let counting = false;
    let tracesRead = 0;
    let reading: () => void = () => undefined;
    const readingTraces = new Promise<void>((resolve) => (reading = resolve));
    const w = await cliWarehouse({
      flavor: 'real',
      seed: 72,
      eventsPerProject: 10,
      projects: ['alpha'],
      onRequest: (info) => {
        if (counting && info.path.startsWith('/v1/traces') && ++tracesRead === 2) reading();
      },
    });
    await syncInProcess(w.emu, w.dir, w.path);
    // New events whose traces the next sync reads one a second (--max-rps 1: a minute's limit alone lets
    // 20 reads leave at once, and on tmpfs the sync then ends before the check starts): it holds the
    // working file meanwhile.
    w.emu.addEvents('alpha', 20);
    counting = true;
    let syncEnded = false;
    const paced = [
      'sync',
      '--project',
      'alpha',
      '--resources',
      'events,traces',
      '--max-rpm',
      '60',
      '--max-rps',
      '1',
      '--quiet',
      ...w.files,
    ];
    const sync = runCli(w.emu, paced).then((run) => {
      syncEnded = true;
      return run;
    });
    await readingTraces;
    const check = await runCli(w.emu, ['status', '--check', '--max-lag', '1h', ...w.files]);
    const checkedWhileRunning = !syncEnded;
    expect(check.code, check.stdout + check.stderr).toBe(EXIT_CODES.ok);
    expect(check.stdout).toMatch(/^FRESH: 2 streams and the published copy within --max-lag 1 h/);
    const run = await sync;
    expect(run.code, run.stdout + run.stderr).toBe(EXIT_CODES.ok);
    expect(run.stdout + run.stderr).not.toMatch(/open in another|WarehouseBusy|lock-wait/);
    expect(checkedWhileRunning, 'the check ran while the sync held the warehouse').toBe(true);
    // Its summary says when the traces backlog is whole: it drained.
    expect(run.stdout).toMatch(/^forecast traces: whole, no events waiting/m);

    // A run stopped with events still waiting: the summary forecasts them, and warns past --freshness-target.
    w.emu.addEvents('alpha', 200);
    const stopped = await runCli(w.emu, [...paced, '--max-run-time', '8s', '--freshness-target', '1m']);
    expect(stopped.code, stopped.stdout + stopped.stderr).toBe(EXIT_CODES.maxRunTime);
    const waiting = /^forecast traces: ([\d,]+) events waiting, whole in (\d+) min at 60\/min/m.exec(stopped.stdout);
    expect(waiting, stopped.stdout).not.toBeNull();
    const left = Number(waiting?.[1]?.replace(/,/g, ''));
    expect(left).toBeGreaterThan(100);
    expect(stopped.stdout).toContain(
      `WARNING: traces: ${waiting?.[1]} events waiting, whole in ${waiting?.[2]} min at 60/min`,
    );
    expect(stopped.stdout).toMatch(/past --freshness-target 1 min$/m);
  });
});
