import { describe, expect, it } from 'vitest';
import { bucketEnd, intervalFor } from '../../../src/extract/timeseries.js';
import { SlidingLog } from '../../../src/http/scheduler/window.js';

const DAY = 86_400_000;

describe('intervalFor / bucketEnd', () => {
  it('picks the finest interval that keeps the buckets few', () => {
    expect(intervalFor({ fromMs: 0, toMs: DAY })).toBe('minute');
    expect(intervalFor({ fromMs: 0, toMs: 30 * DAY })).toBe('hour');
    expect(intervalFor({ fromMs: 0, toMs: 3 * 365 * DAY })).toBe('day');
    expect(intervalFor({ fromMs: 0, toMs: Date.UTC(2026, 0, 1) })).toBe('month'); // a first sync from the epoch
  });

  it('ends a month at the next month, UTC', () => {
    expect(bucketEnd(Date.UTC(2026, 1, 1), 'month')).toBe(Date.UTC(2026, 2, 1));
    expect(bucketEnd(Date.UTC(2026, 11, 1), 'month')).toBe(Date.UTC(2027, 0, 1));
    expect(bucketEnd(0, 'hour')).toBe(3_600_000);
  });
});

describe('SlidingLog.restamp', () => {
  it('moves a start later and keeps the log ordered, so windows count it from its new time', () => {
    const log = new SlidingLog();
    for (const t of [0, 10, 20]) log.push(t);
    log.restamp(0, 500);
    log.push(30); // a later start recorded before the restamped one: order is kept
    expect(log.countWithin(520, 100)).toBe(1); // only 500
    expect(log.countWithin(520, 495)).toBe(2); // 30 and 500: 0 is gone from the front
    expect(log.nextFreeAt(500, 1_000, 4)).toBe(1_010); // four in the window: the oldest (10) leaves first
    log.restamp(7, 9); // none at 7: nothing moves
    expect(log.size).toBe(4);
  });
});
