import { describe, expect, it } from 'vitest';
import { events } from '../../../connectors/events.js';
import { traces } from '../../../connectors/traces.js';
import { mayHoldUnsafeInteger, parseJson } from '../../../src/core/json.js';
import type { ApiRecord } from '../../../src/core/types.js';
import { cursorMillis, inferType, keyAsText, renamedColumn, SchemaTracker } from '../../../src/normalize/normalize.js';

const at = '2026-11-20T00:00:00.000Z';

describe('SchemaTracker.normalize', () => {
  it('keeps declared columns, fills project_id, and turns nested values into exact JSON', () => {
    const t = new SchemaTracker(events);
    const rec = parseJson(
      '{"id":"e1","timestamp":"2026-11-20T10:00:00.123Z","properties":{"n":1800000000123456789,"s":"a\\"b\\\\c\\n☃"},"signals":[]}',
    ) as ApiRecord;
    const row = t.normalize(rec, 'alpha', at);
    expect(row).toMatchObject({ project_id: 'alpha', id: 'e1', timestamp: '2026-11-20T10:00:00.123Z', _synced_at: at });
    expect(row.properties).toBe('{"n":1800000000123456789,"s":"a\\"b\\\\c\\n☃"}');
    expect(row.signals).toBe('[]');
    expect(t.schema.key).toEqual(['project_id', 'id']);
    expect(t.schema.columns.find((c) => c.name === 'properties')?.type).toBe('json');
  });

  it('prefers the row project_id of an all-projects read over the fallback', () => {
    const t = new SchemaTracker(events);
    expect(t.normalize({ id: 'x', timestamp: at, project_id: 'beta' }, undefined, at).project_id).toBe('beta');
  });

  it('keeps every field of a wide record, in order (a row of many columns is copied as a fast object)', () => {
    const t = new SchemaTracker(traces, undefined, 'run-1');
    const fields: Record<string, unknown> = { span_id: 's1', trace_id: 't1', start_time_ns: 1795963078917384646n };
    for (let i = 0; i < 30; i++) fields[`attr_${i}`] = i % 3 === 0 ? { n: i } : i % 3 === 1 ? `v${i}` : null;
    const record = fields as ApiRecord;
    const row = t.normalize(record, 'alpha', at);
    const expected: Record<string, unknown> = { project_id: 'alpha', span_id: 's1', trace_id: 't1' };
    expected.start_time_ns = row.start_time_ns;
    for (let i = 0; i < 30; i++) if (i % 3 !== 2) expected[`attr_${i}`] = i % 3 === 0 ? `{"n":${i}}` : `v${i}`;
    expected._synced_at = at;
    expected._run_id = 'run-1';
    expect(Object.keys(row)).toEqual(Object.keys(expected));
    expect(row).toEqual(expected);
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
  });

  it('adds a column for a field that first appears in a later record', () => {
    const t = new SchemaTracker(events);
    t.normalize({ id: 'a', timestamp: at }, 'p', at);
    expect(t.schema.columns.map((c) => c.name)).not.toContain('feature_flags');
    const row = t.normalize({ id: 'b', timestamp: at, feature_flags: { x: true } }, 'p', at);
    expect(row.feature_flags).toBe('{"x":true}');
    expect(t.schema.columns.find((c) => c.name === 'feature_flags')?.type).toBe('json');
  });

  it('puts a value that does not fit its column in a variant column instead of failing or coercing', () => {
    const t = new SchemaTracker(events);
    t.normalize({ id: 'a', timestamp: at, score: 3 }, 'p', at);
    const row = t.normalize({ id: 'b', timestamp: at, score: 'high' }, 'p', at);
    expect(row.score).toBeUndefined();
    expect(row.score__v_string).toBe('high');
    expect(t.schema.columns.find((c) => c.name === 'score__v_string')?.type).toBe('string');
  });

  it('keeps nanosecond integers beyond 2^53 exact as bigint', () => {
    const t = new SchemaTracker(traces);
    const rec = parseJson(
      '{"span_id":"s1","start_time_ns":1763630000123456789,"end_time_ns":1763630000223456789}',
    ) as ApiRecord;
    const row = t.normalize(rec, 'p', at);
    expect(row.start_time_ns).toBe(1763630000123456789n);
    expect(row.end_time_ns).toBe(1763630000223456789n);
    expect(cursorMillis(traces, rec)).toBe(1763630000123);
  });

  it('throws a DataError naming the missing key, and one for a missing project in a * read', () => {
    const t = new SchemaTracker(events);
    expect(() => t.normalize({ timestamp: at }, 'p', at)).toThrow(/key field "id"/);
    expect(() => t.normalize({ id: 'x', timestamp: at }, undefined, at)).toThrow(/project_id/);
  });

  it('names columns from the field name alone, and keeps the mapping when a later run sees the fields in another order', () => {
    expect(renamedColumn('a.b')).toMatch(/^a_b__[0-9a-f]{8}$/);
    expect(renamedColumn('')).toMatch(/^f___[0-9a-f]{8}$/);
    expect(renamedColumn('_synced_at')).toMatch(/^f__synced_at__[0-9a-f]{8}$/);
    expect(renamedColumn('x'.repeat(400)).length).toBeLessThanOrEqual(287);
    const first = new SchemaTracker(events);
    first.normalize({ id: 'a', timestamp: at, Plan: 'p', plan: 'q' }, 'p', at);
    expect(first.columnFor('Plan')).toBe('Plan');
    expect(first.columnFor('plan')).toBe(renamedColumn('plan'));
    // The next run starts from the table's columns; the twin arriving first changes nothing.
    const next = new SchemaTracker(events, first.schema.columns);
    const row = next.normalize({ id: 'b', timestamp: at, plan: 'q2', Plan: 'p2' }, 'p', at);
    expect(row).toMatchObject({ Plan: 'p2', [renamedColumn('plan')]: 'q2' });
    expect(next.schema.columns.map((c) => c.name).sort()).toEqual(first.schema.columns.map((c) => c.name).sort());
  });

  it('reads keys as text whatever their JSON type, and refuses unusable ones', () => {
    expect(keyAsText(123)).toBe('123');
    expect(keyAsText(9007199254740993n)).toBe('9007199254740993');
    expect(keyAsText('e1')).toBe('e1');
    for (const bad of [undefined, null, '', true, { a: 1 }, [1]]) expect(keyAsText(bad as never)).toBeUndefined();
  });

  it('infers types', () => {
    expect(inferType(true)).toBe('bool');
    expect(inferType(2)).toBe('int64');
    expect(inferType(2.5)).toBe('float64');
    expect(inferType(2n)).toBe('int64');
    expect(inferType('2026-11-20T10:00:00Z')).toBe('timestamp');
    expect(inferType('2026-11-20 10:00:00')).toBe('string');
    expect(inferType('hello')).toBe('string');
    expect(inferType([1])).toBe('json');
  });
});

describe('parseJson', () => {
  it('parses integers beyond 2^53 exactly and leaves others as numbers', () => {
    expect(parseJson('{"a":9007199254740993,"b":12,"c":1.5}')).toEqual({ a: 9007199254740993n, b: 12, c: 1.5 });
    expect(parseJson('{"a":"12345678901234567890"}')).toEqual({ a: '12345678901234567890' });
    expect(parseJson('[ -12345678901234567890 ,\n 1]')).toEqual([-12345678901234567890n, 1]);
  });

  it('takes the lossless parser only for a long number token, not for digits inside strings', () => {
    for (const text of [
      '{"a":9007199254740993}',
      '{"a": \n -9007199254740993}',
      '[1,12345678901234567]',
      '12345678901234567',
      '{"a":[ 1234567890123456.5]}',
    ]) {
      expect(mayHoldUnsafeInteger(text), text).toBe(true);
    }
    const page = JSON.stringify({
      data: [{ span_id: '7831528000000034', user_input: `${'9'.repeat(40)} ok`, n: 123456789012345 }],
    });
    expect(mayHoldUnsafeInteger(page)).toBe(false);
    expect(parseJson(page)).toEqual(JSON.parse(page));
  });
});
