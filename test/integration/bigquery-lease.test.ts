import { describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { StateError } from '../../src/core/errors.js';
import type { BigQueryDestination } from '../../src/load/bigquery/destination.js';
import { isolateNock, testBigQueryDestination } from '../fixtures/bigquery/destination.js';
import { FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';

/**
 * The run lease in BigQuery (`_query_sync_lease`), as two pods that share no file see it: taken
 * with a conditional MERGE, refused while another owner's lives, taken over once it expired (by
 * BigQuery's clock) with a log line, renewed by a heartbeat that notices a take-over, released.
 */

isolateNock();

const pod = (): BigQueryDestination => testBigQueryDestination();

describe('the BigQuery lease', () => {
  it('is refused while another owner holds it, taken over after its expiry with a log line, and released at the end', async () => {
    const fake = new FakeBigQuery('proj');
    fake.install();
    let now = Date.now();
    fake.now = () => now;
    const a = pod();
    const b = pod();
    const lockA = await a.leases.acquire('ignored', { purpose: 'sync', clock: systemClock });
    const [row] = fake.rows('sync', '_query_sync_lease');
    expect(row?.['name']).toBe('sync');
    expect(row?.['pid']).toBe(String(process.pid));

    const refused = await b.leases.acquire('ignored', { purpose: 'sync', clock: systemClock }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(StateError);
    expect((refused as Error).message).toMatch(
      /the sync lease in table _query_sync_lease of BigQuery dataset proj\.sync is held by run [0-9a-f-]+ \(pid \d+ on .+\); it expires in 30 s/,
    );
    // Another purpose (a backfill) is another lease.
    const backfill = await b.leases.acquire('ignored', { purpose: 'backfill', clock: systemClock });
    await backfill.release();

    // Pod A was killed: no heartbeat. 31 s later (BigQuery's clock) its lease has expired.
    now += 31_000;
    const notes: string[] = [];
    const lockB = await b.leases.acquire('ignored', {
      purpose: 'sync',
      clock: systemClock,
      onTakeOver: (m) => notes.push(m),
    });
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatch(
      /took over the sync lease .* from run [0-9a-f-]+ \(pid \d+ on .+\): its lease expired 1 s ago/,
    );
    expect(fake.rows('sync', '_query_sync_lease')).toHaveLength(1);

    // A's release (it came back) must not delete B's lease.
    await lockA.release();
    expect(fake.rows('sync', '_query_sync_lease')).toHaveLength(1);
    await lockB.release();
    expect(fake.rows('sync', '_query_sync_lease')).toHaveLength(0);
    // Free again: taken at once.
    const again = await a.leases.acquire('ignored', { purpose: 'sync', clock: systemClock });
    await again.release();
  }, 30_000);

  it('waits with --lock-wait while the holder renews; a holder whose lease was taken over learns it at its next heartbeat', async () => {
    const fake = new FakeBigQuery('proj');
    fake.install();
    const a = pod();
    const b = pod();
    const lost: Error[] = [];
    // A renews every 500 ms: B waiting 2 s (past the 1.5 s a lease not renewed lasts) never sees it
    // expire. The lease is three heartbeats long so a loaded machine's late timer (up to a second)
    // does not let it lapse.
    const lockA = await a.leases.acquire('ignored', {
      purpose: 'sync',
      clock: systemClock,
      leaseMs: 1_500,
      onLost: (e) => lost.push(e),
    });
    const waited = await b.leases
      .acquire('ignored', { purpose: 'sync', clock: systemClock, leaseMs: 1_500, waitMs: 2_000, pollMs: 100 })
      .catch((e: unknown) => e);
    expect(waited).toBeInstanceOf(StateError);
    expect(lost).toHaveLength(0);
    // Someone took it over (its row now names another owner): A's next heartbeat finds none of its own.
    const rows = fake.rows('sync', '_query_sync_lease');
    rows[0] = { ...rows[0], owner: 'someone-else' };
    // A's next heartbeat is awaited (at most 10 s), not a fixed sleep.
    for (let i = 0; i < 200 && lost.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    expect(lost).toHaveLength(1);
    expect(lost[0]?.message).toMatch(/lost the sync lease .*: it was taken over by another run/);
    await lockA.release();
  }, 30_000);

  it('the double refuses the lease MERGE with a lease length that is not INT64', async () => {
    const fake = new FakeBigQuery('proj');
    fake.install();
    const a = pod();
    const refused = await a.leases
      .acquire('ignored', { purpose: 'sync', clock: systemClock, leaseMs: 1.5 })
      .catch((e: unknown) => e);
    expect((refused as Error).message).toMatch(/lease_ms' is FLOAT64, expected INT64/);
  }, 30_000);
});
