import { isInteger, isSafeNumber, parse, stringify } from 'lossless-json';
import { describe, expect, it } from 'vitest';
import { parseJson } from '../../../src/core/json.js';

/** What the lossless parser alone makes of `text`: the reference `parseJson` must match. */
function lossless(text: string): unknown {
  return parse(text, null, (n: string) => (isInteger(n) && !isSafeNumber(n) ? BigInt(n) : Number(n)));
}

const id = '1795923755937384646';

describe('parseJson', () => {
  it('reads a 19-digit integer exactly wherever a value stands', () => {
    const cases: [string, unknown][] = [
      [id, BigInt(id)],
      [` \n-${id} `, -BigInt(id)],
      [`{"a":${id}}`, { a: BigInt(id) }],
      [`{"a" : \t${id} , "b":1}`, { a: BigInt(id), b: 1 }],
      [`{"a":{"b":{"c":[1,${id},{"d":-${id}}]}}}`, { a: { b: { c: [1, BigInt(id), { d: -BigInt(id) }] } } }],
      [`[${id},${id}]`, [BigInt(id), BigInt(id)]],
      [`[[${id}],[[${id}]]]`, [[BigInt(id)], [[BigInt(id)]]]],
      [
        `{"data":[{"start_time_ns":${id},"end_time_ns":${id}9}]}`,
        { data: [{ start_time_ns: BigInt(id), end_time_ns: BigInt(`${id}9`) }] },
      ],
      [`{"__proto__":${id}}`, JSON.parse(`{"__proto__":"x"}`, (k, v) => (k === '__proto__' ? BigInt(id) : v))],
    ];
    for (const [text, expected] of cases) {
      expect(parseJson(text), text).toEqual(expected);
      expect(parseJson(text), text).toEqual(lossless(text));
    }
  });

  it('leaves digits inside strings, fractions, exponents and safe integers as the native parser reads them', () => {
    for (const text of [
      `{"a":"${id}"}`,
      `{"a":": ${id}, "}`,
      `{"a":"[${id}]","b":${id}}`,
      `{"a":"x\\": ${id},","b":${id}}`,
      `{"a":"x\\"y","b":${id}}`,
      `{"a":"x\\\\","b":${id},"c":"\\\\\\": ${id}]"}`,
      `{"a":${id}.5,"b":${id}e3,"c":-${id}E-2,"d":1.${id}}`,
      `{"a":9007199254740991,"b":-9007199254740991,"c":9007199254740992,"d":1234567890123456}`,
      `{"${id}":${id}}`,
      `["\\u0000x:${id}",${id}]`,
    ]) {
      expect(parseJson(text), text).toEqual(lossless(text));
    }
    expect(parseJson(`{"a":"${id}","b":${id}.5}`)).toEqual({ a: id, b: Number(`${id}.5`) });
    expect(parseJson('[9007199254740993,9007199254740991]')).toEqual([9007199254740993n, 9007199254740991]);
  });

  it('keeps the lossless answer where marks could not come back one for one, and throws on invalid text', () => {
    // The lossless parser refuses a key given twice with different values; so does parseJson then.
    expect(() => parseJson(`{"a":${id},"a":${id}1}`)).toThrow(/Duplicate key/);
    for (const text of [
      `{"a":${id}`,
      `{${id}:1}`,
      `{"a":1,${id}:2}`,
      `[${id} 1]`,
      `{"a":"${id}}`,
      `[0${id}]`,
      `{"a":-0${id}}`,
      `[+${id}]`,
    ]) {
      expect(() => parseJson(text), text).toThrow();
    }
  });

  it('reads an emulator-shaped traces page as the lossless parser does', () => {
    const spans = Array.from({ length: 50 }, (_, i) => ({
      span_id: `${i}`.padStart(16, '7'),
      input: i % 3 === 0 ? `{"n": ${id}, "s": "\\"q\\""}` : `line ${i}\n"quoted": ${id}`,
      attributes: { 'retry.count': i, 'sampling.rate': 0.25 },
    }));
    const text = JSON.stringify({ data: spans, meta: { has_more: true } }).replace(
      /"span_id":"(\d+)"/g,
      (_, digits: string) =>
        `"span_id":"${digits}","start_time_ns":${id.slice(0, -2)}${digits.slice(-2)},"end_time_ns":-${id}`,
    );
    const parsed = parseJson(text) as { data: { start_time_ns: bigint; input: string }[] };
    expect(parsed).toEqual(lossless(text));
    expect(typeof parsed.data[7]?.start_time_ns).toBe('bigint');
    expect(parsed.data[1]?.input).toBe(`line 1\n"quoted": ${id}`);
  });

  it('matches the lossless parser on generated texts (strings with quotes, backslashes and digit runs)', () => {
    let seed = 34;
    // mulberry32: a seeded generator, so a failure repeats.
    const next = (n: number): number => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) % n;
    };
    const pieces = ['"', '\\', '\\"', ':', ',', '[', ']', ' ', id, `-${id}`, '9007199254740993', 'é', '\n'];
    const value = (depth: number): unknown => {
      switch (next(depth > 3 ? 4 : 6)) {
        case 0:
          return BigInt(`${next(2) === 0 ? '-' : ''}${id.slice(0, 15 + next(5))}${next(10)}`);
        case 1:
          return next(1000) / 8;
        case 2:
          return Array.from({ length: 1 + next(6) }, () => pieces[next(pieces.length)]).join('');
        case 3:
          return next(2) === 0 ? null : true;
        case 4:
          return Array.from({ length: next(4) }, () => value(depth + 1));
        default:
          return Object.fromEntries(
            Array.from({ length: next(4) }, (_, i) => [`k${i}${pieces[next(pieces.length)]}`, value(depth + 1)]),
          );
      }
    };
    for (let i = 0; i < 500; i++) {
      const text = stringify(value(0), null, next(2) === 0 ? undefined : 1) ?? 'null';
      expect(parseJson(text), text).toEqual(lossless(text));
    }
  });
});
