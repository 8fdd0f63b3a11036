import { describe, expect, it } from 'vitest';
import { RowBudget } from '../../../src/sync/row-budget.js';

/**
 * The rows a stream's split parts hold together: a page's worth is taken before a page is asked
 * for and given back once stored; a part that finds no room waits, in order, and a page larger
 * than the whole budget takes all of it.
 */

describe('RowBudget', () => {
  it('takes while there is room and refuses past it', () => {
    const budget = new RowBudget(250);
    expect(budget.tryTake(100)).toBe(100);
    expect(budget.tryTake(100)).toBe(100);
    expect(budget.tryTake(100)).toBeUndefined();
    budget.give(100);
    expect(budget.tryTake(100)).toBe(100);
  });

  it('counts a page larger than the budget as the whole budget', async () => {
    const budget = new RowBudget(500);
    expect(await budget.take(1000)).toBe(500);
    expect(budget.tryTake(1)).toBeUndefined();
    budget.give(500);
    expect(budget.tryTake(1000)).toBe(500);
  });

  it('lets waiters in, in order, as rows come back; no one jumps the queue', async () => {
    const budget = new RowBudget(200);
    expect(budget.tryTake(200)).toBe(200);
    const order: string[] = [];
    const a = budget.take(150).then((n) => order.push(`a${n}`));
    const b = budget.take(50).then((n) => order.push(`b${n}`));
    // Room for 50 now, but `a` waits first: `b` does not pass it, nor does a `tryTake`.
    budget.give(50);
    expect(budget.tryTake(50)).toBeUndefined();
    budget.give(150);
    await Promise.all([a, b]);
    expect(order).toEqual(['a150', 'b50']);
    expect(budget.tryTake(1)).toBeUndefined();
    budget.give(200);
    expect(budget.tryTake(200)).toBe(200);
  });
});
