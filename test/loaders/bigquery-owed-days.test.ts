import { describe, expect, it } from 'vitest';
import {
  OWED_MARGIN_MS,
  owedDays,
  owedSelectSql,
  partitionsSql,
  type TablePartition,
} from '../../src/load/bigquery/trace-book.js';
import { OWED_FULL_EVERY_MS } from '../../src/load/destination-capabilities.js';

/**
 * Which days the owed listing reads after a complete one (`owedDays`): those whose partition of the
 * events or of the book was modified since the mark (less the margin), and the events' days within
 * the settle horizon; all of them with no mark, an old full listing, or rows in a streaming buffer.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const MARK = Date.parse('2024-05-10T12:00:00Z');
const mark = { listedAtMs: MARK, fullAtMs: MARK - DAY };
const old = Date.parse('2024-04-01T00:00:00Z');

const part = (table: string, id: string, modifiedMs: number): TablePartition => ({ table, id, modifiedMs });
const quiet: TablePartition[] = [
  part('events', '20240401', old),
  part('events', '20240402', old),
  part('events', '20240510', MARK - 2 * OWED_MARGIN_MS),
  part('_query_sync_children', '20240401', old),
  part('events', '__NULL__', MARK + HOUR),
];

describe('owedDays', () => {
  it('reads nothing when nothing changed and no parent turned settle-old since', () => {
    expect(owedDays(quiet, 'events', mark, MARK + 15 * 60_000, 0)).toEqual([]);
  });

  it('reads an old day an event was backfilled into, and a day whose book rows changed', () => {
    const parts = [...quiet, part('events', '20240402', MARK + HOUR)];
    expect(owedDays(parts, 'events', mark, MARK + 2 * HOUR, 0)).toEqual(['2024-04-02']);
    const book = [...quiet, part('_query_sync_children', '20240401', MARK - OWED_MARGIN_MS / 2)];
    expect(owedDays(book, 'events', mark, MARK + 2 * HOUR, 0)).toEqual(['2024-04-01']);
  });

  it('reads the days within the settle horizon (events read empty while young are due at settle)', () => {
    expect(owedDays(quiet, 'events', mark, MARK + HOUR, 2 * HOUR)).toEqual(['2024-05-10']);
  });

  it('reads every day without a mark, after a week without a full listing, or with a streaming buffer', () => {
    expect(owedDays(quiet, 'events', undefined, MARK, 0)).toBeUndefined();
    expect(owedDays(quiet, 'events', mark, mark.fullAtMs + OWED_FULL_EVERY_MS, 0)).toBeUndefined();
    const buffered = [...quiet, part('events', '__UNPARTITIONED__', MARK)];
    expect(owedDays(buffered, 'events', mark, MARK + HOUR, 0)).toBeUndefined();
  });
});

describe('the listing of some days', () => {
  const target = { projectId: 'p', dataset: 'd' };
  const query = {
    resource: 'traces',
    eventTable: 'events',
    eventKey: 'id',
    eventTime: 'timestamp',
    nowMs: MARK,
    settleMs: 0,
  };

  it('prunes the events and the book to the days, and reads none for no day', () => {
    const sql = owedSelectSql(
      target,
      query,
      { marksDeletions: false, bookExists: true, days: ['2024-04-02'] },
      'a',
      10,
    );
    expect(sql).toContain("DATE(p.`timestamp`) IN (DATE '2024-04-02')");
    expect(sql).toContain("DATE(`parent_at`) IN (DATE '2024-04-02')");
    expect(owedSelectSql(target, query, { marksDeletions: false, bookExists: true, days: [] }, 'a', 10)).toContain(
      'AND FALSE',
    );
  });

  it('asks INFORMATION_SCHEMA.PARTITIONS for both tables', () => {
    expect(partitionsSql(target, ['events', '_query_sync_children'])).toBe(
      'SELECT table_name, partition_id, last_modified_time FROM `p`.`d`.INFORMATION_SCHEMA.PARTITIONS ' +
        "WHERE table_name IN ('events', '_query_sync_children')",
    );
  });
});
