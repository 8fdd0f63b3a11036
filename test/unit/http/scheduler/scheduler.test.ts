import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  DEFAULT_RATE_LIMITS,
  SEARCH_ENDPOINT,
  type RateLimits,
  type RequestBudget,
} from '../../../../src/http/scheduler/budget.js';
import { createScheduler } from '../../../../src/http/scheduler/scheduler.js';
import { DEFAULT_SAFETY_MARGINS } from '../../../../src/http/scheduler/options.js';

const EVENTS = '/v1/events';
const USERS = '/v1/users';
const TRACES = '/v1/traces';
const SIGNALS = '/v1/signals';
const CONVERSATIONS = '/v1/conversations';

const MINUTE_WINDOW = 60_000 + DEFAULT_SAFETY_MARGINS.minuteMs; // 60 250
const SECOND_WINDOW = 1_000 + DEFAULT_SAFETY_MARGINS.secondMs; // 1 100

interface Start {
  readonly endpoint: string;
  readonly lane: string;
  readonly at: number;
  readonly id: number;
}

/** A scheduler plus a log of when each task really started (read from the faked clock). */
function harness(options: { maxInFlight?: number; taskMs?: number; limits?: RateLimits } = {}) {
  const budget = createScheduler({ limits: options.limits ?? DEFAULT_RATE_LIMITS, maxInFlight: options.maxInFlight });
  const starts: Start[] = [];
  let nextId = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  function submit(endpoint: string, lane = 'default', signal?: AbortSignal): { id: number; done: Promise<number> } {
    const id = nextId++;
    const done = budget.schedule(
      endpoint,
      async () => {
        starts.push({ endpoint, lane, at: Date.now(), id });
        inFlight += 1;
        maxInFlight = Math.max(maxInFlight, inFlight);
        if (options.taskMs !== undefined) await new Promise((resolve) => setTimeout(resolve, options.taskMs));
        inFlight -= 1;
        return id;
      },
      { lane, signal },
    );
    return { id, done };
  }
  function submitMany(count: number, endpoint: string, lane = 'default'): Promise<number>[] {
    return Array.from({ length: count }, () => submit(endpoint, lane).done);
  }
  return { budget, starts, submit, submitMany, maxInFlight: () => maxInFlight };
}

/** Largest number of times within any window of `windowMs` (a time `s` counts in (t - windowMs, t]). */
function maxInWindow(times: readonly number[], windowMs: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  let best = 0;
  let low = 0;
  for (let high = 0; high < sorted.length; high += 1) {
    while ((sorted[low] as number) <= (sorted[high] as number) - windowMs) low += 1;
    best = Math.max(best, high - low + 1);
  }
  return best;
}

const at = (starts: readonly Start[]) => starts.map((s) => s.at);

/** A request submitted now starts exactly `ms` later: not a millisecond before. */
async function expectNextStartIn(h: ReturnType<typeof harness>, endpoint: string, ms: number): Promise<void> {
  const before = h.starts.length;
  const from = Date.now();
  const done = h.submit(endpoint).done;
  await vi.advanceTimersByTimeAsync(ms - 1);
  expect(h.starts).toHaveLength(before);
  await vi.advanceTimersByTimeAsync(1);
  await done;
  expect(h.starts[before]?.at).toBe(from + ms);
}

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(0);
});

afterEach(() => {
  vi.useRealTimers();
});

describe('createScheduler: per-endpoint minute limit', () => {
  it('starts the 401st request only when the first leaves the minute window plus margin', async () => {
    const h = harness();
    const done = h.submitMany(401, EVENTS);
    await vi.advanceTimersByTimeAsync(MINUTE_WINDOW - 1);
    expect(h.starts).toHaveLength(400);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.starts).toHaveLength(401);
    await Promise.all(done);
    const times = at(h.starts);
    expect(h.starts[0]?.at).toBe(0);
    expect(h.starts[400]?.at).toBe(MINUTE_WINDOW);
    expect(maxInWindow(times, MINUTE_WINDOW)).toBe(400);
  });

  it('keeps separate minute budgets per endpoint', async () => {
    const h = harness();
    const done = [...h.submitMany(400, EVENTS), ...h.submitMany(100, USERS)];
    await vi.advanceTimersByTimeAsync(20_000);
    await Promise.all(done);
    expect(h.starts).toHaveLength(500);
    // 500 starts at 40 per second window (1.1 s): the users' requests are not held back by the events' minute.
    expect(Math.max(...at(h.starts))).toBeLessThanOrEqual(12 * SECOND_WINDOW);
  });
});

