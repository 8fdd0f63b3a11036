import { describe, expect, it } from 'vitest';
import { capabilitiesOf, keepsState, refreshes } from '../../../src/load/destination-capabilities.js';
import type { Destination } from '../../../src/load/destination.js';
import { DuckDbDestination } from '../../../src/load/duckdb.js';
import { testBigQueryDestination } from '../../fixtures/bigquery/destination.js';

const offered = (d: Destination): string[] => Object.keys(capabilitiesOf(d)).sort();

describe('destination capabilities, checked once', () => {
  it('DuckDB keeps state, counts, refreshes and defines views; it bills nothing and keeps no lease of its own', async () => {
    const duckdb = await DuckDbDestination.open(':memory:');
    try {
      expect(offered(duckdb)).toEqual(['byProject', 'drop', 'refresh', 'state', 'views', 'windows']);
      expect(capabilitiesOf(duckdb).state?.stateLocation).toBe('table _query_sync_state of DuckDB file :memory:');
      expect(await capabilitiesOf(duckdb).windows?.countWindow('missing', { projectId: 'p', column: 'timestamp', fromIso: '2024-01-01T00:00:00Z', toIso: '2024-01-02T00:00:00Z' })).toBe(0);
    } finally {
      await duckdb.close();
    }
  });

  it('BigQuery also bills and keeps the run lease in its dataset', async () => {
    const bigquery = testBigQueryDestination();
    expect(offered(bigquery)).toEqual(['billing', 'byProject', 'drop', 'leases', 'refresh', 'state', 'views', 'windows']);
    expect(capabilitiesOf(bigquery).billing?.billing()).toEqual({ bytesBilled: 0, bytesProcessed: 0, queryJobs: 0, byTable: {} });
    await bigquery.close();
  });

  it('a destination with only the required members offers nothing, and the guards say so', () => {
    const bare: Destination = {
      kind: 'bare',
      describe: () => Promise.resolve(undefined),
      write: () => Promise.resolve({ rows: 0 }),
      count: () => Promise.resolve(0),
      close: () => Promise.resolve(),
    };
    expect(offered(bare)).toEqual([]);
    expect(keepsState(bare)).toBe(false);
    expect(refreshes({ ...bare, dropTable: () => Promise.resolve() })).toBe(false);
  });
});
