import { describe, expect, it } from 'vitest';
import {
  capabilitiesOf,
  keepsState,
  refreshes,
  type OptionalCapabilities,
} from '../../../src/load/destination-capabilities.js';
import type { Destination } from '../../../src/load/destination.js';
import { DuckDbDestination } from '../../../src/load/duckdb/destination.js';
import type { Publisher } from '../../../src/publish/publisher.js';
import { trackWrites } from '../../../src/publish/tracking.js';
import { testBigQueryDestination } from '../../fixtures/bigquery/destination.js';

const offered = (d: Destination): string[] => Object.keys(d.can).sort();

describe('destination capabilities, checked once', () => {
  it('DuckDB keeps state and the trace book, counts, refreshes, defines views and is published as a read copy; it bills nothing and keeps no lease of its own', async () => {
    const duckdb = await DuckDbDestination.open(':memory:');
    try {
      expect(offered(duckdb)).toEqual([
        'byProject',
        'deletions',
        'drop',
        'publish',
        'refresh',
        'state',
        'traceBook',
        'views',
        'windows',
      ]);
      expect(duckdb.can, 'checked once, when it was made').toBe(duckdb.can);
      expect(duckdb.can.state?.stateLocation).toBe('table _query_sync_state of DuckDB file :memory:');
      expect(
        await duckdb.can.windows?.countWindow('missing', {
          projectId: 'p',
          column: 'timestamp',
          fromIso: '2024-01-01T00:00:00Z',
          toIso: '2024-01-02T00:00:00Z',
        }),
      ).toBe(0);
    } finally {
      await duckdb.close();
    }
  });

  it('BigQuery also bills and keeps the run lease in its dataset (and the trace book, as DuckDB)', async () => {
    const bigquery = testBigQueryDestination();
    expect(offered(bigquery)).toEqual([
      'billing',
      'byProject',
      'deletions',
      'drop',
      'leases',
      'refresh',
      'state',
      'traceBook',
      'views',
      'windows',
    ]);
    expect(bigquery.can.billing?.billing()).toEqual({ bytesBilled: 0, bytesProcessed: 0, queryJobs: 0, byTable: {} });
    await bigquery.close();
  });

  it('a destination with only the required members offers nothing, and the guards say so', () => {
    const bare: OptionalCapabilities & Omit<Destination, 'can'> = {
      kind: 'bare',
      describe: () => Promise.resolve(undefined),
      write: () => Promise.resolve({ rows: 0 }),
      count: () => Promise.resolve(0),
      close: () => Promise.resolve(),
    };
    expect(Object.keys(capabilitiesOf(bare))).toEqual([]);
    expect(keepsState(bare)).toBe(false);
    expect(refreshes({ ...bare, dropTable: () => Promise.resolve() })).toBe(false);
  });

  it('a destination tracked for publishing offers the same, and its swaps and drops mark the tables to publish', async () => {
    const duckdb = await DuckDbDestination.open(':memory:');
    try {
      const marked: string[] = [];
      const tracked = trackWrites(duckdb, { mark: (table: string) => void marked.push(table) } as unknown as Publisher);
      expect(offered(tracked)).toEqual(offered(duckdb));
      expect(tracked.can.windows).toBe(duckdb.can.windows);
      await duckdb.query(
        'CREATE TABLE users (id VARCHAR); CREATE TABLE _query_sync_refresh_users (id VARCHAR); CREATE TABLE gone (id VARCHAR)',
      );
      await tracked.can.refresh?.replaceTables([{ table: 'users', shadow: '_query_sync_refresh_users' }]);
      await tracked.can.drop?.dropTable('gone');
      expect(marked).toEqual(['users', 'gone']);
      expect(
        (await duckdb.query('SELECT table_name FROM duckdb_tables() WHERE NOT temporary ORDER BY table_name')).map(
          (r) => r.table_name,
        ),
      ).toEqual(['users']);
    } finally {
      await duckdb.close();
    }
  });
});