describe('createScheduler: search minute limit', () => {
  it('starts at most 50 searches per sliding minute', async () => {
    const h = harness();
    const done = h.submitMany(60, SEARCH_ENDPOINT);
    await vi.advanceTimersByTimeAsync(MINUTE_WINDOW - 1);
    expect(h.starts).toHaveLength(50);
    await vi.advanceTimersByTimeAsync(1);
    expect(h.starts.length).toBeGreaterThan(50);
    await vi.advanceTimersByTimeAsync(5_000);
    await Promise.all(done);
    expect(h.starts[50]?.at).toBe(MINUTE_WINDOW);
    expect(maxInWindow(at(h.starts), MINUTE_WINDOW)).toBe(50);
  });
});

describe('createScheduler: combined per-second limit', () => {
  it('never starts more than 40 in any second across endpoints, and uses all 40', async () => {
    const h = harness();
    const done = [EVENTS, USERS, TRACES].flatMap((endpoint) => h.submitMany(100, endpoint));
    await vi.advanceTimersByTimeAsync(10_000);
    await Promise.all(done);
    const times = at(h.starts);
    expect(times).toHaveLength(300);
    expect(maxInWindow(times, 1_000)).toBe(40);
    expect(maxInWindow(times, SECOND_WINDOW)).toBe(40);
    expect(h.budget.stats().maxPerSecond).toBe(40);
    // 300 = 7.5 × 40: the last batch starts 7 windows after the first.
    expect(Math.max(...times)).toBe(7 * SECOND_WINDOW);
  });
});

describe('createScheduler: search gate', () => {
  it('holds a search while the last second already has 20 starts', async () => {
    const h = harness();
    const others = h.submitMany(20, EVENTS);
    const search = h.submit(SEARCH_ENDPOINT).done;
    await vi.advanceTimersByTimeAsync(SECOND_WINDOW - 1);
    expect(h.starts.filter((s) => s.endpoint === SEARCH_ENDPOINT)).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    await Promise.all([...others, search]);
    expect(h.starts.find((s) => s.endpoint === SEARCH_ENDPOINT)?.at).toBe(SECOND_WINDOW);
  });

  it('lets a search through while the last second has 19 starts', async () => {
    const h = harness();
    const others = h.submitMany(19, EVENTS);
    const search = h.submit(SEARCH_ENDPOINT).done;
    await vi.advanceTimersByTimeAsync(0);
    await Promise.all([...others, search]);
    expect(h.starts.find((s) => s.endpoint === SEARCH_ENDPOINT)?.at).toBe(0);
  });

  it('does not starve a search under a saturated combined budget', async () => {
    const h = harness({ taskMs: 30 });
    const lanes = [EVENTS, USERS, TRACES, SIGNALS, CONVERSATIONS];
    const backlog = lanes.flatMap((endpoint) => h.submitMany(300, endpoint, `${endpoint}|alpha`));
    await vi.advanceTimersByTimeAsync(3_000);
    const search = h.submit(SEARCH_ENDPOINT, 'search|alpha').done;
    await vi.advanceTimersByTimeAsync(3_000);
    const index = h.starts.findIndex((s) => s.endpoint === SEARCH_ENDPOINT);
    const started = h.starts[index];
    expect(started).toBeDefined();
    // Under the gate when it started: fewer than 20 starts in the second before it.
    const before = h.starts.slice(0, index).filter((s) => s.at > (started?.at ?? 0) - SECOND_WINDOW);
    expect(before.length).toBeLessThan(20);
    // And the others had been using the whole combined budget just before it asked.
    expect(maxInWindow(at(h.starts.filter((s) => s.at < 3_000)), SECOND_WINDOW)).toBe(40);
    expect((started?.at ?? Infinity) - 3_000).toBeLessThanOrEqual(2 * SECOND_WINDOW);
    await vi.advanceTimersByTimeAsync(120_000);
    await Promise.all([...backlog, search]);
  });
});

