import { describe, expect, it } from 'vitest';
import { canonicalTimestamp } from '../../../src/normalize/timestamp.js';
import { SchemaTracker, isIsoInstant } from '../../../src/normalize/normalize.js';
import { events } from '../../../connectors/events.js';

describe('canonicalTimestamp', () => {
  it('reads a value already canonical as the general path reads the same instant at +00:00', () => {
    const dates = ['2024-02-29', '2023-02-29', '1900-02-29', '2000-02-29', '2026-04-31', '2026-04-30', '2026-12-31'];
    const more = ['2026-13-01', '2026-00-10', '2026-01-00', '1000-01-01', '9999-12-31', '0999-01-01', '0050-01-01'];
    const times = ['00:00:00', '23:59:59', '24:00:00', '10:60:00', '10:00:60'];
    const fractions = ['', '.1', '.123456', '.000001', '.100', '.1234567', '.'];
    for (const date of [...dates, ...more])
      for (const time of times)
        for (const fraction of fractions) {
          const value = `${date}T${time}${fraction}Z`;
          expect(canonicalTimestamp(value), value).toBe(canonicalTimestamp(value.replace(/Z$/, '+00:00')));
        }
    expect(canonicalTimestamp('2024-02-29T23:59:59.000001Z')).toBe('2024-02-29T23:59:59.000001Z');
    expect(canonicalTimestamp('1900-02-29T00:00:00Z')).toBeUndefined();
  });

  it.each([
    ['2024-05-01T10:00:00Z', '2024-05-01T10:00:00Z'],
    ['2024-05-01T10:00Z', '2024-05-01T10:00:00Z'],
    ['2024-05-01T15:30:00+0530', '2024-05-01T10:00:00Z'],
    ['2024-05-01T15:30+05:30', '2024-05-01T10:00:00Z'],
    ['2024-05-01T12:00:00+02', '2024-05-01T10:00:00Z'],
    ['2024-05-01T01:00:00-10:00', '2024-05-01T11:00:00Z'],
    ['2024-05-01 10:00:00z', '2024-05-01T10:00:00Z'],
    ['2024-05-01T10:00:00.123456789Z', '2024-05-01T10:00:00.123456Z'],
    ['2024-05-01T10:00:00.100Z', '2024-05-01T10:00:00.1Z'],
    ['2024-05-02T01:30:00.5+02:00', '2024-05-01T23:30:00.5Z'],
    ['2024-02-29T00:00:00Z', '2024-02-29T00:00:00Z'],
  ])('%s → %s', (input, expected) => {
    expect(canonicalTimestamp(input)).toBe(expected);
  });

  it.each([
    '2026-02-30T00:00:00Z',
    '2023-02-29T00:00:00Z',
    '2024-05-01T24:00:00Z',
    '2024-05-01T10:00:00',
    '2024-05-01',
    'yesterday',
    '2024-05-01T10:00:00+25:00',
  ])('refuses %s', (input) => {
    expect(canonicalTimestamp(input)).toBeUndefined();
  });

  it('normalize stores the canonical form, so both destinations load the same instant', () => {
    expect(isIsoInstant('2024-05-01T15:30:00+0530')).toBe(true);
    const row = new SchemaTracker(events).normalize(
      { id: 'e1', timestamp: '2024-05-01T15:30+0530' },
      'p',
      '2024-05-03T00:00:00.000Z',
    );
    expect(row['timestamp']).toBe('2024-05-01T10:00:00Z');
  });
});
