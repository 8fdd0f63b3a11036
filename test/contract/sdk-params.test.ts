import { describe, expect, it } from 'vitest';
import { findSdkOperation, sdkKnowsParam, sdkOperations, unknownSdkParams } from './sdk-params.js';

describe('sdk-params: the query parameters the vendor SDK knows, read from its source', () => {
  it('reads all 16 operations with their paths', () => {
    const operations = sdkOperations();
    expect(operations).toHaveLength(16);
    expect(new Set(operations.map((op) => op.path))).toEqual(
      new Set([
        '/v1/events',
        '/v1/events/search',
        '/v1/events/count',
        '/v1/events/timeseries',
        '/v1/events/facets',
        '/v1/events/{id}',
        '/v1/traces',
        '/v1/signals',
        '/v1/signals/{id}',
        '/v1/signal-groups',
        '/v1/signal-groups/{id}',
        '/v1/signal-groups/{id}/signals',
        '/v1/users',
        '/v1/users/{id}',
        '/v1/conversations',
        '/v1/conversations/{id}',
      ]),
    );
  });

  it('expands deep-object parameters and map keys, and keeps form names as sent', () => {
    const events = findSdkOperation('/v1/events')!;
    for (const name of [
      'limit',
      'cursor',
      'order_by',
      'timestamp[gte]',
      'timestamp[lt]',
      'user_id',
      'user_id[contains]',
      'properties[plan]',
      'properties[app.version][gte]',
      'traits[plan][eq]',
      'signal',
      'signal_group',
    ]) {
      expect(sdkKnowsParam(events, name), name).toBe(true);
    }
    for (const name of [
      'timestamp',
      'timestamp[from]',
      'project_ids',
      'properties',
      'properties[plan][like]',
      'started_at[gte]',
    ]) {
      expect(sdkKnowsParam(events, name), name).toBe(false);
    }
    expect(findSdkOperation('/v1/events/facets')!.params).toEqual(
      expect.arrayContaining(['timestamp.gte', 'timestamp.lt']),
    );
    expect(findSdkOperation('/v1/traces')!.params).toEqual(['event_id', 'limit', 'trunc_len']);
    expect(unknownSdkParams('/v1/users', new URLSearchParams('last_seen[gte]=x&timestamp[gte]=y&limit=100'))).toEqual([
      'timestamp[gte]',
    ]);
    expect(unknownSdkParams('/v1/conversations', ['started_at[lt]', 'timestamp[lt]'])).toEqual(['timestamp[lt]']);
  });

  it('matches concrete paths: literal ones first, then templates; unknown paths know nothing', () => {
    expect(findSdkOperation('/v1/events/count')!.operationId).toBe('events_count');
    expect(findSdkOperation('/v1/events/evt-000123')!.operationId).toBe('events_get');
    expect(findSdkOperation('/v1/signal-groups/g1/signals')!.operationId).toBe('signal_groups_list_signals');
    expect(findSdkOperation('/v1/nope')).toBeUndefined();
    expect(unknownSdkParams('/v1/nope', ['limit'])).toEqual(['limit']);
  });
});
