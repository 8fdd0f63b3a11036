import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { renderProgress, TtyProgressDisplay } from '../../src/commands/progress-display.js';
import type { Clock } from '../../src/core/types.js';
import { ProgressTracker } from '../../src/pipeline/progress.js';

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
    const t = new ProgressTracker(clock);
    t.addWindows('events', 10, 2);
    t.page('events', 0);
    clock.advance(2000);
    t.page('events', 500);
    t.windowDone('events');
    const [events] = t.snapshot().resources;
    expect(events).toMatchObject({ resource: 'events', rows: 500, pages: 2, windowsDone: 3, windowsTotal: 10, done: false });
    expect(events?.rowsPerSecond).toBe(250);
  });

  it('ETA from the plan: the floor of the limits early on, the observed pace later', () => {
    const clock = fakeClock();
    const t = new ProgressTracker(clock, { resources: { events: { rows: 80_000, pages: 800, minimumSeconds: 69 } }, minimumSeconds: 69 });
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

  it('without a plan, estimates from the share of windows run in this run (skipped ones excluded)', () => {
    const clock = fakeClock();
    const t = new ProgressTracker(clock);
    t.addWindows('traces', 12, 2);
    expect(t.snapshot().resources[0]?.etaSeconds).toBeUndefined();
    clock.advance(10_000);
    t.windowDone('traces');
    t.windowDone('traces');
    expect(t.snapshot().resources[0]?.etaSeconds).toBe(40);
    for (let i = 0; i < 8; i++) t.windowDone('traces');
    expect(t.snapshot().resources[0]).toMatchObject({ done: true, etaSeconds: 0 });
  });

  it('lists planned resources before they start, and takes back a window that will not run', () => {
    const t = new ProgressTracker(fakeClock(), { resources: { events: { rows: 5, pages: 1 } } });
    expect(t.snapshot().resources.map((r) => r.resource)).toEqual(['events']);
    t.addWindows('users', 1);
    t.removeWindow('users');
    expect(t.snapshot().resources.find((r) => r.resource === 'users')?.windowsTotal).toBe(0);
  });
});

describe('TtyProgressDisplay', () => {
  it('redraws its lines in place and prints log lines above them', () => {
    const clock = fakeClock();
    const t = new ProgressTracker(clock, { resources: { events: { rows: 1000, pages: 10, minimumSeconds: 5 } } });
    t.addWindows('events', 4);
    const out = new PassThrough();
    let written = '';
    out.on('data', (b: Buffer) => (written += b.toString()));
    const display = new TtyProgressDisplay(t, out);
    display.start();
    t.page('events', 100);
    display.logStream.write('a log line\n');
    display.stop();
    const lines = renderProgress(t);
    expect(lines[0]).toMatch(/^events\s+rows 100\/1000\s+pages 1\/10\s+windows 0\/4\s+\d+ rows\/s\s+ETA \d/);
    expect(lines[1]).toMatch(/^elapsed .* ETA/);
    // Each redraw moves up over the lines drawn before (ESC [n F) and clears them (ESC [J).
    expect(written).toContain('\x1b[2F\x1b[J');
    expect(written).toMatch(/\x1b\[2F\x1b\[Ja log line\n/);
    expect(written.endsWith(`${lines.join('\n')}\n`)).toBe(true);
  });
});
