import { describe, expect, it } from 'vitest';
import { conversations } from '../../connectors/conversations.js';
import { systemClock } from '../../src/core/clock.js';
import { StateStore } from '../../src/state/store.js';
import { expectTableMatches, readTable, statePathOf, syncOnce } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

/**
 * Conversations (and users) are enriched after their last change, as events are: the SDK's
 * conversation rows carry `signals`. The emulator serves them `convoEnrichAfterMs` after a
 * conversation's last message; the run and the emulator share a clock the test moves forward.
 */
describe('settle re-read of conversations', () => {
  it('signals enriched after the lookback has passed are brought in by the settle re-read', async () => {
    let offsetMs = 0;
    const clock = { ...systemClock, now: (): number => Date.now() + offsetMs };
    const ENRICH_MS = 60_000;
    const SETTLE_MS = 120_000;
    const emu = await emulator({
      flavor: 'real',
      seed: 61,
      eventsPerProject: 200,
      projects: ['default'],
      enrichAfterMs: 0,
      convoEnrichAfterMs: ENRICH_MS,
      now: clock.now,
    });
    const d = dir();
    emu.addEvents('default', 20); // their conversations get a new last message now: signals not yet there
    // A short lookback: only the settle pass can see what is enriched later.
    const run = {
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      resources: [conversations],
      lookbackMs: 30_000,
      settleMs: SETTLE_MS,
      clock,
    };
    expect((await syncOnce(run)).ok).toBe(true);
    const stale = (await readTable(d, 'conversations')).filter((r) => r.signals === null || r.signals === undefined);
    expect(stale.length).toBeGreaterThan(0);

    offsetMs += 10 * 60_000; // past the enrichment, the lookback and the settle age
    const second = await syncOnce(run);
    expect(second.ok).toBe(true);
    expectTableMatches(
      await readTable(d, 'conversations'),
      emu.snapshot('conversations', 'default'),
      'id',
      'conversations',
    );
    const st = (await StateStore.read(statePathOf(d))).streams['conversations:default'];
    expect(Date.parse(st?.settled ?? '')).toBe(Date.parse(second.startedAt) - SETTLE_MS);
  });
});
