import { describe, expect, it } from 'vitest';
import { nextWindow } from '../../src/pipeline/stream.js';
import { dedupeRows } from '../../src/load/destination.js';
import { readEnvelope } from '../../src/extract/paginate.js';
import { newCallStats } from '../../src/http/client.js';

const T = Date.parse('2026-11-21T12:00:00Z');
const MIN = 60_000;

describe('nextWindow', () => {
  it('reads all history (or from --start) on a first sync, up to the run start', () => {
    expect(nextWindow({}, { runStartMs: T, lookbackMs: 15 * MIN })).toEqual({ window: { fromMs: 0, toMs: T }, cursor: undefined });
    expect(nextWindow({}, { runStartMs: T, lookbackMs: 15 * MIN, startMs: T - 100 })?.window).toEqual({ fromMs: T - 100, toMs: T });
  });
  it('re-reads the lookback before the mark', () => {
    const mark = new Date(T - 60 * MIN).toISOString();
    expect(nextWindow({ mark }, { runStartMs: T, lookbackMs: 15 * MIN })?.window).toEqual({ fromMs: T - 75 * MIN, toMs: T });
  });
  it('resumes a checkpoint before anything else', () => {
    const pending = { from: new Date(0).toISOString(), to: new Date(T - MIN).toISOString(), cursor: 'c9' };
    expect(nextWindow({ mark: new Date(T - 5 * MIN).toISOString(), pending }, { runStartMs: T, lookbackMs: MIN })).toEqual({
      window: { fromMs: 0, toMs: T - MIN },
      cursor: 'c9',
    });
  });
  it('is done when the mark has reached the run start', () => {
    expect(nextWindow({ mark: new Date(T).toISOString() }, { runStartMs: T, lookbackMs: MIN })).toBeUndefined();
  });
});

describe('dedupeRows', () => {
  it('keeps one row per (project_id, key), the newest version, the later on a tie', () => {
    const rows = [
      { project_id: 'a', id: '1', v: '2026-01-02T00:00:00Z', n: 1 },
      { project_id: 'b', id: '1', v: '2026-01-01T00:00:00Z', n: 2 },
      { project_id: 'a', id: '1', v: '2026-01-01T00:00:00Z', n: 3 },
      { project_id: 'b', id: '1', v: '2026-01-01T00:00:00Z', n: 4 },
    ];
    const out = dedupeRows(rows, ['project_id', 'id'], 'v');
    expect(out).toHaveLength(2);
    expect(out.find((r) => r.project_id === 'a')?.n).toBe(1);
    expect(out.find((r) => r.project_id === 'b')?.n).toBe(4);
  });
});

describe('readEnvelope', () => {
  const ctx = { resource: 'events', project: 'p', lane: 'x', stats: newCallStats() };
  it('accepts the documented envelope', () => {
    expect(readEnvelope({ data: [{ id: 'a' }], meta: { cursor: 'c', has_more: true } }, ctx)).toEqual({
      records: [{ id: 'a' }],
      nextCursor: 'c',
      hasMore: true,
    });
  });
  it('names the resource, the project and what was wrong', () => {
    expect(() => readEnvelope({ items: [] }, ctx)).toThrow(/\[resource events, project p\].*"data" is not an array/);
    expect(() => readEnvelope({ data: [], meta: { has_more: 'yes' } }, ctx)).toThrow(/has_more/);
    expect(() => readEnvelope('<html>', ctx)).toThrow(/non-object/);
    expect(() => readEnvelope({ data: [1], meta: { has_more: false } }, ctx)).toThrow(/element is not an object/);
  });
});
