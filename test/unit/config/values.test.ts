import { describe, expect, it } from 'vitest';
import { parseInstant, parseSize, parseStrictDuration } from '../../../src/config/values.js';
import { ConfigError } from '../../../src/core/errors.js';

/** The value parsers of `src/config/index.ts`, called directly (config.test.ts covers them through the settings). */

/** The message of the ConfigError that `parse` throws (a value instead fails the test). */
function refusal(parse: () => unknown): string {
  let thrown: unknown = 'nothing thrown: a value was returned';
  try {
    parse();
  } catch (error) {
    thrown = error;
  }
  expect(thrown).toBeInstanceOf(ConfigError);
  return (thrown as Error).message;
}

describe('parseStrictDuration', () => {
  it('reads every unit, decimals and surrounding spaces, in milliseconds', () => {
    const cases: Array<[string, number]> = [
      ['500ms', 500],
      ['30s', 30_000],
      ['1.5s', 1500],
      ['15m', 900_000],
      ['1h', 3_600_000],
      ['1d', 86_400_000],
      ['2w', 1_209_600_000],
      [' 15m ', 900_000],
      ['15 m', 900_000],
    ];
    for (const [text, ms] of cases) expect(parseStrictDuration('--lookback', text), text).toBe(ms);
  });

  it('takes a bare zero (no unit to get wrong), and refuses any other bare number, suggesting units', () => {
    for (const zero of ['0', '00', '0.0', ' 0 ']) expect(parseStrictDuration('--lock-wait', zero), zero).toBe(0);
    expect(refusal(() => parseStrictDuration('--window', '90'))).toBe(
      '--window: "90" has no unit; write it with one, e.g. 90s, 90m, 90h or 90d (units: ms, s, m, h, d, w)',
    );
    expect(refusal(() => parseStrictDuration('QUERY_SYNC_LOOKBACK', '0.5'))).toMatch(
      /^QUERY_SYNC_LOOKBACK: "0\.5" has no unit/,
    );
  });

  it('refuses unknown units, negative and empty values, naming the setting and the value', () => {
    for (const bad of ['15 minutes', '1y', '-5m', '', 'm', '1h30m', '1e3s']) {
      expect(
        refusal(() => parseStrictDuration('--lookback', bad)),
        bad,
      ).toBe(`--lookback: expected a duration with a unit such as 500ms, 30s, 15m, 1h or 1d, got "${bad}"`);
    }
  });
});

describe('parseSize', () => {
  it('returns the size in bytes as DuckDB reads it (trimmed), decimal and binary units, any case', () => {
    for (const [text, out] of [
      ['512MB', 512_000_000],
      ['1GB', 1_000_000_000],
      ['1.5GiB', 1.5 * 1024 ** 3],
      ['64kb', 64_000],
      [' 2TB ', 2_000_000_000_000],
    ] as const) {
      expect(parseSize('--duckdb-memory-limit', text), text).toBe(out);
    }
  });

  it('refuses a bare number, suggesting units, and anything else that is not a size', () => {
    expect(refusal(() => parseSize('--batch-bytes', '8'))).toBe(
      '--batch-bytes: "8" has no unit; write it with one, e.g. 8MB or 8GB (units: KB, MB, GB, TB, KiB, MiB, GiB)',
    );
    for (const bad of ['8 megabytes', 'MB', '-1GB', '1PB', '']) {
      expect(
        refusal(() => parseSize('--batch-bytes', bad)),
        bad,
      ).toBe(`--batch-bytes: expected a size with a unit such as 32MB or 1GB, got "${bad}"`);
    }
  });
});

describe('parseInstant', () => {
  it('reads an instant with Z or an offset, with or without seconds and fractions', () => {
    expect(parseInstant('--from', '2026-03-01T00:00:00Z')).toBe(Date.UTC(2026, 2, 1));
    expect(parseInstant('--from', '2026-03-01T09:00:00+09:00')).toBe(Date.UTC(2026, 2, 1));
    expect(parseInstant('--from', '2026-03-01T00:00-05:30')).toBe(Date.UTC(2026, 2, 1, 5, 30));
    expect(parseInstant('--from', '2026-03-01T00:00:00.123Z')).toBe(Date.UTC(2026, 2, 1, 0, 0, 0, 123));
    expect(parseInstant('--from', ' 2024-02-29T23:59:59Z ')).toBe(Date.UTC(2024, 1, 29, 23, 59, 59));
  });

  it('refuses days and hours that do not exist rather than rolling them over', () => {
    for (const bad of [
      '2026-02-29T00:00:00Z',
      '2026-02-30T00:00:00Z',
      '2026-04-31T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-03-01T24:00:00Z',
      '2026-03-01T10:60:00Z',
      '2026-03-01T10:00:60Z',
    ]) {
      expect(
        refusal(() => parseInstant('--to', bad)),
        bad,
      ).toMatch(new RegExp(`^--to: "${bad}" is not a real date and time \\(no such day or hour\\)`));
    }
  });

  it('refuses a time without an offset (the machine zone would be guessed), saying to add one; other text gets the expected form', () => {
    const example = 'such as 2026-01-01T00:00:00Z or 2026-01-01T09:00:00+09:00';
    for (const local of ['2026-03-01', '2026-03-01T10:00', '2026-03-01T10:00:00.5']) {
      expect(
        refusal(() => parseInstant('--start', local)),
        local,
      ).toBe(
        `--start: expected an ISO-8601 instant with its offset, ${example}, got "${local}" (it has no offset: add Z for UTC, or +hh:mm)`,
      );
    }
    for (const other of ['yesterday', '1740787200', '2026-03-01 10:00:00Z', '2026-03-01T10:00:00+0900']) {
      expect(
        refusal(() => parseInstant('--start', other)),
        other,
      ).toBe(`--start: expected an ISO-8601 instant with its offset, ${example}, got "${other}"`);
    }
  });
});
