import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { RESOURCES } from '../../../connectors/index.js';
import { events } from '../../../connectors/events.js';
import { resolveSyncConfig } from '../../../src/config/index.js';
import { ConfigError } from '../../../src/core/errors.js';
import { SchemaTracker } from '../../../src/normalize/normalize.js';
import { applyPrivacy, hashValue, resolvePrivacy, withPrivacy } from '../../../src/normalize/privacy.js';

const SALT = 'a-salt-of-some-length';
const hmac = (text: string): string => createHmac('sha256', SALT).update(text).digest('hex');

describe('privacy rules', () => {
  it('drops excluded fields and replaces hashed ones by HMAC-SHA256(salt, value) before normalization', () => {
    const resource = withPrivacy(
      events,
      { exclude: { events: ['user_input'] }, hash: { events: ['user_id', 'properties'] } },
      SALT,
    );
    const tracker = new SchemaTracker(resource);
    const row = tracker.normalize(
      {
        id: 'e1',
        timestamp: '2026-01-01T00:00:00Z',
        user_id: 'u-42',
        user_input: 'my secret',
        properties: { plan: 'pro', n: 12345678901234567890n },
        model: null,
      },
      'alpha',
      '2026-01-02T00:00:00Z',
    );
    expect(row).not.toHaveProperty('user_input');
    expect(tracker.schema.columns.map((c) => c.name)).not.toContain('user_input');
    expect(row.user_id).toBe(hmac('u-42'));
    // Non-strings are hashed as their exact JSON text; the column is a string column.
    expect(row.properties).toBe(hmac('{"plan":"pro","n":12345678901234567890}'));
    expect(tracker.schema.columns.find((c) => c.name === 'properties')?.type).toBe('string');
    expect(row.id).toBe('e1');
    expect(applyPrivacy({ a: null }, new Set(), new Set(['a']), SALT)).toEqual({ a: null });
    expect(hashValue('u-42', SALT)).toMatch(/^[0-9a-f]{64}$/);
    expect(hashValue('u-42', `${SALT}x`)).not.toBe(hashValue('u-42', SALT));
  });

  it('keeps the connector transform, and leaves resources no rule names untouched', () => {
    const base = { ...events, transform: (r: Record<string, unknown>) => ({ ...r, derived: 'x' }) } as typeof events;
    const wrapped = withPrivacy(base, { exclude: { events: ['derived'] }, hash: {} }, undefined);
    expect(wrapped.transform?.({ id: 'e', timestamp: '2026-01-01T00:00:00Z' })).toEqual({
      id: 'e',
      timestamp: '2026-01-01T00:00:00Z',
    });
    expect(withPrivacy(events, { exclude: { traces: ['input'] }, hash: {} }, undefined)).toBe(events);
  });

  it('refuses what would break a sync or leak: key, cursor, project_id, unknown resources, hashing without a salt', () => {
    const refuse = (flags: { excludeColumns?: string; hashColumns?: string }, salt: string | null = SALT): string => {
      try {
        resolvePrivacy(flags, RESOURCES, salt ?? undefined, 'QUERY_SYNC_HASH_SALT');
        return 'accepted';
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as Error).message;
      }
    };
    expect(refuse({ excludeColumns: 'events.id' })).toMatch(/events\.id cannot be excluded/);
    expect(refuse({ hashColumns: 'traces.start_time_ns' })).toMatch(/cannot be hashed/);
    expect(refuse({ excludeColumns: 'users.project_id' })).toMatch(/cannot be excluded/);
    expect(refuse({ excludeColumns: 'orders.total' })).toMatch(/expected resource\.field items/);
    expect(refuse({ excludeColumns: 'user_input' })).toMatch(/expected resource\.field items/);
    expect(refuse({ hashColumns: 'traces.duration_ns' })).toMatch(/declared as int64/);
    expect(refuse({ hashColumns: 'events.user_id' }, null)).toMatch(
      /--hash-columns needs a salt: set QUERY_SYNC_HASH_SALT/,
    );
    expect(refuse({ hashColumns: 'events.user_id' }, 'short')).toMatch(/at least 16 characters/);
    expect(refuse({ excludeColumns: 'events.user_id', hashColumns: 'events.user_id' })).toMatch(/in both/);
    expect(refuse({ excludeColumns: 'events.user_input,traces.input', hashColumns: 'events.user_id' })).toBe(
      'accepted',
    );
  });

  it('config applies the rules to the resources of every command, and keeps the salt out of the config', () => {
    const config = resolveSyncConfig(
      {
        baseUrl: 'http://127.0.0.1:1',
        apiKey: 'k',
        excludeColumns: 'events.user_input,traces.input',
        hashColumns: 'events.user_id',
      },
      { QUERY_SYNC_HASH_SALT: SALT },
    );
    expect(config.privacy).toEqual({
      exclude: { events: ['user_input'], traces: ['input'] },
      hash: { events: ['user_id'] },
    });
    const ev = config.resources.find((r) => r.name === 'events');
    expect(ev?.transform?.({ id: 'e', user_input: 'x', user_id: 'u' })).toEqual({ id: 'e', user_id: hmac('u') });
    expect(JSON.stringify(config)).not.toContain(SALT);
  });
});
