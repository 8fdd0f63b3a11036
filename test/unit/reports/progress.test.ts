import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { renderProgress, TtyProgressDisplay } from '../../../src/reports/progress-display.js';
import { observedBudget } from '../../../src/http/scheduler/budget-observer.js';
import { DEFAULT_RATE_LIMITS, type RequestBudget } from '../../../src/http/scheduler/budget.js';
import type { Clock } from '../../../src/core/types.js';
import { ProgressTracker } from '../../../src/reports/progress.js';

/** The documented limits (400 a minute per endpoint), as `--max-rpm` leaves them. */
const LIMITS = DEFAULT_RATE_LIMITS;

function fakeClock(): Clock & { advance(ms: number): void } {
  let now = 1_000_000;
  return {
    now: () => now,
    sleep: async () => undefined,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe('ProgressTracker', () => {
  it('counts rows, pages and windows per resource, with rows per second', () => {
    const clock = fakeClock();
    const t = new ProgressTracker(clock, LIMITS);
    t.addWindows('events', 10, 2);
    t.page('events', 0);
    clock.advance(2000);
    t.page('events', 500);
    t.windowDone('events');
    const [events] = t.snapshot().resources;
    expect(events).toMatchObject({
      resource: 'events',
      rows: 500,
      pages: 2,
      windowsDone: 3,
      windowsTotal: 10,
      done: false,
    });
    expect(events?.rowsPerSecond).toBe(250);
  });

  it('ETA from the plan: the floor of the limits early on, the observed pace later', () => {
    const clock = fakeClock();
    const t = new ProgressTracker(clock, LIMITS, {
      resources: { events: { rows: 80_000, pages: 800, minimumSeconds: 69 } },
      minimumSeconds: 69,
    });
    t.addWindows('events', 30);
    // A fast first burst: 400 pages in 10 s would extrapolate to 20 s; the floor says 69 s.
    for (let i = 0; i < 400; i++) t.page('events', 100);
    clock.advance(10_000);
    expect(t.snapshot().resources[0]?.etaSeconds).toBe(59);
    expect(t.snapshot().etaSeconds).toBe(59);
    // Slower than the floor: the pace wins (500 of 800 pages in 100 s → 160 s in all).
    for (let i = 0; i < 100; i++) t.page('events', 100);
    clock.advance(90_000);
    expect(t.snapshot().resources[0]?.etaSeconds).toBeCloseTo(60, 5);
  });

  it('past its planned pages and still running (a backlog the run grows), a resource has no ETA, and the run none rather than "at least 0 s"', () => {
    const clock = fakeClock();
    const t = new ProgressTracker(clock, LIMITS, {
      resources: { events: { pages: 2, minimumSeconds: 1 }, traces: { pages: 3, minimumSeconds: 1 } },
      minimumSeconds: 2,
    });
    t.addWindows('events', 1);
    t.addWindows('traces', 1);
    t.page('events', 100);
    t.page('events', 100);
    t.windowDone('events');
    for (let i = 0; i < 5; i++) t.page('traces', 1);
    clock.advance(10_000);
    const snap = t.snapshot();
    expect(snap.resources.find((r) => r.resource === 'events')).toMatchObject({ done: true, etaSeconds: 0 });
    expect(snap.resources.find((r) => r.resource === 'traces')?.etaSeconds).toBeUndefined();
    expect(snap.etaSeconds).toBeUndefined();
    t.windowDone('traces');
    expect(t.snapshot().etaSeconds).toBe(0);
  });

  it('a per-parent backlog has an ETA: one request per pending parent, at its drain pace, never faster than a minute limit', () => {
    const clock = fakeClock();
    const t = new ProgressTracker(clock, LIMITS, {
      resources: { traces: { pages: 3, minimumSeconds: 1 } },
      minimumSeconds: 1,
    });
    t.addWindows('traces', 1);
    t.backlog('traces', 60);
    // Nothing drained yet: at 400 a minute, 60 requests take 9 s at least.
    expect(t.snapshot().resources[0]?.etaSeconds).toBeCloseTo(9, 5);
    for (let i = 0; i < 5; i++) t.page('traces', 1);
    clock.advance(10_000);
    // Past its planned pages: 5 pages in 10 s is 0.5/s, so the 60 queued now take 120 s.
    expect(t.snapshot().resources[0]?.etaSeconds).toBeCloseTo(120, 5);
    expect(t.snapshot().etaSeconds).toBeCloseTo(120, 5);
    // It drains: the estimate follows what is left.
    t.backlog('traces', 6);
    expect(t.snapshot().resources[0]?.etaSeconds).toBeCloseTo(12, 5);
  });

  it('without a plan, estimates from the share of windows run in this run (skipped ones excluded)', () => {
    const clock = fakeClock();
    const t = new ProgressTracker(clock, LIMITS);
    t.addWindows('traces', 12, 2);
    expect(t.snapshot().resources[0]?.etaSeconds).toBeUndefined();
    clock.advance(10_000);
    t.windowDone('traces');
    t.windowDone('traces');
    expect(t.snapshot().resources[0]?.etaSeconds).toBe(40);
    for (let i = 0; i < 8; i++) t.windowDone('traces');
    expect(t.snapshot().resources[0]).toMatchObject({ done: true, etaSeconds: 0 });
  });

  it('lists resources in the given order, whatever order they start in', () => {
    const t = new ProgressTracker(fakeClock(), LIMITS);
    t.setOrder(['events', 'traces', 'users']);
    t.addWindows('users', 1);
    t.addWindows('other', 1);
    t.addWindows('events', 1);
    expect(t.snapshot().resources.map((r) => r.resource)).toEqual(['events', 'users', 'other']);
  });

  it('lists planned resources before they start, and takes back a window that will not run', () => {
    const t = new ProgressTracker(fakeClock(), LIMITS, { resources: { events: { rows: 5, pages: 1 } } });
    expect(t.snapshot().resources.map((r) => r.resource)).toEqual(['events']);
    t.addWindows('users', 1);
    t.removeWindow('users');
    expect(t.snapshot().resources.find((r) => r.resource === 'users')?.windowsTotal).toBe(0);
  });
});

describe('ProgressTracker: states', () => {
  it('marks a failed stream, and a run that ended leaves no resource running', () => {
    const t = new ProgressTracker(fakeClock(), LIMITS);
    t.addWindows('traces', 3);
    t.windowDone('traces');
    t.streamFailed('traces', 'beta', '[resource traces, project beta] the API key was rejected (401)');
    let traces = t.snapshot().resources[0];
    expect(traces).toMatchObject({ done: false, failed: [{ scope: 'beta' }] });
    t.finish();
    traces = t.snapshot().resources[0];
    expect(traces).toMatchObject({ done: true, failed: [{ scope: 'beta' }] });
  });

  it('shows "waiting" only once a request has waited for the budget a second, and "backing off" with the time left', () => {
    const clock = fakeClock();
    const t = new ProgressTracker(clock, LIMITS);
    t.addWindows('events', 1);
    t.requestQueued('/v1/events', 'events|*');
    clock.advance(500);
    expect(t.snapshot().resources[0]?.activity).toBeUndefined();
    clock.advance(2000);
    expect(t.snapshot().resources[0]?.activity).toEqual({ kind: 'waiting', seconds: 2.5, pausedAfter429: false });
    t.rateLimitedOn('/v1/events', 10_000);
    expect(t.snapshot().resources[0]?.activity).toMatchObject({ kind: 'waiting', pausedAfter429: true });
    expect(t.snapshot().rateLimited).toBe(1);
    t.requestDequeued('events|*', true);
    expect(t.snapshot().resources[0]?.activity).toBeUndefined();
    expect(t.snapshot().requests).toBe(1);
    t.backingOff('events', 4000, 'HTTP 503');
    clock.advance(1000);
    expect(t.snapshot().resources[0]?.activity).toEqual({ kind: 'backoff', seconds: 3, reason: 'HTTP 503' });
    clock.advance(3000);
    expect(t.snapshot().resources[0]?.activity).toBeUndefined();
    // The plan's count requests (lane plan|…) count as requests but belong to no resource.
    t.requestQueued('/v1/events/count', 'plan|events|*');
    t.requestDequeued('plan|events|*', true);
    expect(t.snapshot().resources.map((r) => r.resource)).toEqual(['events']);
  });

  it('counts rows read (for the plan) apart from rows stored (written in batches)', () => {
    const t = new ProgressTracker(fakeClock(), LIMITS, { resources: { events: { rows: 300, pages: 3 } } });
    t.addWindows('events', 1);
    t.page('events', 0, 100);
    t.page('events', 0, 100);
    expect(t.snapshot().resources[0]).toMatchObject({ rows: 0, rowsRead: 200 });
    t.page('events', 300, 100);
    expect(t.snapshot().resources[0]).toMatchObject({ rows: 300, rowsRead: 300 });
  });
});

describe('observedBudget', () => {
  it('reports queued, started, cancelled and 429s, and schedules exactly as the budget it wraps', async () => {
    const calls: string[] = [];
    let release: (() => void) | undefined;
    const inner: RequestBudget = {
      schedule: async (endpoint, task, options) => {
        calls.push(`schedule ${endpoint} ${options?.lane}`);
        if (options?.signal?.aborted) throw new Error('aborted');
        await new Promise<void>((r) => (release = r));
        return task(() => undefined);
      },
      onRateLimited: (endpoint, ms) => calls.push(`429 ${endpoint} ${ms}`),
      stats: () => ({ requests: 0, rateLimited: 0, maxPerSecond: 0, endpoints: {} }),
    };
    const seen: string[] = [];
    const budget = observedBudget(inner, {
      queued: (e, lane) => seen.push(`queued ${e} ${lane}`),
      dequeued: (lane, started) => seen.push(`dequeued ${lane} ${started}`),
      rateLimited: (e, ms) => seen.push(`429 ${e} ${ms}`),
    });
    const p = budget.schedule('/v1/events', async () => 42, { lane: 'events|*' });
    expect(seen).toEqual(['queued /v1/events events|*']);
    release?.();
    expect(await p).toBe(42);
    expect(seen).toEqual(['queued /v1/events events|*', 'dequeued events|* true']);
    const aborted = AbortSignal.abort();
    await expect(budget.schedule('/v1/users', async () => 1, { lane: 'users|*', signal: aborted })).rejects.toThrow(
      'aborted',
    );
    expect(seen.at(-1)).toBe('dequeued users|* false');
    budget.onRateLimited('/v1/events', 3000);
    expect(seen.at(-1)).toBe('429 /v1/events 3000');
    expect(calls).toEqual(['schedule /v1/events events|*', 'schedule /v1/users users|*', '429 /v1/events 3000']);
  });
});

function runningTracker(clock: ReturnType<typeof fakeClock>): ProgressTracker {
  const t = new ProgressTracker(clock, LIMITS, {
    resources: { events: { rows: 150_059, pages: 1501, minimumSeconds: 200 } },
    minimumSeconds: 200,
  });
  for (const r of ['events', 'users', 'conversations']) t.addWindows(r, 1);
  t.addWindows('traces', 3);
  for (let i = 0; i < 450; i++) t.page('events', i % 50 === 49 ? 5000 : 0, 100);
  t.page('users', 1500, 1500);
  t.windowDone('users');
  return t;
}

describe('renderProgress', () => {
  it('fits every line to the terminal, narrow or wide', () => {
    const clock = fakeClock();
    const t = runningTracker(clock);
    t.streamFailed(
      'traces',
      'beta',
      '[resource traces, project beta] the API key was rejected (401). Expected the Organization API Key (the write key used for ingestion is not accepted).',
    );
    clock.advance(30_000);
    for (const columns of [40, 60, 80, 120, 200]) {
      const lines = renderProgress(t.snapshot(), { columns });
      for (const line of lines) expect([...line].length, `${columns}: ${line}`).toBeLessThan(columns);
    }
    const narrow = renderProgress(t.snapshot(), { columns: 80 });
    expect(narrow[0]).toMatch(/^\S events\s+45,000\/150,059 rows\s+450 pg\s+0\/1 win\s+[\d,]+\/s ETA \d/);
    expect(narrow[1]).toMatch(/^✓ users\s+1,500 rows\s+1 pg\s+1\/1 win done$/);
    expect(narrow[3]).toMatch(/^✗ traces .* FAILED, running$/);
    expect(narrow[4]).toMatch(/^ {2}└ the API key was rejected \(401\)\. Expected the Organization API Key .*…$/);
    const wide = renderProgress(t.snapshot(), { columns: 200 });
    expect(wide[0]).toMatch(
      /^\S events\s+rows 45,000\/150,059\s+pages 450\/1,501\s+windows 0\/1\s+[\d,]+ rows\/s\s+ETA/,
    );
    expect(wide[3]).toContain(
      'FAILED, others running: the API key was rejected (401). Expected the Organization API Key',
    );
    expect(wide.at(-1)).toMatch(/^elapsed 30s · ETA .* · 0 requests$/);
  });

  it('a resumed sync window: the plan is an upper bound while running, and the stored rows alone once done', () => {
    const clock = fakeClock();
    const t = new ProgressTracker(clock, LIMITS, {
      resources: { events: { rows: 150_059, pages: 1501, resumed: true } },
    });
    t.addWindows('events', 1);
    t.page('events', 120_059, 120_059);
    let lines = renderProgress(t.snapshot(), { columns: 80 });
    expect(lines[0]).toContain('120,059/≤150,059 rows');
    expect(renderProgress(t.snapshot(), { columns: 200 })[0]).toMatch(/rows 120,059\/≤150,059\s+pages 1\/≤1,501 /);
    expect(lines.at(-1)).toMatch(/^≤: a resumed window/);
    t.windowDone('events');
    lines = renderProgress(t.snapshot(), { columns: 80 });
    expect(lines[0]).toMatch(/^✓ events\s+120,059 rows\s+1 pg done \(resumed\)$/);
    expect(lines.join('\n')).not.toContain('150,059');
  });

  it('shows waiting for the rate budget and backing off', () => {
    const clock = fakeClock();
    const t = runningTracker(clock);
    t.requestQueued('/v1/events', 'events|*');
    t.rateLimitedOn('/v1/events', 20_000);
    t.backingOff('conversations', 8000, 'HTTP 503');
    clock.advance(3000);
    const wide = renderProgress(t.snapshot(), { columns: 200 });
    expect(wide[0]).toMatch(/waiting for rate budget 3s \(paused after a 429\)$/);
    expect(wide[2]).toMatch(/backing off 5s \(HTTP 503\)$/);
    expect(wide.at(-1)).toContain('1 × 429');
    const narrow = renderProgress(t.snapshot(), { columns: 80 });
    expect(narrow[0]).toMatch(/429: waiting 3s$/);
    expect(narrow[2]).toMatch(/backing off 5s$/);
  });

  it('a planning spinner with the count requests so far', () => {
    const clock = fakeClock();
    const t = new ProgressTracker(clock, LIMITS);
    t.markPlanning();
    t.requestQueued('/v1/events/count', 'plan|events|*');
    t.requestDequeued('plan|events|*', true);
    clock.advance(4000);
    expect(renderProgress(t.snapshot(), { frame: 0 })).toEqual(['⠋ planning the run: 1 count request · 4s']);
    expect(renderProgress(t.snapshot(), { frame: 1 })[0]).toMatch(/^⠙ planning/);
  });
});

describe('TtyProgressDisplay', () => {
  it('redraws in place with log-update, prints log lines above, and leaves its last frame', () => {
    const clock = fakeClock();
    const t = new ProgressTracker(clock, LIMITS, {
      resources: { events: { rows: 1000, pages: 10, minimumSeconds: 5 } },
    });
    t.addWindows('events', 4);
    const out = Object.assign(new PassThrough(), { columns: 60 });
    let written = '';
    out.on('data', (b: Buffer) => (written += b.toString()));
    const display = new TtyProgressDisplay(t, out);
    display.start();
    t.page('events', 100);
    display.logStream.write('a log line\n');
    display.stop();
    // Each redraw erases the lines drawn before (cursor up, erase line) and draws again.
    expect(written).toContain('\x1b[2K\x1b[1A\x1b[2K\x1b[G');
    expect(written).toContain('\x1b[Ga log line\n');
    const last = renderProgress(t.snapshot(), { columns: 60, frame: 3 });
    expect(written.endsWith(`${last.join('\n')}\n`)).toBe(true);
    // After stop, log lines are written as they are (nothing to redraw).
    const before = written.length;
    display.logStream.write('after\n');
    expect(written.slice(before)).toBe('after\n');
  });
});
