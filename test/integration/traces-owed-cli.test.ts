import { describe, expect, it } from 'vitest';
import { traces } from '../../connectors/traces.js';
import { workingPathForReading } from '../../src/publish/layout.js';
import { owedMarkSectionName } from '../../src/state/books/traces.js';
import { StateStore } from '../../src/state/store.js';
import { runCli } from '../fakes/cli.js';
import { dbPathOf, expectTableMatches, readTable, statePathOf, storageFlags } from '../fakes/harness.js';
import { dir } from '../fakes/lifecycle.js';
import {
  DAY_MS,
  eventsToForget,
  expectEverySpan,
  forgetEvents,
  realShape,
  traceReads,
} from '../fakes/real-shape-traces.js';

/**
 * Traces owed after the warehouse is changed by the CLI's other commands (issue 31, item 1: traces
 * follow the events table), on the real service's shape: `reset --resources traces`, `verify
 * --repair`, reconcile's repair and a first backfill, each through the built CLI (a slow file: nine
 * CLI runs). The same rule in process: traces-owed.test.ts.
 */

describe('traces owed after the warehouse is changed by the CLI (real-service shape)', {
  timeout: 240_000,
}, () => {
  const storage = (d: string): string[] => [...storageFlags(d), '--max-rps', '1000', '--max-rpm', '100000'];

  it('reset --resources traces forgets which spans were read: the next sync reads every event again', async () => {
    const emu = await realShape(66);
    const d = dir();
    const sync = ['sync', ...storage(d), '--resources', 'events,traces'];
    const first = await runCli(emu, sync);
    expect(first.code, first.stdout + first.stderr).toBe(0);
    // A drain that ended with nothing owed marks when its listing started (BigQuery lists only the
    // days changed since: load/bigquery/trace-book.ts); reset drops the mark with the book's reads.
    const marks = async () => (await StateStore.read(statePathOf(d))).sections[owedMarkSectionName(traces)];
    expect(Object.keys((await marks()) ?? {})).toEqual(['default']);
    const reset = await runCli(emu, ['reset', '--resources', 'traces', '--yes', ...storage(d).slice(0, 4)]);
    expect(reset.code, reset.stdout + reset.stderr).toBe(0);
    expect(reset.stdout).toContain('forgot which events records had their traces read');
    expect(await marks()).toBeUndefined();
    emu.resetStats();
    const next = await runCli(emu, sync);
    expect(next.code, next.stdout + next.stderr).toBe(0);
    expect(traceReads(emu)).toBe(emu.snapshot('events', 'default').length);
    await expectEverySpan(emu, d);
  });

  it("events written by verify --repair and by reconcile's repair get their spans on the next run", async () => {
    const emu = await realShape(67);
    const d = dir();
    const sync = ['sync', ...storage(d), '--resources', 'events,traces'];
    expect((await runCli(emu, sync)).code).toBe(0);
    // Older events for verify (outside reconcile's recent two days), recent ones for reconcile.
    const { all, now, old, recent } = eventsToForget(emu);
    await forgetEvents(
      workingPathForReading(dbPathOf(d)),
      [...old, ...recent].map((e) => String(e.id)),
    );
    const range = [
      '--from',
      new Date(now - 40 * DAY_MS).toISOString(),
      '--to',
      new Date(now - 2 * DAY_MS).toISOString(),
    ];
    const verify = await runCli(emu, ['verify', ...range, ...storage(d), '--resources', 'events', '--repair']);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);
    // The sync's reconcile repairs the recent events; the next run reads the spans still owed.
    const repaired = await runCli(emu, sync);
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    const next = await runCli(emu, sync);
    expect(next.code, next.stdout + next.stderr).toBe(0);
    expectTableMatches(await readTable(d, 'events'), all, 'id');
    await expectEverySpan(emu, d);
  });

  it('a first backfill through the CLI exits 0 and says how many events owe their spans', async () => {
    const emu = await realShape(68);
    const d = dir();
    const now = Date.now();
    const backfill = await runCli(emu, [
      'backfill',
      '--from',
      new Date(now - 40 * DAY_MS).toISOString(),
      '--to',
      new Date(now).toISOString(),
      ...storage(d),
      '--resources',
      'events,traces',
    ]);
    expect(backfill.code, backfill.stdout + backfill.stderr).toBe(0);
    expect(backfill.stdout).toContain(
      `${emu.snapshot('events', 'default').length} events records owe their traces (read one at a time on this server): the next sync reads them`,
    );
    const status = await runCli(emu, ['status', ...storage(d).slice(0, 4)]);
    expect(status.stdout).toContain(`backlog ${emu.snapshot('events', 'default').length} (default `);
  });
});
