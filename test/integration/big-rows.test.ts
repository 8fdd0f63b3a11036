import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import type { Destination, LoadBatch, LoadResult } from '../../src/load/destination.js';
import { DuckDbDestination } from '../../src/load/duckdb.js';
import { DEFAULT_BATCH_BYTES } from '../../src/pipeline/walk.js';
import { StateStore } from '../../src/state/store.js';
import { json, startServer } from '../fakes/bad-server.js';
import { dbPathOf, statePathOf, syncOnce } from '../fakes/harness.js';
import { dir, onCleanup } from '../fakes/lifecycle.js';

const PAGES = 3;
const PER_PAGE = 100;
const ROW_CHARS = 200_000;
const ts = (i: number): string => new Date(Date.now() - 600_000 + i).toISOString();

/** The real DuckDB destination, recording how many rows each write carried. */
function recording(inner: DuckDbDestination, writes: number[]): Destination {
  return {
    kind: inner.kind,
    describe: (t) => inner.describe(t),
    count: (t) => inner.count(t),
    close: () => inner.close(),
    write: (batch: LoadBatch): Promise<LoadResult> => {
      writes.push(batch.rows.length);
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
        json(res, 200, { data, meta: { cursor: page + 1 < PAGES ? String(page + 1) : null, has_more: page + 1 < PAGES } });
      },
    });
    onCleanup(server.close);
    const d = dir();
    const writes: number[] = [];
    // DuckDB needs room to checkpoint rows this large (see README, Memory); the cap under test is ours.
    const summary = await syncOnce({
      baseUrl: server.url,
      apiKey: 'k',
      dir: d,
      resources: [events],
      destination: async () => recording(await DuckDbDestination.open(dbPathOf(d), { memoryLimit: '512MB' }), writes),
    });
    expect(summary.streams[0]?.error?.message).toBeUndefined();
    // 5,000 rows per batch by default, yet no write carries more than 8 MB of text.
    const cap = Math.ceil(DEFAULT_BATCH_BYTES / ROW_CHARS);
    expect(Math.max(...writes)).toBeLessThanOrEqual(cap);
    expect(writes.reduce((a, b) => a + b, 0)).toBe(PAGES * PER_PAGE);
    const db = await DuckDbDestination.open(dbPathOf(d), { memoryLimit: '512MB' });
    const [check] = await db.query('SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS ids, MIN(length(user_input)) AS lo, MAX(length(user_input)) AS hi FROM events');
    await db.close();
    expect(check).toEqual({ n: BigInt(PAGES * PER_PAGE), ids: BigInt(PAGES * PER_PAGE), lo: BigInt(ROW_CHARS), hi: BigInt(ROW_CHARS) });
    const stream = (await StateStore.read(statePathOf(d))).streams['events:default'];
    expect(stream?.mark).toBeDefined();
    expect(stream?.pending).toBeUndefined();
  }, 120_000);
});
