import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { describeServerMatrix, VARIANTS } from '../fakes/server-matrix.js';
import { expectTableMatches, readTable, syncOnce } from '../fakes/harness.js';
import { emulator, dir } from '../fakes/lifecycle.js';

/** Issue 21's server matrix (test/fakes/server-matrix.ts), part 1 of 3: variants 1 to 5; and the lead's report on spans. */
describeServerMatrix(VARIANTS.slice(0, 5));

describe('the lead: "traces of events added just before a second sync are missing after it" (spec flavor, unmodified)', () => {
  it('only spans that start after the run started are missing, and the next run reads them: none lost', async () => {
    const emu = await emulator({ seed: 2101, projects: ['default'], eventsPerProject: 100, historyDays: 1 });
    const d = dir();
    const run = { baseUrl: emu.url, apiKey: emu.apiKey, dir: d, project: 'default' };
    expect((await syncOnce(run)).ok).toBe(true);
    emu.addEvents('default', 30); // timestamp now; the emulator starts child spans up to 2 s after their event
    const startedMs = Date.now();
    expect((await syncOnce(run)).ok).toBe(true);
    const held = new Set((await readTable(d, 'traces')).map((r) => String(r.span_id)));
    const missing = emu.snapshot('traces', 'default').filter((s) => !held.has(String(s.span_id)));
    // A run reads [mark − lookback, its start): a span whose start_time is later belongs to the next
    // run's window (a span starting after its event was logged is this emulator's doing, not a loss).
    const startsMs = missing.map((s) => Number(BigInt(String(s.start_time_ns)) / 1_000_000n));
    for (const [i, ms] of startsMs.entries())
      expect(ms, String(missing[i]?.span_id)).toBeGreaterThanOrEqual(startedMs - 50);
    // The next run stands past the latest of those instants (its clock moved forward instead of
    // waiting for them): they then lie inside its window.
    const aheadMs = Math.max(0, Math.max(0, ...startsMs) + 1 - Date.now());
    const later = { ...systemClock, now: () => Date.now() + aheadMs };
    expect((await syncOnce({ ...run, clock: later })).ok).toBe(true);
    expectTableMatches(await readTable(d, 'traces'), emu.snapshot('traces', 'default'), 'span_id', 'traces');
  });
});
