import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { users } from '../../connectors/users.js';
import { parseJson } from '../../src/core/json.js';
import type { ApiRecord } from '../../src/core/types.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { bytesOf, sizeText } from '../../src/config/size.js';
import { SchemaTracker } from '../../src/normalize/normalize.js';
import { dir } from '../fakes/lifecycle.js';

/** A DuckDB file in a folder removed after the test. */
const dbPath = (): string => join(dir(), 'w.duckdb');
const at = '2026-11-21T00:00:00.000Z';

describe('DuckDbDestination', () => {
  it('creates the table, keeps strings byte-exact and big integers exact, and merges on the key', async () => {
    const path = dbPath();
    const db = await DuckDbDestination.open(path);
    const t = new SchemaTracker(events);
    const tricky = 'é☃😀 "q" \\ back\nline\ttab 中文';
    const recs = [
      { id: 'e1', timestamp: '2026-11-20T10:00:00.123Z', user_input: tricky, properties: { n: 1800000000123456789n } },
      { id: 'e2', timestamp: '2026-11-20T10:00:00.123Z', user_input: 'x' },
    ] as ApiRecord[];
    const first = recs.map((r) => t.normalize(r, 'alpha', at));
    await db.write({ table: t.schema, rows: first });
    // The same key again in another project is another row; the same (project, key) replaces.
    await db.write({
      table: t.schema,
      rows: [t.normalize({ id: 'e1', timestamp: '2026-11-20T10:00:00.123Z', user_input: 'new' }, 'beta', at)],
    });
    await db.write({
      table: t.schema,
      rows: [t.normalize({ id: 'e2', timestamp: '2026-11-20T10:00:00.123Z', user_input: 'y' }, 'alpha', at)],
    });
    const rows = await db.query(
      'SELECT project_id, id, user_input, properties, timestamp FROM events ORDER BY project_id, id',
    );
    expect(rows).toEqual([
      {
        project_id: 'alpha',
        id: 'e1',
        user_input: tricky,
        properties: '{"n":1800000000123456789}',
        timestamp: '2026-11-20T10:00:00.123Z',
      },
      { project_id: 'alpha', id: 'e2', user_input: 'y', properties: null, timestamp: '2026-11-20T10:00:00.123Z' },
      { project_id: 'beta', id: 'e1', user_input: 'new', properties: null, timestamp: '2026-11-20T10:00:00.123Z' },
    ]);
    const exact = await db.query(
      `SELECT CAST(json_extract(properties, '$.n') AS BIGINT) AS n FROM events WHERE id = 'e1' AND project_id = 'alpha'`,
    );
    expect(exact[0]?.n).toBe(1800000000123456789n);
    await db.close();

    // Reopen: the file is real and durable; the schema is read back.
    const again = await DuckDbDestination.open(path);
    expect(await again.count('events')).toBe(3);
    const cols = await again.describe('events');
    expect(cols?.find((c) => c.name === 'timestamp')?.type).toBe('timestamp');
    expect(await again.count('nope')).toBe(0);
    await again.close();
  });

  it("writes a batch's state and trace book exactly, values written into the SQL or, with a NUL, as parameters", async () => {
    const db = await DuckDbDestination.open(dbPath());
    const t = new SchemaTracker(events);
    const tricky = `{"q":"it's \\"x\\" é☃😀 中文 \\\\ ; COMMIT; --"}`;
    const read = (eventId: string) => ({
      resource: 'traces',
      projectId: "p'1",
      eventId,
      eventAt: '2026-11-20T10:00:00.123Z',
      traces: 3,
      readAt: '2026-11-21T00:00:00Z',
    });
    const commit = (rows: { key: string; value: string | null }[], eventId: string) => ({
      traceReads: [read(eventId)],
      rows,
    });
    await db.write({
      table: t.schema,
      rows: [t.normalize({ id: 'e1', timestamp: at }, 'alpha', at)],
      state: commit(
        [
          { key: "stream:it's", value: tricky },
          { key: 'gone', value: 'x' },
        ],
        "ev'1",
      ),
    });
    // A NUL in a value: the statements take it as a parameter. A null value deletes its key.
    await db.write({
      table: t.schema,
      rows: [t.normalize({ id: 'e2', timestamp: at }, 'alpha', at)],
      state: commit(
        [
          { key: 'nul', value: 'a\u0000b' },
          { key: 'gone', value: null },
        ],
        'ev\u00002',
      ),
    });
    expect(await db.readState()).toEqual([
      { key: 'nul', value: 'a\u0000b' },
      { key: "stream:it's", value: tricky },
    ]);
    const book = await db.query(
      'SELECT project_id, parent_id, parent_at, children FROM _query_sync_children ORDER BY parent_id DESC',
    );
    expect(book).toEqual([
      { project_id: "p'1", parent_id: "ev'1", parent_at: '2026-11-20T10:00:00.123Z', children: 3n },
      { project_id: "p'1", parent_id: 'ev\u00002', parent_at: '2026-11-20T10:00:00.123Z', children: 3n },
    ]);
    expect(await db.count('events')).toBe(2);
    await db.close();
  });

  it('adds a column for a new field without losing rows', async () => {
    const db = await DuckDbDestination.open(dbPath());
    const t = new SchemaTracker(events);
    await db.write({ table: t.schema, rows: [t.normalize({ id: 'a', timestamp: at }, 'p', at)] });
    const later = t.normalize({ id: 'b', timestamp: at, tool_calls: [{ name: 'x' }] }, 'p', at);
    await db.write({ table: t.schema, rows: [later] });
    const rows = await db.query('SELECT id, tool_calls FROM events ORDER BY id');
    expect(rows).toEqual([
      { id: 'a', tool_calls: null },
      { id: 'b', tool_calls: '[{"name":"x"}]' },
    ]);
    await db.close();
  });

  it('never lets an older copy of a row replace a newer one', async () => {
    const db = await DuckDbDestination.open(dbPath());
    const t = new SchemaTracker(users);
    const newer = parseJson('{"id":"u1","last_seen":"2026-11-21T10:00:00Z","event_count":9}') as ApiRecord;
    const older = parseJson('{"id":"u1","last_seen":"2026-11-20T10:00:00Z","event_count":3}') as ApiRecord;
    await db.write({ table: t.schema, rows: [t.normalize(newer, 'p', at)] });
    await db.write({ table: t.schema, rows: [t.normalize(older, 'p', at)] });
    expect(await db.query('SELECT event_count FROM users')).toEqual([{ event_count: 9n }]);
    await db.close();
  });

  it('refuses a row with a column the table schema does not name, rather than dropping the value', async () => {
    const db = await DuckDbDestination.open(dbPath());
    const t = new SchemaTracker(events);
    const schemaBefore = t.schema;
    const row = t.normalize({ id: 'a', timestamp: at, brand_new: 1 }, 'p', at);
    await expect(db.write({ table: schemaBefore, rows: [row] })).rejects.toThrow(/brand_new/);
    await db.close();
  });

  it('dedupes a key repeated inside one batch', async () => {
    const db = await DuckDbDestination.open(dbPath());
    const t = new SchemaTracker(events);
    const row = t.normalize({ id: 'a', timestamp: at, user_input: 'same' }, 'p', at);
    const result = await db.write({ table: t.schema, rows: [row, { ...row }] });
    expect(result.rows).toBe(1);
    expect(await db.count('events')).toBe(1);
    await db.close();
  });

  it('a row that does not fit the memory limit alone fails clearly, naming the setting to change', async () => {
    const t = new SchemaTracker(events);
    const row = t.normalize({ id: 'huge', timestamp: at, user_input: 'z'.repeat(40_000_000) }, 'p', at);
    const db = await DuckDbDestination.open(dbPath(), { memoryLimitBytes: 16_000_000 });
    await expect(db.write({ table: t.schema, rows: [row] })).rejects.toThrow(
      /DuckDB write to table events failed: [\s\S]*DuckDB's memory limit is 16MB and is not raised on its own\. The batch was written in parts down to single rows \(of up to about 40000 KB\) and still did not fit[\s\S]*Set --duckdb-memory-limit higher/,
    );
    await db.close();
  }, 60_000);

  it('reads DuckDB sizes as DuckDB does, and writes bytes back as it reads them', () => {
    expect(bytesOf('32MB')).toBe(32_000_000);
    expect(bytesOf('1GB')).toBe(1_000_000_000);
    expect(bytesOf('1GiB')).toBe(1_073_741_824);
    expect(bytesOf('512 KB')).toBe(512_000);
    expect(bytesOf('lots')).toBeUndefined();
    for (const text of ['32MB', '8MB', '512MiB', '1GiB', '2TB', '64KB'])
      expect(sizeText(bytesOf(text) ?? 0)).toBe(text);
    expect(sizeText(bytesOf('1.5GB') ?? 0)).toBe('1500MB');
    expect(sizeText(500)).toBe('500B');
  });
});
