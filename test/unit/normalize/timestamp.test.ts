import { describe, expect, it } from 'vitest';
import { canonicalTimestamp } from '../../../src/normalize/timestamp.js';
import { SchemaTracker, isIsoInstant } from '../../../src/normalize/normalize.js';
import { events } from '../../../connectors/events.js';

describe('canonicalTimestamp', () => {
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
