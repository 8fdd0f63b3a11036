import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { StateCommit } from '../../src/core/state-table.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { dir } from '../fakes/lifecycle.js';

/**
 * The memory policy of docs/duckdb-memory.md, at a small limit so that a few seconds of writes hold as
 * much state as a long backfill does at the default. The long runs themselves are benchmarks that
 * exit non-zero when the backfill fails: `npm run bench:backfill -- 1m` and `-- 2y`.
 */
const LIMIT = 8_000_000;

/** A backfill's ledger as one state value of `bytes` characters (it grows with every window). */
function ledger(bytes: number, n: number): StateCommit {
  const value = JSON.stringify({ version: 1, n, windows: 'w'.repeat(bytes) });
  return { rows: [{ key: 'section:backfills', value }] };
}

describe('DuckDbDestination keeps its memory bound over a long run', () => {
  it('state written alone makes checkpoints due: a ledger of 300 KB rewritten 80 times (3 times the limit) fits, the last one kept', async () => {
    // Before, state rows did not count toward a checkpoint and a state write alone never made one
    // due: a two-year backfill's ledger, rewritten at every window, failed "could not write
    // query-sync's state … failed to pin block".
    const path = join(dir(), 'w.duckdb');
    const db = await DuckDbDestination.open(path, { memoryLimitBytes: LIMIT });
    for (let n = 0; n < 80; n++) await db.writeState(ledger(300_000, n));
    await db.close();
    const check = await DuckDbDestination.open(path, { memoryLimitBytes: 256_000_000 });
    const state = await check.readState();
    await check.close();
    expect(state.map((r) => [r.key, (JSON.parse(r.value ?? 'null') as { n: number }).n])).toEqual([
      ['section:backfills', 79],
    ]);
  }, 120_000);
});
