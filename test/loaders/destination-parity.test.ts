import { join } from 'node:path';
import { isLosslessNumber, parse as losslessParse } from 'lossless-json';
import { describe, expect, it } from 'vitest';
import type { LogicalType, TableSchema } from '../../src/core/types.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { dir } from '../fakes/lifecycle.js';
import { isolateNock, testBigQueryDestination } from '../fixtures/bigquery/destination.js';
import { FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';
import { BEYOND_2_53, eventRows, eventsTable } from '../fixtures/bigquery/tables.js';

/**
 * One fixture batch (unicode, nested JSON with integers beyond 2^53, an INT64 beyond 2^53,
 * microsecond and offset timestamps, NULLs, a duplicate key) through both destinations: the rows in
 * a real DuckDB file, and the rows BigQuery would receive (the NDJSON the real client uploads,
 * captured by nock). After normalizing each side's representation, they must be the same rows.
 */

type Normalized = Record<string, string | bigint | number | boolean | null>;

isolateNock();

describe('DuckDB and BigQuery destinations agree on a batch', () => {
  it('writes the same rows with the same values', async () => {
    // DuckDB: a real file.
    const duck = await DuckDbDestination.open(join(dir(), 'parity.duckdb'));
    let duckRows: Normalized[];
    try {
      await duck.write({ table: eventsTable, rows: eventRows });
      // TIMESTAMPTZ comes back through a JS Date (milliseconds): read exact microseconds beside it.
      const raw = await duck.query(
        'SELECT *, epoch_us("timestamp") AS "timestamp__us", epoch_us("_synced_at") AS "_synced_at__us" FROM events',
      );
      duckRows = raw.map((row) =>
        normalizeRow(eventsTable, (name, type) => (type === 'timestamp' ? row[`${name}__us`] : row[name])),
      );
    } finally {
      await duck.close();
    }

    // BigQuery: the real client, nock answering.
    const fake = new FakeBigQuery('proj');
    fake.install();
    const bq = testBigQueryDestination();
    await bq.write({ table: eventsTable, rows: eventRows });
    await bq.close();
    expect(fake.uploads).toHaveLength(1);
    const uploaded = (fake.uploads[0]?.ndjson ?? '')
      .split('\n')
      .filter((line) => line.length > 0)
      .map((line) => losslessParse(line) as Record<string, unknown>);
    const bqRows = uploaded.map((row) => normalizeRow(eventsTable, (name) => row[name]));

    const byKey = (a: Normalized, b: Normalized): number =>
      `${String(a['project_id'])}/${String(a['id'])}`.localeCompare(`${String(b['project_id'])}/${String(b['id'])}`);
    duckRows.sort(byKey);
    bqRows.sort(byKey);

    // Same keys: three rows, the duplicate resolved to the same (newer) copy on both sides.
    expect(duckRows.map((r) => `${String(r['project_id'])}/${String(r['id'])}`)).toEqual([
      'alpha/evt_1',
      'alpha/evt_2',
      'beta/evt_3',
    ]);
    expect(bqRows).toEqual(duckRows);

    // And the values are the fixture's, not a shared mistake.
    const evt1 = duckRows[0];
    expect(evt1?.['event_name']).toBe('héllo — 日本語 🚀 "quoted" \\ back');
    expect(evt1?.['duration_ns']).toBe(BEYOND_2_53);
    expect(evt1?.['timestamp']).toBe(1_714_557_600_123_456n);
    expect(evt1?.['properties']).toBe(
      '{"emoji":"🎉","line":"a\\nb","nested":{"big":9223372036854775807,"list":[1,2.5,"ü"],"ns":1714607999999999999}}',
    );
    expect(duckRows[1]?.['timestamp']).toBe(BigInt(Date.parse('2024-05-01T23:30:00Z')) * 1000n);
    expect(duckRows[2]).toMatchObject({
      event_name: null,
      properties: null,
      duration_ns: null,
      score: null,
      is_test: null,
    });
  });
});

/** One representation per logical type, whichever destination the value came from. */
function normalizeRow(table: TableSchema, get: (name: string, type: LogicalType) => unknown): Normalized {
  const out: Normalized = {};
  for (const column of table.columns) out[column.name] = normalizeCell(column.type, get(column.name, column.type));
  return out;
}

function normalizeCell(type: LogicalType, value: unknown): string | bigint | number | boolean | null {
  if (value === null || value === undefined) return null;
  switch (type) {
    case 'string':
      return String(value);
    case 'int64':
      return BigInt(String(value)); // bigint from DuckDB, decimal string in the NDJSON
    case 'float64':
      return Number(String(value));
    case 'bool':
      return Boolean(value);
    case 'timestamp':
      return typeof value === 'bigint' ? value : isoToMicros(String(value));
    case 'json':
      // DuckDB gives JSON text, the NDJSON a parsed (lossless) value.
      return canonicalJson(typeof value === 'string' ? losslessParse(value) : value);
  }
}

/** Canonical JSON text: sorted keys, integers as exact digits, other numbers as JS numbers. */
function canonicalJson(value: unknown): string {
  if (isLosslessNumber(value)) {
    const text = value.toString();
    return /^-?\d+$/.test(text) ? BigInt(text).toString() : JSON.stringify(Number(text));
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Microseconds since the epoch of an ISO-8601 instant with up to 9 fractional digits and an offset. */
function isoToMicros(iso: string): bigint {
  const m = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}(?::?\d{2})?)$/.exec(iso);
  if (m === null) throw new Error(`not an ISO instant: ${iso}`);
  const [, date, time, fraction = '', zone = 'Z'] = m;
  const offset =
    zone === 'Z'
      ? 'Z'
      : zone.length === 3
        ? `${zone}:00`
        : zone.includes(':')
          ? zone
          : `${zone.slice(0, 3)}:${zone.slice(3)}`;
  const wholeSecondMs = Date.parse(`${date}T${time}${offset}`);
  return BigInt(wholeSecondMs) * 1000n + BigInt(`${fraction}000000`.slice(0, 6));
}
