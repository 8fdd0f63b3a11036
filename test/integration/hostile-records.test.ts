import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import type { ApiRecord } from '../../src/core/types.js';
import { renamedColumn } from '../../src/normalize/normalize.js';
import { StateStore } from '../../src/state/store.js';
import { isolateNock, testBigQueryDestination } from '../fixtures/bigquery/destination.js';
import { FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';
import { json, startServer } from '../fakes/bad-server.js';
import { readTable, statePathOf, syncOnce } from '../fakes/harness.js';
import { dir, onCleanup } from '../fakes/lifecycle.js';

// Recent instants, so the second sync's window (mark − lookback) reads them again.
const BASE_MS = Date.now() - 120_000;
const ts = (i: number): string => new Date(BASE_MS + i * 1000).toISOString();
const LONG = `f${'x'.repeat(399)}`;

/** Records whose fields try to take our columns, or cannot be columns as they are. */
function hostile(order: 'forward' | 'reversed'): ApiRecord[] {
  const fields: Array<[string, string]> = [
    ['Plan', 'Pro'],
    ['plan', 'free'],
    ['', 'empty name'],
    ['a.b', 'dotted'],
    ['a-b', 'dashed'],
    ['_synced_at', 'not our time'],
    ['_PARTITIONTIME', 'reserved by BigQuery'],
    ['project_id', 'beta'],
    [LONG, 'long name'],
  ];
  const ordered = order === 'forward' ? fields : [...fields].reverse();
  return [
    // A numeric id: the key is its text, so this and the string "123" below are one row.
    { id: 123, timestamp: ts(1), event_name: 'numeric id', ...Object.fromEntries(ordered) },
    { id: 'e2', timestamp: ts(2), event_name: 'cut emoji', text: 'ok \ud83d', nested: { t: 'x\ud83d' } },
  ];
}

async function hostileServer(): Promise<{
  url: string;
  setOrder(o: 'forward' | 'reversed'): void;
  setExtra(r: ApiRecord[]): void;
}> {
  let order: 'forward' | 'reversed' = 'forward';
  let extra: ApiRecord[] = [];
  const server = await startServer({
    '/v1/events': (_req, _url, res) => {
      // JSON.stringify writes lone surrogates as \ud83d escapes, as a server would.
      json(res, 200, { data: [...hostile(order), ...extra], meta: { cursor: null, has_more: false } });
    },
  });
  onCleanup(server.close);
  return { url: server.url, setOrder: (o) => (order = o), setExtra: (r) => (extra = r) };
}

function capturingLogger(): { logger: pino.Logger; lines: Array<{ level: number; msg: string }> } {
  const lines: Array<{ level: number; msg: string }> = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n'))
        if (line.trim() !== '') lines.push(JSON.parse(line) as { level: number; msg: string });
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream), lines };
}

/** BigQuery's rules for a column name, as the issue lists them. */
function expectBigQueryColumnNames(names: readonly string[]): void {
  for (const name of names) {
    expect(name, name).toMatch(/^[A-Za-z_][A-Za-z0-9_]*$/);
    expect(name.length, name).toBeLessThanOrEqual(300);
    expect(name, name).not.toMatch(/^(_PARTITION|_TABLE_|_FILE_|_ROW_TIMESTAMP|__ROOT__|_COLIDENTIFIER)/i);
  }
  const lower = names.map((n) => n.toLowerCase());
  expect(new Set(lower).size, 'case-insensitively unique').toBe(lower.length);
}

