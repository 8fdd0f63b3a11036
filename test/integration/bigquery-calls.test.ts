import { describe, expect, it } from 'vitest';
import { syncOnce } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';
import { isolateNock, testBigQueryDestination } from '../fixtures/bigquery/destination.js';
import { FakeBigQuery, type RecordedRequest } from '../fixtures/bigquery/fake-bigquery.js';

/**
 * The BigQuery requests one sync sends, per API method, through the real client and the strict
 * double: a first sync into an empty dataset, then a sync with nothing new. Pinned, so that a
 * change that adds calls (a table described again, a job polled twice, a state write of nothing)
 * is seen here and said, not found later in the quota or the suite's CPU time. What they were
 * before the run's lookups were kept per run (docs/bigquery.md, "Requests a sync sends"): 164 and 77.
 */

isolateNock();

/** Requests per API method (`jobs.upload` is a load job's, `jobs.insert` a query job's), in a stable order. */
function perMethod(requests: readonly RecordedRequest[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of [...requests].sort((a, b) => a.api.localeCompare(b.api))) counts[r.api] = (counts[r.api] ?? 0) + 1;
  return counts;
}

describe('BigQuery requests of a sync', () => {
  it('a first sync, then one with nothing new, send the pinned requests per method', async () => {
    const emu = await emulator({ seed: 31, eventsPerProject: 150 });
    const fake = new FakeBigQuery('proj');
    fake.install();
    const d = dir();
    const sync = async (): Promise<Record<string, number>> => {
      const from = fake.requests.length;
      const summary = await syncOnce({
        baseUrl: emu.url,
        apiKey: emu.apiKey,
        dir: d,
        destination: async () => testBigQueryDestination(),
      });
      expect(summary.ok, JSON.stringify(summary.streams.map((s) => s.error?.message))).toBe(true);
      return perMethod(fake.requests.slice(from));
    };

    const first = await sync();
    const again = await sync();
    expect(fake.unhandled).toEqual([]);
    // A first sync: the dataset and every table created, each table looked up once (again where
    // the run's own DDL replaced it, and where a table found missing decides a layout: users and
    // conversations, which a backfill beside the sync may have made meanwhile), every job polled once.
    expect(first).toEqual({
      'datasets.get': 1,
      'datasets.insert': 1,
      'jobs.get': 44,
      'jobs.getQueryResults': 5,
      'jobs.insert': 36,
      'jobs.upload': 8,
      'tables.delete': 6,
      'tables.get': 18,
      'tables.insert': 17,
    });
    // Nothing new: each table looked up once, no state write of nothing, the view left as it is;
    // the lease, the state's read and its moved marks, the counts and the run's history row remain.
    expect(again).toEqual({
      'datasets.get': 1,
      'jobs.get': 20,
      'jobs.getQueryResults': 5,
      'jobs.insert': 19,
      'jobs.upload': 1,
      'tables.delete': 1,
      'tables.get': 11,
      'tables.insert': 1,
    });
  });
});
