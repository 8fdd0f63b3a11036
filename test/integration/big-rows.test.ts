import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import type { Destination, LoadBatch, LoadResult } from '../../src/load/destination.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { workingPathForReading } from '../../src/publish/layout.js';
import { StateStore } from '../../src/state/store.js';
import { json, startServer } from '../fakes/bad-server.js';
import { runCli } from '../fakes/cli.js';
import { dbPathOf, statePathOf, SYNC_DEFAULTS, syncOnce } from '../fakes/harness.js';
import { dir, emulator, onCleanup } from '../fakes/lifecycle.js';

const PAGES = 3;
const PER_PAGE = 100;
const ROW_CHARS = 200_000;
const ts = (i: number): string => new Date(Date.now() - 600_000 + i).toISOString();

/** The real DuckDB destination, recording how many rows each write of events carried (not the run's own tables: its history row, its schema changes). */
function recording(inner: DuckDbDestination, writes: number[]): Destination {
  return {
    kind: inner.kind,
    can: {}, // as before: rows only (no state table, counts or views)
    describe: (t) => inner.describe(t),
    count: (t) => inner.count(t),
    close: () => inner.close(),
    write: (batch: LoadBatch): Promise<LoadResult> => {
      if (batch.table.name === 'events') writes.push(batch.rows.length);
      return inner.write(batch);
    },
  };
}

describe('memory follows the settings, not the data: batches are capped in bytes as well as rows', () => {
  it('pages of 100 events × 200 KB (20 MB) are written in batches of at most --batch-bytes, every row once', async () => {
    const server = await startServer({
      '/v1/events': (_req, url, res) => {
        const page = Number(url.searchParams.get('cursor') ?? '0');
        const data = Array.from({ length: PER_PAGE }, (_, i) => {
          const n = page * PER_PAGE + i;
          return { id: `e${n}`, timestamp: ts(n), event_name: 'big', user_input: `${n} `.padEnd(ROW_CHARS, 'z') };
        });
        json(res, 200, {
          data,
          meta: { cursor: page + 1 < PAGES ? String(page + 1) : null, has_more: page + 1 < PAGES },
        });
      },
    });
    onCleanup(server.close);
    const d = dir();
    const writes: number[] = [];
    // At the default DuckDB memory limit (32MB).
    const summary = await syncOnce({
      baseUrl: server.url,
      apiKey: 'k',
      dir: d,
      resources: [events],
      destination: async () => recording(await DuckDbDestination.open(dbPathOf(d)), writes),
    });
    expect(summary.streams[0]?.error?.message).toBeUndefined();
    // 5,000 rows per batch by default, yet no write carries more than 8 MB of text.
    const cap = Math.ceil(SYNC_DEFAULTS.batchBytes / ROW_CHARS);
    expect(Math.max(...writes)).toBeLessThanOrEqual(cap);
    expect(writes.reduce((a, b) => a + b, 0)).toBe(PAGES * PER_PAGE);
    // Read back with room: a query over these strings holds a whole row group's worth at once.
    const db = await DuckDbDestination.open(dbPathOf(d), { memoryLimitBytes: 512_000_000 });
    const [check] = await db.query(
      'SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS ids, MIN(length(user_input)) AS lo, MAX(length(user_input)) AS hi FROM events',
    );
    await db.close();
    expect(check).toEqual({
      n: BigInt(PAGES * PER_PAGE),
      ids: BigInt(PAGES * PER_PAGE),
      lo: BigInt(ROW_CHARS),
      hi: BigInt(ROW_CHARS),
    });
    const stream = (await StateStore.read(statePathOf(d))).streams['events:default'];
    expect(stream?.mark).toBeDefined();
    expect(stream?.pending).toBeUndefined();
  }, 120_000);

  it('a sync of 300 events × 200 KB (60 MB, twice the memory limit) completes at the default settings, every row once', {
    timeout: 300_000,
  }, async () => {
    // DuckDB keeps rows written since its last checkpoint in memory, and strings this large cannot
    // spill: before query-sync checkpointed by bytes (and with DuckDB's vacuum on), this stopped
    // after 100–200 rows at 32MB with "failed to pin block".
    const emu = await emulator({ seed: 10, projects: ['default'], eventsPerProject: 300, userInputChars: ROW_CHARS });
    const d = dir();
    const duckdbPath = join(d, 'w.duckdb');
    const run = await runCli(
      emu,
      [
        'sync',
        '--resources',
        'events',
        '--duckdb-path',
        duckdbPath,
        '--state',
        join(d, 'state.json'),
        '--log-format',
        'json',
      ],
      {
        timeoutMs: 240_000,
      },
    );
    expect(run.stdout).not.toMatch(/FAILED/);
    expect(run.code).toBe(0);
    // The read copy was published at the same default limit (before the rowid-sliced COPY, this warned and kept no copy).
    expect(`${run.stdout}${run.stderr}`).not.toMatch(/could not publish/);
    expect(`${run.stdout}${run.stderr}`).toMatch(/published .*w\.duckdb/);
    const expected = emu.snapshot('events', 'default');
    expect(expected).toHaveLength(300);
    // The rows as the sync stored them, in its working file.
    const db = await DuckDbDestination.open(workingPathForReading(duckdbPath), { memoryLimitBytes: 512_000_000 });
    const [check] = await db.query('SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS ids FROM events');
    // Every row byte for byte: its user_input's MD5 (of the UTF-8) against the emulator's.
    const stored = await db.query('SELECT id, md5(user_input) AS digest FROM events ORDER BY id');
    await db.close();
    expect(check).toEqual({ n: 300n, ids: 300n });
    const want = expected
      .map((e) => ({ id: String(e.id), digest: createHash('md5').update(String(e.user_input), 'utf8').digest('hex') }))
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    expect(String(expected[0]?.user_input).length).toBeGreaterThanOrEqual(ROW_CHARS);
    expect(stored).toEqual(want);
    // The published copy holds the same bytes, read as an analyst would at a 32MB limit (views over Parquet).
    const reader = await DuckDBInstance.create(duckdbPath, { access_mode: 'READ_ONLY', memory_limit: '32MB' });
    onCleanup(() => reader.closeSync());
    const published = (
      await (await reader.connect()).runAndReadAll('SELECT id, md5(user_input) AS digest FROM events ORDER BY id')
    ).getRowObjectsJS();
    expect(published).toEqual(want);
  });
});