describe('createScheduler: 429', () => {
  it('pauses only the refused endpoint for Retry-After', async () => {
    const h = harness({ taskMs: 10 });
    const done = [...h.submitMany(200, EVENTS), ...h.submitMany(200, USERS)];
    await vi.advanceTimersByTimeAsync(2_000);
    const refusedAt = Date.now();
    h.budget.onRateLimited(EVENTS, 5_000);
    await vi.advanceTimersByTimeAsync(5_000);
    const during = h.starts.filter((s) => s.at >= refusedAt && s.at < refusedAt + 5_000);
    expect(during.filter((s) => s.endpoint === EVENTS)).toHaveLength(0);
    expect(during.filter((s) => s.endpoint === USERS).length).toBeGreaterThan(100);
    await vi.advanceTimersByTimeAsync(60_000);
    await Promise.all(done);
    expect(h.starts.filter((s) => s.endpoint === EVENTS && s.at >= refusedAt + 5_000).length).toBeGreaterThan(0);
    const stats = h.budget.stats();
    expect(stats.rateLimited).toBe(1);
    expect(stats.endpoints[EVENTS]?.rateLimited).toBe(1);
    expect(stats.endpoints[USERS]?.rateLimited).toBe(0);
  });

  it('backs off exponentially from 1 s when no Retry-After is given', async () => {
    const h = harness();
    h.budget.onRateLimited(EVENTS, undefined);
    await expectNextStartIn(h, EVENTS, 1_000);
    // A second episode (after the first one's 1 s) doubles the pause.
    h.budget.onRateLimited(EVENTS, 0);
    const second = h.submit(EVENTS).done;
    await vi.advanceTimersByTimeAsync(1_999);
    expect(h.starts).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    await second;
    expect(h.starts[1]?.at).toBe(3_000);
  });
});

