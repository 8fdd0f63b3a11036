import { describe, expect, it } from 'vitest';
import { iso } from '../../emulator/entries.js';

describe('the emulator formats instants as Date#toISOString does', () => {
  it('at the edges of days, months, leap years, centuries and the range it computes', () => {
    const edges = [
      0, 1, 999, 86_399_999, 86_400_000, 951_782_399_999, 951_782_400_000, 951_868_800_000, 1_709_164_800_000,
      4_107_542_400_000, 4_107_455_999_999, 253_402_300_799_999,
    ];
    for (const ms of edges) expect(iso(ms), String(ms)).toBe(new Date(ms).toISOString());
  });

  it('at 20,000 instants spread over years 1970–9999, and outside that range (negative, past 9999, fractions)', () => {
    // A fixed sequence (a linear congruential generator), so a failure names the same instant each run.
    let seed = 12_345;
    const next = (): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed / 2_147_483_648;
    };
    for (let i = 0; i < 20_000; i++) {
      const ms = Math.floor(next() * 253_402_300_800_000);
      if (iso(ms) !== new Date(ms).toISOString()) expect(iso(ms), String(ms)).toBe(new Date(ms).toISOString());
    }
    for (const ms of [-1, -86_400_001, 253_402_300_800_000, 1_700_000_000_000.5])
      expect(iso(ms), String(ms)).toBe(new Date(ms).toISOString());
  });
});
