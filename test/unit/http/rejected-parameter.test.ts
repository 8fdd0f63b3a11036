import { describe, expect, it } from 'vitest';
import { rejectedParameter } from '../../../src/http/client-errors.js';

describe('rejectedParameter (400 bodies naming a parameter, the SDK error shape)', () => {
  it('names the field, what was sent, and what the server allows', () => {
    const body = JSON.stringify({
      error: {
        code: 'invalid_parameter',
        message: 'Unknown filter',
        details: { field: 'timestamp[gte]', allowed_fields: ['last_seen[gte]', 'first_seen[gte]'] },
      },
    });
    expect(rejectedParameter(body, { 'timestamp[gte]': '2026-01-01T00:00:00.000Z' })).toEqual({
      field: 'timestamp[gte]',
      sent: '2026-01-01T00:00:00.000Z',
      message: 'Unknown filter',
      allowed: ['last_seen[gte]', 'first_seen[gte]'],
    });
  });

  it('a required parameter we did not send comes back with sent undefined', () => {
    const body = JSON.stringify({
      error: { code: 'missing_parameter', message: 'event_id is required', details: { field: 'event_id' } },
    });
    expect(rejectedParameter(body, { limit: '1' })).toMatchObject({ field: 'event_id', sent: undefined, allowed: [] });
  });

  it('other bodies are not read as a parameter error', () => {
    expect(rejectedParameter('{"error":{"code":"bad","message":"no"}}', {})).toBeUndefined();
    expect(rejectedParameter('not json', {})).toBeUndefined();
    expect(rejectedParameter(undefined, {})).toBeUndefined();
  });
});
