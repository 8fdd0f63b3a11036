import { describe, expect, it } from 'vitest';
import { events } from '../../../../connectors/events.js';
import { traces } from '../../../../connectors/traces.js';
import { formatStatus } from '../../../../src/reports/text.js';
import { DEFAULT_RATE_LIMITS } from '../../../../src/http/scheduler/budget.js';
import {
  addToLoad,
  traceLoad,
  traceLoadSection,
  deficitLine,
  KEEP_DAYS,
  tracedSavingLine,
} from '../../../../src/sync/traces/load.js';
import { buildStatus } from '../../../../src/reports/status.js';
import type { StateDocument } from '../../../../src/state/document.js';

const NOW = Date.parse('2026-03-10T12:00:00.000Z');
const DAY = 86_400_000;
const warehouse = { destination: 'duckdb', location: 'w.duckdb', available: true, tables: {} };

function docWith(load: unknown): StateDocument {
  return {
    version: 1,
    projects: [],
    streams: {},
    sections: {
      server: { perParent: { traces: { byParent: true, learnedAt: '2026-01-01T00:00:00.000Z', evidence: 'x' } } },
      'children:traces': { default: { pending: { a: NOW }, done: {} } },
      [traceLoadSection(traces)]: load,
    },
  };
}

describe('can per-event reads keep up with the events a day', () => {
  it('counts queued parents per day of their own time and keeps the last days only', () => {
    const ats = [NOW - 20 * DAY, NOW - 2 * DAY, NOW - 2 * DAY + 1000, NOW - DAY, NOW];
    const load = addToLoad(undefined, ats, [NOW - DAY], NOW);
    expect(load.queued).toEqual({ '2026-03-08': 2, '2026-03-09': 1, '2026-03-10': 1 });
    expect(load.shown).toEqual({ '2026-03-09': 1 });
    // Days before the last KEEP_DAYS are dropped as the counts are updated.
    expect(Object.keys(addToLoad(load, [NOW + KEEP_DAYS * DAY], [], NOW + KEEP_DAYS * DAY).queued)).toEqual([
      '2026-03-10',
      '2026-03-18',
    ]);
  });

  it('1,000,000 events a day at 400 a minute: status, plan and the summary say the backlog grows by 424,000 a day', () => {
    const doc = docWith({
      queued: { '2026-03-08': 900_000, '2026-03-09': 1_000_000, '2026-03-10': 300_000 },
      shown: { '2026-03-09': 250_000 },
    });
    const load = traceLoad(doc, traces, DEFAULT_RATE_LIMITS, NOW);
    expect(load).toEqual({
      perDay: 1_000_000,
      partialDay: false,
      capacityPerDay: 576_000,
      deficitPerDay: 424_000,
      shownPerDay: 250_000,
    });
    const line = deficitLine(traces, load, DEFAULT_RATE_LIMITS) ?? '';
    expect(line).toContain('1,000,000 events a day need one request each');
    expect(line).toContain('allows 576,000 a day (400/min): the backlog grows by 424,000 a day');
    expect(tracedSavingLine(traces, load)).toContain('25 % of events (those whose');
    expect(tracedSavingLine(traces, load)).toContain('750,000 fewer requests a day of 1,000,000');
    const report = buildStatus('state.json', doc, [events, traces], warehouse, DEFAULT_RATE_LIMITS, NOW);
    expect(report.resources.find((r) => r.resource === 'traces')?.backlog?.deficit).toBe(line);
    expect(formatStatus(report).join('\n')).toContain(`WARNING: ${line}`);
  });

  it('says nothing where the limit keeps up, and uses today so far when no full day is known', () => {
    const within = docWith({ queued: { '2026-03-09': 500_000 }, shown: {} });
    expect(
      deficitLine(traces, traceLoad(within, traces, DEFAULT_RATE_LIMITS, NOW), DEFAULT_RATE_LIMITS),
    ).toBeUndefined();
    const today = docWith({ queued: { '2026-03-10': 600_000 }, shown: {} });
    expect(traceLoad(today, traces, DEFAULT_RATE_LIMITS, NOW)).toMatchObject({
      perDay: 600_000,
      partialDay: true,
      deficitPerDay: 24_000,
    });
    expect(traceLoad(docWith(undefined), traces, DEFAULT_RATE_LIMITS, NOW)).toBeUndefined();
  });
});