describe('our columns are ours, and every field gets a column both destinations accept', () => {
  it('DuckDB: a record cannot move its row or overwrite _synced_at; case twins, empty, dotted and long names all land; numeric ids are text keys; the mapping holds across runs', async () => {
    const server = await hostileServer();
    const d = dir();
    const { logger, lines } = capturingLogger();
    const first = await syncOnce({
      baseUrl: server.url,
      apiKey: 'k',
      dir: d,
      project: 'alpha',
      resources: [events],
      client: { logger },
    });
    expect(first.streams[0]?.error?.message).toBeUndefined();

    const rows = await readTable(d, 'events');
    expect(rows).toHaveLength(2);
    const row = rows.find((r) => r.id === '123') as Record<string, unknown>;
    expect(row).toBeDefined();
    expect(row.project_id).toBe('alpha'); // not the record's "beta"
    expect(row[renamedColumn('project_id')]).toBe('beta');
    expect(row._synced_at).not.toBe('not our time');
    expect(Date.parse(String(row._synced_at))).not.toBeNaN();
    expect(row[renamedColumn('_synced_at')]).toBe('not our time');
    expect(row[renamedColumn('_PARTITIONTIME')]).toBe('reserved by BigQuery');
    expect(row.Plan).toBe('Pro');
    expect(row[renamedColumn('plan')]).toBe('free');
    expect(row[renamedColumn('')]).toBe('empty name');
    expect(row[renamedColumn('a.b')]).toBe('dotted');
    expect(row[renamedColumn('a-b')]).toBe('dashed');
    expect(row[renamedColumn(LONG)]).toBe('long name');
    const columns = Object.keys(row);
    expectBigQueryColumnNames(columns);

    // The renames are reported, one line each.
    const renames = lines.filter((l) => l.level === 30 && / is stored in column /.test(l.msg));
    expect(renames.map((l) => l.msg).sort()).toHaveLength(8);
    expect(
      renames.some((l) =>
        l.msg.includes(
          `field "plan" of events is stored in column "${renamedColumn('plan')}": another column differs from it only in case ("Plan")`,
        ),
      ),
    ).toBe(true);
    expect(
      renames.some((l) =>
        l.msg.includes(
          `field "project_id" of events is stored in column "${renamedColumn('project_id')}": "project_id" is a column query-sync sets`,
        ),
      ),
    ).toBe(true);

    // A lone surrogate (plain or nested) is stored as U+FFFD and reported, naming record and field.
    const e2 = rows.find((r) => r.id === 'e2') as Record<string, unknown>;
    expect(e2.text).toBe('ok \ufffd');
    expect(JSON.parse(String(e2.nested))).toEqual({ t: 'x\ufffd' });
    for (const field of ['text', 'nested']) {
      expect(
        lines.some(
          (l) =>
            l.level === 40 && l.msg.startsWith(`record e2 of events: field "${field}" holds a lone UTF-16 surrogate`),
        ),
      ).toBe(true);
    }

    // Second run: the fields arrive in the other order (plan before Plan), and "123" as a string.
    server.setOrder('reversed');
    server.setExtra([{ id: '123', timestamp: ts(1), event_name: 'numeric id', plan: 'free2', Plan: 'Pro2' }]);
    const second = await syncOnce({ baseUrl: server.url, apiKey: 'k', dir: d, project: 'alpha', resources: [events] });
    expect(second.streams[0]?.error?.message).toBeUndefined();
    const again = await readTable(d, 'events');
    expect(again).toHaveLength(2); // 123 and "123" are one key
    const row2 = again.find((r) => r.id === '123') as Record<string, unknown>;
    expect(Object.keys(row2).sort()).toEqual(columns.sort()); // no new column: the same mapping
    expect(row2.Plan).toBe('Pro2');
    expect(row2[renamedColumn('plan')]).toBe('free2');
  });

  it('a record without a usable key is a data error naming the record, never a NULL key', async () => {
    for (const id of [null, true, '', { nested: 1 }]) {
      const server = await startServer({
        '/v1/events': (_req, _url, res) =>
          json(res, 200, {
            data: [{ id, timestamp: ts(1), event_name: 'bad key' }],
            meta: { cursor: null, has_more: false },
          }),
      });
      onCleanup(server.close);
      const d = dir();
      const summary = await syncOnce({
        baseUrl: server.url,
        apiKey: 'k',
        dir: d,
        project: 'alpha',
        resources: [events],
      });
      expect(summary.streams[0]?.outcome).toBe('failed');
      expect(summary.streams[0]?.error?.message).toMatch(
        /\[resource events, project alpha\] expected every record to carry its key field "id".*in record \{.*"event_name":"bad key"/,
      );
      expect((await readTable(d, 'events')).length).toBe(0);
      expect((await StateStore.read(statePathOf(d))).streams['events:alpha']?.mark).toBeUndefined();
    }
  });
});

describe('the same records into BigQuery (real client, HTTP answered by nock)', () => {
  isolateNock();

  it('creates only column names BigQuery accepts, and uploads the scope as project_id and the id as text', async () => {
    const server = await hostileServer();
    const fake = new FakeBigQuery('proj');
    fake.install();
    const d = dir();
    const summary = await syncOnce({
      baseUrl: server.url,
      apiKey: 'k',
      dir: d,
      project: 'alpha',
      resources: [events],
      destination: async () => testBigQueryDestination(),
    });
    expect(summary.streams[0]?.error?.message).toBeUndefined();
    const table = [...fake.tables.values()].find((t) => t.tableReference.tableId === 'events');
    const names = (table?.schema?.fields ?? []).map((f) => f.name ?? '');
    expect(names).toContain('Plan');
    expect(names).toContain(renamedColumn('plan'));
    expectBigQueryColumnNames(names);
    const uploaded = fake.uploads
      .filter((u) => u.load.destinationTable.tableId.startsWith('events__stage_'))
      .flatMap((u) => u.ndjson.trim().split('\n'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const row = uploaded.find((r) => r.id === '123');
    expect(row).toMatchObject({
      project_id: 'alpha',
      [renamedColumn('project_id')]: 'beta',
      [renamedColumn('_synced_at')]: 'not our time',
    });
  });
});
