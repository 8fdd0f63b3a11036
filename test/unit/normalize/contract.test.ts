import { describe, expect, it } from 'vitest';
import { events } from '../../../connectors/events.js';
import { DataError } from '../../../src/core/errors.js';
import { withContract } from '../../../src/normalize/contract.js';

const existing = [
  { name: 'project_id', type: 'string' as const },
  { name: 'id', type: 'string' as const },
  { name: 'timestamp', type: 'timestamp' as const },
  { name: 'n', type: 'int64' as const },
];

describe('withContract', () => {
  it('evolve changes nothing; freeze-columns passes known fields and nulls, refuses new fields and type changes', () => {
    expect(withContract(events, existing, 'evolve')).toBe(events);
    expect(withContract(events, undefined, 'freeze-columns')).toBe(events);
    const frozen = withContract(events, existing, 'freeze-columns');
    const ok = { id: 'e1', timestamp: '2026-01-01T00:00:00Z', n: 3, project_id: 'a', extra: null };
    expect(frozen.transform?.(ok)).toEqual(ok);
    expect(() => frozen.transform?.({ id: 'e2', timestamp: '2026-01-01T00:00:00Z', model: 'gpt' })).toThrow(
      /a record of events \(key e2\) has the new field "model" \(string\)/,
    );
    expect(() => frozen.transform?.({ id: 'e3', n: 'three' })).toThrow(
      /field "n" of events \(key e3\) is a string where column "n" is int64; .* variant column n__v_string/,
    );
    expect(() => frozen.transform?.({ id: 'e3', n: 'three' })).toThrow(DataError);
  });

  it('freeze refuses a table that does not exist yet', () => {
    expect(() => withContract(events, undefined, 'freeze').transform?.({ id: 'e' })).toThrow(
      /table "events" does not exist/,
    );
  });
});
