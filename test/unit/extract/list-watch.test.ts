import { describe, expect, it } from 'vitest';
import { conversations } from '../../../connectors/conversations.js';
import { OrderLearner, offsetOf } from '../../../src/extract/list-watch.js';

const at = (minute: number): string => new Date(Date.UTC(2026, 10, 20, 10, minute)).toISOString();
const convo = (
  id: string,
  started: number,
  last: number,
): { id: string; started_at: string; last_message_at: string } => ({
  id,
  started_at: at(started),
  last_message_at: at(last),
});

describe('OrderLearner: the order of a list, from its records only', () => {
  it('sequential conversations look sorted by both fields: nothing is proven (the walk must read on)', () => {
    const learner = new OrderLearner(conversations);
    learner.see([convo('c', 40, 45), convo('b', 20, 25), convo('a', 0, 5)]);
    expect(learner.proven).toBe(false);
    expect(learner.broken).toBe(false);
    expect(learner.observation()).toEqual({});
  });

  it('one record that tells last_message_at apart from started_at proves the order', () => {
    const learner = new OrderLearner(conversations);
    learner.see([convo('long', 0, 50), convo('short', 30, 35)]);
    expect(learner.proven).toBe(true);
    expect(learner.observation().order).toBe('-last_message_at');
  });

  it('records by started_at break the order and say which order they follow', () => {
    const learner = new OrderLearner(conversations);
    learner.see([convo('late', 30, 35), convo('long', 0, 50)]);
    expect(learner.broken).toBe(true);
    expect(learner.proven).toBe(false);
    expect(learner.observation()).toMatchObject({ order: '-started_at', orderBroken: true });
  });

  it('records that follow no candidate are "unordered"', () => {
    const learner = new OrderLearner(conversations);
    learner.see([convo('a', 0, 5), convo('c', 40, 45), convo('b', 20, 25)]);
    expect(learner.observation()).toMatchObject({ order: 'unordered', orderBroken: true });
  });
});

describe('offsetOf', () => {
  it('reads plain record counts only', () => {
    expect(offsetOf('100')).toBe(100);
    expect(offsetOf('0')).toBe(0);
    expect(offsetOf('eyJyIjoidXNlcnMifQ')).toBeUndefined();
    expect(offsetOf('-1')).toBeUndefined();
    expect(offsetOf(null)).toBeUndefined();
  });
});
