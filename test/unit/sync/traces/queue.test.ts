import { afterEach, describe, expect, it } from 'vitest';
import { events } from '../../../../connectors/events.js';
import { traces } from '../../../../connectors/traces.js';
import { systemClock } from '../../../../src/core/clock.js';
import type { Row } from '../../../../src/core/types.js';
import { TraceQueue, traceBacklog, showsTraces } from '../../../../src/sync/traces/queue.js';
import { StateStore } from '../../../../src/state/store.js';
import { tempDir } from '../../../fakes/tmp.js';

const dirs: { cleanup(): void }[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) d.cleanup();
});

async function openState(): Promise<{ state: StateStore; path: string }> {
  const d = tempDir();
  dirs.push(d);
  const path = `${d.dir}/state.json`;
  return { state: await StateStore.open(path, { clock: systemClock, purpose: 'sync' }), path };
}

const event = (id: string, at: string, fields: Partial<Row> = {}, project = 'default'): Row => ({
  project_id: project,
  id,
  timestamp: at,
  tool_calls: '[]',
  error_spans: null,
  model: null,
  ...fields,
});

describe('showsTraces', () => {
  it('counts a non-empty declared field as a trace, and JSON text [] / {} / null or an empty string as none', () => {
    const fields = ['tool_calls', 'error_spans', 'model'];
    expect(showsTraces(event('a', '2026-01-01T00:00:00Z'), fields)).toBe(false);
    expect(showsTraces(event('a', '2026-01-01T00:00:00Z', { model: '' }), fields)).toBe(false);
    expect(showsTraces(event('a', '2026-01-01T00:00:00Z', { error_spans: '{}' }), fields)).toBe(false);
    expect(showsTraces(event('a', '2026-01-01T00:00:00Z', { model: 'gpt-x' }), fields)).toBe(true);
    expect(showsTraces(event('a', '2026-01-01T00:00:00Z', { tool_calls: '[{"name":"search"}]' }), fields)).toBe(true);
  });
});

describe('TraceQueue (the per-event traces backlog in state)', () => {
  it('queues the selected events of a stored batch once, hands them out oldest first, and survives a reopen', async () => {
    const { state, path } = await openState();
    const queue = new TraceQueue({ traces, events, selection: 'traced', lookbackMs: 0 }, state, systemClock);
    await queue.enqueue([
      event('e2', '2026-01-01T00:00:02Z', { model: 'm' }),
      event('e1', '2026-01-01T00:00:01Z', { tool_calls: '[1]' }),
      event('plain', '2026-01-01T00:00:00Z'),
      event('x1', '2026-01-01T00:00:05Z', { model: 'm' }, 'alpha'),
    ]);
    await queue.enqueue([event('e1', '2026-01-01T00:00:01Z', { tool_calls: '[1]' })]); // a re-read: no second unit
    expect(queue.take('default', 10, new Set()).map((u) => u.id)).toEqual(['e1', 'e2']);
    expect(queue.take('default', 1, new Set(['e1'])).map((u) => u.id)).toEqual(['e2']);
    expect(queue.take('alpha', 10, new Set()).map((u) => u.id)).toEqual(['x1']);
    await state.close();

    const reopened = await StateStore.read(path);
    expect(traceBacklog(reopened, traces).pending).toEqual({ default: 2, alpha: 1 });
  });

  it('selection "all" queues every event', async () => {
    const { state } = await openState();
    const queue = new TraceQueue({ traces, events, selection: 'all', lookbackMs: 0 }, state, systemClock);
    await queue.enqueue([event('a', '2026-01-01T00:00:00Z'), event('b', '2026-01-01T00:00:01Z')]);
    expect(queue.pendingCount('default')).toBe(2);
    await state.close();
  });

  it('a done event is not queued again when its window is re-read, until it falls behind every re-read horizon', async () => {
    const { state } = await openState();
    const queue = new TraceQueue({ traces, events, selection: 'all', lookbackMs: 60_000 }, state, systemClock);
    await state.updateStream('events:default', () => ({
      mark: '2026-01-01T01:00:00.000Z',
      settled: '2026-01-01T00:30:00.000Z',
    }));
    await queue.enqueue([event('old', '2026-01-01T00:10:00Z'), event('new', '2026-01-01T00:40:00Z')]);
    const units = queue.take('default', 10, new Set());
    await queue.complete('default', units);
    expect(queue.pendingCount('default')).toBe(0);
    // "new" lies after the settle mark: a later settle re-read may list it again, so it is remembered.
    expect(traceBacklog(state.document, traces).done).toBe(1);
    await queue.enqueue([event('new', '2026-01-01T00:40:00Z')]);
    expect(queue.pendingCount('default')).toBe(0);
    await state.close();
  });

  it('a drain waits while parents run and knows when they ended', async () => {
    const { state } = await openState();
    const queue = new TraceQueue({ traces, events, selection: 'all', lookbackMs: 0 }, state, systemClock);
    queue.parentStarted();
    expect(queue.parentsDoneAt()).toBeUndefined();
    const woke = queue.changed();
    await queue.enqueue([event('a', '2026-01-01T00:00:00Z')]);
    await woke;
    const ended = queue.changed();
    queue.parentDone();
    await ended;
    expect(queue.parentsDoneAt()).toBeTypeOf('number');
    await state.close();
  });
});
