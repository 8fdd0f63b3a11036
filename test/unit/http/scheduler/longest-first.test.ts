import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_RATE_LIMITS } from '../../../../src/http/scheduler/budget.js';
import { createScheduler } from '../../../../src/http/scheduler/scheduler.js';

/**
 * Why the walks of a split say what they have left (`ScheduleOptions.left`): the shape of run 2 of
 * `npm run bench:pace` on a fake clock, two streams of 16 sub-windows each (20–25 and 19–20 pages, as
 * the planner cuts them) plus two single walks, every answer 300 ms ± 20 %, under the documented
 * limits. In turn within a lane, the largest sub-windows are left alone at the end, one page per
 * round trip with the budget idle; longest first, the walks end together.
 */

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(0);
});

afterEach(() => {
  vi.useRealTimers();
});

/** A seeded generator (the same run every time). */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1_664_525 + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

/** Seconds until the last answer of the run, its walks saying what they have left or not. */
async function lastAnswer(seed: number, sayLeft: boolean): Promise<number> {
  const r = random(seed);
  const budget = createScheduler({ limits: DEFAULT_RATE_LIMITS });
  const startedAt = Date.now();
  let last = startedAt;
  const walk = async (endpoint: string, lane: string, pages: number, startMs: number): Promise<void> => {
    await new Promise((resolve) => setTimeout(resolve, startMs));
    for (let left = pages - 1; left >= 0; left -= 1) {
      const latencyMs = 300 * (0.8 + 0.4 * r());
      await budget.schedule(endpoint, () => new Promise((resolve) => setTimeout(resolve, latencyMs)), {
        lane,
        left: sayLeft ? left : undefined,
      });
    }
    last = Math.max(last, Date.now());
  };
  const walks: Promise<void>[] = [];
  for (let i = 0; i < 16; i += 1) walks.push(walk('/v1/events', 'events|*', 20 + Math.floor(r() * 6), 400 + r() * 600));
  for (let i = 0; i < 16; i += 1)
    walks.push(walk('/v1/conversations', 'conversations|*', 19 + Math.floor(r() * 2), 400 + r() * 600));
  walks.push(walk('/v1/traces', 'traces|alpha', 37, 400), walk('/v1/users', 'users|*', 9, 400));
  const all = Promise.all(walks);
  await vi.advanceTimersByTimeAsync(60_000);
  await all;
  return (last - startedAt) / 1000;
}

describe('the longest walk first', () => {
  it('ends the walks of a split sooner than taking turns: the largest sub-windows are not left alone at the end', async () => {
    for (const seed of [1, 2, 3]) {
      const inTurn = await lastAnswer(seed, false);
      const longestFirst = await lastAnswer(seed, true);
      expect(longestFirst, `seed ${seed}: ${inTurn} s in turn`).toBeLessThanOrEqual(inTurn - 0.3);
    }
  });
});
