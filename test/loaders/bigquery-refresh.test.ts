import { PassThroughClient } from 'google-auth-library';
import nock from 'nock';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { assertCanRefresh, refreshedTables, shadowTable, ShadowDestination } from '../../src/run/refresh.js';
import type { ApiRecord } from '../../src/core/types.js';
import { BigQueryDestination } from '../../src/load/bigquery/destination.js';
import { SchemaTracker } from '../../src/normalize/normalize.js';
import { FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';

const ts = '2026-11-20T10:00:00.000Z';
const signal = (id: string): ApiRecord => ({ id, name: `name of ${id}` });

function open(): { fake: FakeBigQuery; dest: BigQueryDestination } {
  nock.disableNetConnect();
  const fake = new FakeBigQuery('proj');
  fake.install();
  const dest = new BigQueryDestination({
    projectId: 'proj',
    dataset: 'sync',
    authClient: new PassThroughClient(),
    logger: pino({ level: 'silent' }),
    sleep: async () => undefined,
  });
  return { fake, dest };
}

async function write(
  dest: BigQueryDestination | ShadowDestination,
  tracker: SchemaTracker,
  records: readonly ApiRecord[],
): Promise<void> {
  const rows = records.map((r) => tracker.normalize(r, 'alpha', ts));
  await dest.write({ table: tracker.schema, rows });
}

const ids = (fake: FakeBigQuery, table: string, column = 'id'): string[] =>
  fake
    .rows('sync', table)
    .map((r) => String(r[column]))
    .sort();

describe('sync --full-refresh on BigQuery (the real client, the strict double)', () => {
  afterEach(() => {
    nock.cleanAll();
  });

  it('events and event_signals are replaced by their shadows in one transaction; the live tables are untouched until then, and no shadow is left', async () => {
    const { fake, dest } = open();
    expect(() => assertCanRefresh(dest)).not.toThrow();
    const old = new SchemaTracker(events, undefined, 'run-1');
    await write(dest, old, [
      { id: 'kept', timestamp: ts, signals: [signal('s1'), signal('s2')] },
      { id: 'deleted-at-source', timestamp: ts, signals: [signal('s9')] },
    ]);
    const shadow = new ShadowDestination(dest);
    const fresh = new SchemaTracker(events, undefined, 'run-2');
    // The refresh sees a field the old table lacks: the live table gains the column at the swap.
    await write(shadow, fresh, [{ id: 'kept', timestamp: ts, signals: [signal('s2')], plan: 'pro' }]);
    expect(ids(fake, 'events'), 'live events untouched before the swap').toEqual(['deleted-at-source', 'kept']);
    expect(ids(fake, 'event_signals', 'signal_id')).toEqual(['s1', 's2', 's9']);
    expect(ids(fake, shadowTable('event_signals'), 'signal_id')).toEqual(['s2']);

    const before = fake.queries.length;
    await dest.replaceTables(refreshedTables(events));
    expect(ids(fake, 'events')).toEqual(['kept']);
    expect(fake.rows('sync', 'events')[0]?.plan).toBe('pro');
    expect(ids(fake, 'event_signals', 'signal_id'), 'no bridge row of an event the refresh no longer saw').toEqual([
      's2',
    ]);
    const swaps = fake.queries
      .slice(before)
      .map((q) => q.query)
      .filter((q) => q.includes('WHERE TRUE'));
    expect(swaps, 'one transaction for both tables').toHaveLength(1);
    expect(swaps[0]).toMatch(
      /^BEGIN TRANSACTION;\nDELETE FROM `proj`\.`sync`\.`events` WHERE TRUE;\nINSERT INTO `proj`\.`sync`\.`events` \([^)]+\)\nSELECT [^\n]+ FROM `proj`\.`sync`\.`_query_sync_refresh_events`;\nDELETE FROM `proj`\.`sync`\.`event_signals` WHERE TRUE;\nINSERT INTO [\s\S]+\nCOMMIT TRANSACTION;$/,
    );
    expect(fake.tables.has(`sync.${shadowTable('events')}`)).toBe(false);
    expect(fake.tables.has(`sync.${shadowTable('event_signals')}`)).toBe(false);
    // Ordinary merges go on after the swap.
    await write(dest, new SchemaTracker(events, await dest.describe('events'), 'run-3'), [
      { id: 'new', timestamp: ts },
    ]);
    expect(ids(fake, 'events')).toEqual(['kept', 'new']);
    await dest.close();
  });

  it('a table that did not exist is created like its shadow (partitioning included); a refresh that read nothing empties the table', async () => {
    const { fake, dest } = open();
    const fresh = new SchemaTracker(events, undefined, 'run-1');
    await write(new ShadowDestination(dest), fresh, [{ id: 'e1', timestamp: ts }]);
    await dest.replaceTables([{ table: 'events', shadow: shadowTable('events') }]);
    expect(ids(fake, 'events')).toEqual(['e1']);
    expect(fake.tables.get('sync.events')?.timePartitioning?.field).toBe('timestamp');

    await dest.replaceTables([{ table: 'events', shadow: shadowTable('events') }]);
    expect(ids(fake, 'events'), 'no shadow: nothing was read').toEqual([]);
    await dest.close();
  });

  it('a column whose type differs between the table and its refreshed copy is refused before any row changes, saying what to do', async () => {
    const { fake, dest } = open();
    await write(dest, new SchemaTracker(events, undefined, 'run-1'), [{ id: 'e1', timestamp: ts, plan: 'pro' }]);
    await write(new ShadowDestination(dest), new SchemaTracker(events, undefined, 'run-2'), [
      { id: 'e2', timestamp: ts, plan: 3 },
    ]);
    await expect(dest.replaceTables([{ table: 'events', shadow: shadowTable('events') }])).rejects.toThrow(
      /column "plan" of table events is STRING but its refreshed copy _query_sync_refresh_events has "plan" INT64.*drop the table, then sync --full-refresh again/,
    );
    expect(ids(fake, 'events')).toEqual(['e1']);
    await dest.close();
  });
});