describe('createScheduler: adaptation', () => {
  it('lowers the minute rate by 30 % on a 429 and regains 5 % per 10 s without one', async () => {
    // A combined limit that never binds, to watch the minute rate alone.
    const h = harness({ limits: { ...DEFAULT_RATE_LIMITS, maxRps: 1_000 } });
    // No Retry-After: a 1 s backoff, and the rate is cut (a lone Retry-After: 1 would be forgiven, below).
    h.budget.onRateLimited(EVENTS, undefined);
    // Several 429s of one burst count as one episode.
    h.budget.onRateLimited(EVENTS, undefined);
    expect(h.budget.stats().endpoints[EVENTS]?.currentRpm).toBe(280);
    const done = h.submitMany(400, EVENTS);
    await vi.advanceTimersByTimeAsync(1_000);
    // Paused until 1 s, then 280.
    expect(h.starts).toHaveLength(280);
    expect(h.starts[0]?.at).toBe(1_000);
    await vi.advanceTimersByTimeAsync(9_999);
    expect(h.starts).toHaveLength(280);
    // Each 10 s after the pause ended: +20/min, and the waiting requests use it at once.
    await vi.advanceTimersByTimeAsync(1);
    expect(h.budget.stats().endpoints[EVENTS]?.currentRpm).toBe(300);
    expect(h.starts).toHaveLength(300);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(h.starts).toHaveLength(320);
    await vi.advanceTimersByTimeAsync(40_000);
    expect(h.budget.stats().endpoints[EVENTS]?.currentRpm).toBe(400);
    expect(h.starts).toHaveLength(400);
    expect(h.starts.filter((s) => s.at < 61_000)).toHaveLength(380);
    await Promise.all(done);
  });

  it('lowers the per-second share of the refused endpoint faster than its minute rate', async () => {
    const h = harness();
    h.budget.onRateLimited(EVENTS, undefined);
    const done = [...h.submitMany(100, EVENTS), ...h.submitMany(100, USERS)];
    await vi.advanceTimersByTimeAsync(10_000);
    await Promise.all(done);
    const events = at(h.starts.filter((s) => s.endpoint === EVENTS));
    // 40 × 0.7²
    expect(maxInWindow(events, SECOND_WINDOW)).toBe(19);
    // The users' endpoint keeps the whole combined budget while events are paused.
    expect(maxInWindow(at(h.starts.filter((s) => s.at < 1_000)), SECOND_WINDOW)).toBe(40);
    expect(maxInWindow(at(h.starts), SECOND_WINDOW)).toBe(40);
  });

  it('a lone 429 asking for at most a second (and the rest of its burst) only pauses; the next episode within the quiet period cuts', async () => {
    const h = harness({ limits: { ...DEFAULT_RATE_LIMITS, maxRps: 1_000 } });
    h.budget.onRateLimited(EVENTS, 1_000);
    h.budget.onRateLimited(EVENTS, 1_000);
    expect(h.budget.stats().endpoints[EVENTS]?.currentRpm).toBe(400);
    await expectNextStartIn(h, EVENTS, 1_000);
    // Five seconds later, another: the server means it.
    await vi.advanceTimersByTimeAsync(4_000);
    h.budget.onRateLimited(EVENTS, 1_000);
    expect(h.budget.stats().endpoints[EVENTS]?.currentRpm).toBe(280);
    // After a quiet period a lone one is forgiven again; a longer Retry-After never is.
    await vi.advanceTimersByTimeAsync(20_000);
    const rpm = h.budget.stats().endpoints[EVENTS]?.currentRpm;
    h.budget.onRateLimited(EVENTS, 1_000);
    expect(h.budget.stats().endpoints[EVENTS]?.currentRpm).toBe(rpm);
    await vi.advanceTimersByTimeAsync(20_000);
    const before = h.budget.stats().endpoints[EVENTS]?.currentRpm ?? 0;
    h.budget.onRateLimited(EVENTS, 2_000);
    expect(Math.abs((h.budget.stats().endpoints[EVENTS]?.currentRpm ?? 0) - before * 0.7)).toBeLessThanOrEqual(1);
    await vi.advanceTimersByTimeAsync(2_000);
  });

  it('finishes a sync when the server enforces half the configured limits', async () => {
    const budget = createScheduler({ limits: DEFAULT_RATE_LIMITS });
    // A server with 200/min per endpoint and 20/s combined, counting accepted requests.
    const accepted: { endpoint: string; at: number }[] = [];
    let refused = 0;
    function serve(endpoint: string): Promise<'ok' | 'refused'> {
      const now = Date.now();
      const lastSecond = accepted.filter((a) => a.at > now - 1_000).length;
      const lastMinute = accepted.filter((a) => a.endpoint === endpoint && a.at > now - 60_000).length;
      if (lastSecond >= 20 || lastMinute >= 200) {
        refused += 1;
        return new Promise((resolve) => setTimeout(() => resolve('refused'), 20));
      }
      accepted.push({ endpoint, at: now });
      return new Promise((resolve) => setTimeout(() => resolve('ok'), 20));
    }
    async function request(endpoint: string, lane: string): Promise<void> {
      for (;;) {
        const outcome = await budget.schedule(endpoint, () => serve(endpoint), { lane });
        if (outcome === 'ok') return;
        budget.onRateLimited(endpoint, 1_000);
      }
    }
    // Three sequential paginators per endpoint, as the extract stage would run them.
    async function paginate(endpoint: string, lane: string, pages: number): Promise<void> {
      for (let page = 0; page < pages; page += 1) await request(endpoint, lane);
    }
    const all = [EVENTS, USERS].flatMap((endpoint) =>
      ['alpha', 'beta', 'gamma'].map((project) => paginate(endpoint, `${endpoint}|${project}`, 100)),
    );
    let finishedAt = Number.NaN;
    let rpmAtFinish = Number.NaN;
    void Promise.all(all).then(() => {
      finishedAt = Date.now();
      rpmAtFinish = budget.stats().endpoints[EVENTS]?.currentRpm ?? Number.NaN;
    });
    await vi.advanceTimersByTimeAsync(10 * 60_000);
    expect(accepted).toHaveLength(600);
    // 300 per endpoint at 200/min: the floor is just over a minute (about 76 s here).
    expect(finishedAt).toBeLessThan(90_000);
    // It adapted instead of hammering: refusals are a small share of the traffic.
    expect(refused).toBeLessThan(accepted.length / 4);
    expect(rpmAtFinish).toBeLessThan(400);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('createScheduler: fairness', () => {
  it('serves a lane within a couple of slots even behind a 1000-request backlog on the same endpoint', async () => {
    const h = harness();
    const backlog = h.submitMany(1_000, EVENTS, 'events|alpha');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(h.starts).toHaveLength(400);
    // The backlog holds the whole minute budget; the newcomer joins behind it.
    const other = h.submit(EVENTS, 'events|beta').done;
    await vi.advanceTimersByTimeAsync(MINUTE_WINDOW);
    await other;
    const index = h.starts.findIndex((s) => s.lane === 'events|beta');
    const afterGap = h.starts.filter((s) => s.at >= MINUTE_WINDOW);
    expect(afterGap.findIndex((s) => s.lane === 'events|beta')).toBeLessThanOrEqual(1);
    expect(h.starts[index]?.at).toBe(MINUTE_WINDOW);
    await vi.advanceTimersByTimeAsync(3 * MINUTE_WINDOW);
    await Promise.all(backlog);
  });

  it('takes turns between lanes on an endpoint even while another endpoint keeps the budget busy', async () => {
    // One request in flight at a time, search allowed once a minute, everything else unlimited:
    // between two search slots the busy events lane is served many times.
    const limits: RateLimits = { maxRpm: 100_000, searchRpm: 1, maxRps: 100_000, searchGateRps: 100_000 };
    const h = harness({ limits, maxInFlight: 1, taskMs: 100 });
    const a = h.submitMany(3, SEARCH_ENDPOINT, 'search|alpha');
    const b = h.submitMany(3, SEARCH_ENDPOINT, 'search|beta');
    const busy = h.submitMany(2_000, EVENTS, 'events|alpha');
    await vi.advanceTimersByTimeAsync(6 * MINUTE_WINDOW);
    await Promise.all([...a, ...b, ...busy]);
    const searches = h.starts.filter((s) => s.endpoint === SEARCH_ENDPOINT);
    expect(searches.map((s) => s.lane)).toEqual([
      'search|alpha',
      'search|beta',
      'search|alpha',
      'search|beta',
      'search|alpha',
      'search|beta',
    ]);
    // The events lane really was busy in between.
    expect(h.starts.filter((s) => s.endpoint === EVENTS && s.at < MINUTE_WINDOW).length).toBeGreaterThan(100);
  });

  it('alternates lanes that both wait on the combined budget', async () => {
    const h = harness();
    const a = h.submitMany(100, EVENTS, 'events|alpha');
    const b = h.submitMany(100, USERS, 'users|alpha');
    await vi.advanceTimersByTimeAsync(10_000);
    await Promise.all([...a, ...b]);
    const first40 = h.starts.slice(0, 40);
    expect(first40.filter((s) => s.lane === 'events|alpha')).toHaveLength(20);
    expect(first40.filter((s) => s.lane === 'users|alpha')).toHaveLength(20);
  });
});

describe('createScheduler: the longest walk first', () => {
  it('serves, within a lane, the request whose caller has the most left; unknown first, ties in arrival order', async () => {
    // One at a time, all queued before the first dispatch: the order is the queue's.
    const limits: RateLimits = { maxRpm: 100_000, searchRpm: 1, maxRps: 100_000, searchGateRps: 100_000 };
    const budget = createScheduler({ limits, maxInFlight: 1 });
    const order: string[] = [];
    const submit = (name: string, left: number | undefined, lane = 'events|*'): Promise<void> =>
      budget.schedule(
        EVENTS,
        async () => {
          order.push(name);
          await new Promise((resolve) => setTimeout(resolve, 10));
        },
        { lane, left },
      );
    const all = [
      submit('last page', 0),
      submit('short', 1),
      submit('long', 5),
      submit('unknown', undefined),
      submit('long too', 5),
      submit('middle', 3),
      submit('unknown too', undefined),
    ];
    await vi.advanceTimersByTimeAsync(1_000);
    await Promise.all(all);
    expect(order).toEqual(['unknown', 'unknown too', 'long', 'long too', 'middle', 'short', 'last page']);
  });

  it('keeps lanes taking turns whatever their requests have left', async () => {
    const h = harness();
    const budget = h.budget;
    const starts: string[] = [];
    const submit = (lane: string, left: number): Promise<void> =>
      budget.schedule(
        lane === 'a' ? EVENTS : CONVERSATIONS,
        async () => {
          starts.push(lane);
        },
        { lane, left },
      );
    const all = [
      ...Array.from({ length: 60 }, (_, i) => submit('a', 100 - i)),
      ...Array.from({ length: 60 }, (_, i) => submit('b', 1 + (i % 2))),
    ];
    await vi.advanceTimersByTimeAsync(10_000);
    await Promise.all(all);
    const first40 = starts.slice(0, 40);
    expect(first40.filter((lane) => lane === 'a')).toHaveLength(20);
    expect(first40.filter((lane) => lane === 'b')).toHaveLength(20);
  });
});

describe('createScheduler: abort', () => {
  it('rejects a waiting request with the abort reason, never runs it, and frees its place', async () => {
    const h = harness();
    const first = h.submitMany(40, EVENTS);
    const controller = new AbortController();
    const aborted = h.submit(EVENTS, 'default', controller.signal);
    const next = h.submit(EVENTS);
    await vi.advanceTimersByTimeAsync(100);
    expect(h.starts).toHaveLength(40);
    const reason = new Error('stop');
    controller.abort(reason);
    await expect(aborted.done).rejects.toBe(reason);
    await vi.advanceTimersByTimeAsync(SECOND_WINDOW);
    await Promise.all([...first, next.done]);
    expect(h.starts.map((s) => s.id)).not.toContain(aborted.id);
    expect(h.starts.find((s) => s.id === next.id)?.at).toBe(SECOND_WINDOW);
    expect(h.budget.stats().requests).toBe(41);
  });

  it('rejects at once when the signal is already aborted, and leaves no timer behind', async () => {
    const h = harness();
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    await expect(h.submit(EVENTS, 'default', controller.signal).done).rejects.toThrow('gone');
    // The only waiter of a paused bucket aborts: its wake-up timer goes too.
    h.budget.onRateLimited(USERS, 30_000);
    const waiting = new AbortController();
    const pending = h.submit(USERS, 'default', waiting.signal).done;
    await vi.advanceTimersByTimeAsync(10);
    expect(vi.getTimerCount()).toBe(1);
    waiting.abort(new Error('cancelled'));
    await expect(pending).rejects.toThrow('cancelled');
    await vi.advanceTimersByTimeAsync(0);
    expect(vi.getTimerCount()).toBe(0);
    expect(h.starts).toHaveLength(0);
  });
});

describe('createScheduler: throughput', () => {
  it('finishes 800 requests to one endpoint within the floor the limits allow, plus margins', async () => {
    const h = harness({ taskMs: 20 });
    const done = h.submitMany(800, EVENTS);
    let finishedAt = Number.NaN;
    void Promise.all(done).then(() => {
      finishedAt = Date.now();
    });
    await vi.advanceTimersByTimeAsync(80_000);
    expect(finishedAt).not.toBeNaN();
    // Floor: 400 in 10 bursts (the last at 9 s), the next 400 from 60 s: the last at 69 s.
    const floorMs = 69_000;
    expect(finishedAt).toBeGreaterThanOrEqual(floorMs);
    expect(floorMs / finishedAt).toBeGreaterThanOrEqual(0.98);
    expect(maxInWindow(at(h.starts), MINUTE_WINDOW)).toBe(400);
    expect(maxInWindow(at(h.starts), SECOND_WINDOW)).toBe(40);
    const stats = h.budget.stats();
    expect(stats.requests).toBe(800);
    expect(stats.endpoints[EVENTS]?.requests).toBe(800);
    expect(stats.endpoints[EVENTS]?.waitedMs).toBeGreaterThan(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('never has more than maxInFlight tasks running', async () => {
    const h = harness({ maxInFlight: 4, taskMs: 100 });
    const done = h.submitMany(40, EVENTS);
    await vi.advanceTimersByTimeAsync(2_000);
    await Promise.all(done);
    expect(h.maxInFlight()).toBe(4);
    // 40 tasks of 100 ms, 4 at a time.
    expect(Math.max(...at(h.starts))).toBe(900);
  });
});

describe('createScheduler: options', () => {
  it('rejects limits it cannot keep', () => {
    expect(() => createScheduler({ limits: { ...DEFAULT_RATE_LIMITS, maxRps: 0 } })).toThrow(RangeError);
    expect(() => createScheduler({ limits: DEFAULT_RATE_LIMITS, safetyMarginMs: { secondMs: -1 } })).toThrow(
      RangeError,
    );
  });

  it('uses the given margins', async () => {
    const budget: RequestBudget = createScheduler({
      limits: { ...DEFAULT_RATE_LIMITS, maxRps: 2 },
      safetyMarginMs: { secondMs: 200 },
    });
    const starts: number[] = [];
    const done = Array.from({ length: 3 }, () => budget.schedule(EVENTS, async () => starts.push(Date.now())));
    await vi.advanceTimersByTimeAsync(2_000);
    await Promise.all(done);
    expect(starts).toEqual([0, 0, 1_200]);
  });
});

describe('createScheduler: a request counts from when it is sent', () => {
  it('a request held back after it started (a connection being opened) counts from when it went out, as the server counts it', async () => {
    const budget: RequestBudget = createScheduler({ limits: { ...DEFAULT_RATE_LIMITS, maxRps: 1 } });
    const starts: number[] = [];
    // The first request reaches its socket 300 ms after it started.
    const first = budget.schedule(EVENTS, async (sent) => {
      starts.push(Date.now());
      await new Promise((r) => setTimeout(r, 300));
      sent();
    });
    const second = budget.schedule(EVENTS, async (sent) => {
      starts.push(Date.now());
      sent();
    });
    await vi.advanceTimersByTimeAsync(3_000);
    await Promise.all([first, second]);
    // The second waits for the first to leave the one-second window from its send time (300), not its start (0).
    expect(starts).toEqual([0, 300 + SECOND_WINDOW]);
  });

  it('a request that reports its send counts as sent now until it is, even more than a window after it started', async () => {
    const budget: RequestBudget = createScheduler({ limits: { ...DEFAULT_RATE_LIMITS, maxRps: 1 } });
    const starts: number[] = [];
    const sends: number[] = [];
    // The first reaches its socket 1,500 ms after it started (our event loop stalled, a slow connect).
    const first = budget.schedule(
      EVENTS,
      async (sent) => {
        starts.push(Date.now());
        await new Promise((r) => setTimeout(r, 1_500));
        sends.push(Date.now());
        sent();
      },
      { reportsSent: true },
    );
    const second = budget.schedule(
      USERS,
      async (sent) => {
        starts.push(Date.now());
        sends.push(Date.now());
        sent();
      },
      { reportsSent: true },
    );
    await vi.advanceTimersByTimeAsync(5_000);
    await Promise.all([first, second]);
    // Not at 1,100 (its start left the window, and the server would then count both within 400 ms):
    // a window after the first really went out.
    expect(starts).toEqual([0, 1_500 + SECOND_WINDOW]);
    expect(sends).toEqual([1_500, 1_500 + SECOND_WINDOW]);
  });

  it('a reporting request that ends unsent (its connection failed) stops holding the window', async () => {
    const budget: RequestBudget = createScheduler({ limits: { ...DEFAULT_RATE_LIMITS, maxRps: 1 } });
    const starts: number[] = [];
    const failed = budget.schedule(
      EVENTS,
      async () => {
        starts.push(Date.now());
        await new Promise((r) => setTimeout(r, 5_000));
        throw new Error('connect ECONNREFUSED');
      },
      { reportsSent: true },
    );
    const caught = failed.catch((error: unknown) => error);
    const next = budget.schedule(EVENTS, async (sent) => {
      starts.push(Date.now());
      sent();
    });
    await vi.advanceTimersByTimeAsync(10_000);
    await next;
    expect(await caught).toBeInstanceOf(Error);
    // Held as sent at each window's end (1,100, 2,200, 3,300, 4,400) until it failed at 5,000; the last
    // of those counts its window out, no more.
    expect(starts).toEqual([0, 4 * SECOND_WINDOW + SECOND_WINDOW]);
  });

  it('sent() at the start changes nothing, and a second call is ignored', async () => {
    const budget: RequestBudget = createScheduler({ limits: { ...DEFAULT_RATE_LIMITS, maxRps: 1 } });
    const starts: number[] = [];
    const done = Array.from({ length: 2 }, () =>
      budget.schedule(EVENTS, async (sent) => {
        starts.push(Date.now());
        sent();
        await new Promise((r) => setTimeout(r, 500));
        sent();
      }),
    );
    await vi.advanceTimersByTimeAsync(3_000);
    await Promise.all(done);
    expect(starts).toEqual([0, SECOND_WINDOW]);
  });
});
