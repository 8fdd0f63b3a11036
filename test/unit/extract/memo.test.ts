import { describe, expect, it } from 'vitest';
import type { JsonValue } from '../../../src/core/types.js';
import { RequestMemo, type JsonReader } from '../../../src/extract/memo.js';
import { newCallStats, type ApiRequest, type CallContext } from '../../../src/http/client.js';

const ctx = (): CallContext => ({ resource: 'events', project: '*', lane: 'events|*', stats: newCallStats() });

const timeseries = (query: Record<string, string | undefined>, project?: string): ApiRequest => ({
  endpoint: '/v1/events/timeseries',
  path: '/v1/events/timeseries',
  query,
  project,
});

/** A reader that answers each request with its number, failing the ones `fail` names. */
function countingReader(fail: (n: number) => boolean = () => false): JsonReader & { readonly asked: ApiRequest[] } {
  const asked: ApiRequest[] = [];
  return {
    asked,
    getJson: (req) => {
      asked.push(req);
      const n = asked.length;
      return fail(n) ? Promise.reject(new Error(`request ${n} failed`)) : Promise.resolve({ n } as JsonValue);
    },
  };
}

describe("RequestMemo: one run's memo of aggregate answers", () => {
  it('sends an identical request once (the order of its parameters aside), and a different one again', async () => {
    const reader = countingReader();
    const memo = new RequestMemo(reader);
    const a = timeseries({ interval: 'hour', 'timestamp[gte]': 'x', 'timestamp[lt]': 'y' });
    const same = timeseries({ 'timestamp[lt]': 'y', interval: 'hour', 'timestamp[gte]': 'x', unset: undefined });
    const [first, second] = await Promise.all([memo.getJson(a, ctx()), memo.getJson(same, ctx())]);
    expect(first).toEqual({ n: 1 });
    expect(second).toBe(first);
    expect(await memo.getJson(timeseries({ interval: 'hour' }, 'alpha'), ctx())).toEqual({ n: 2 });
    expect(
      await memo.getJson(timeseries({ interval: 'day', 'timestamp[gte]': 'x', 'timestamp[lt]': 'y' }), ctx()),
    ).toEqual({
      n: 3,
    });
    expect(reader.asked).toHaveLength(3);
  });

  it('keeps no failure: the next caller asks again', async () => {
    const reader = countingReader((n) => n === 1);
    const memo = new RequestMemo(reader);
    const req = timeseries({ interval: 'hour' });
    await expect(memo.getJson(req, ctx())).rejects.toThrow('request 1 failed');
    expect(await memo.getJson(req, ctx())).toEqual({ n: 2 });
    expect(await memo.getJson(req, ctx())).toEqual({ n: 2 });
    expect(reader.asked).toHaveLength(2);
  });

  it("is one run's: another memo (the next run) asks again", async () => {
    const reader = countingReader();
    const req = timeseries({ interval: 'hour' });
    await new RequestMemo(reader).getJson(req, ctx());
    await new RequestMemo(reader).getJson(req, ctx());
    expect(reader.asked).toHaveLength(2);
  });
});
