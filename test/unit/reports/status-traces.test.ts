import { describe, expect, it } from 'vitest';
import { events } from '../../../connectors/events.js';
import { traces } from '../../../connectors/traces.js';
import { formatStatus } from '../../../src/reports/text.js';
import { buildStatus } from '../../../src/reports/status.js';
import type { StateDocument } from '../../../src/state/document.js';
import { DEFAULT_RATE_LIMITS } from '../../../src/http/scheduler/budget.js';

const warehouse = { destination: 'duckdb', location: 'w.duckdb', available: true, tables: {} };

describe('status: arrival delay, settle mark, per-event backlog', () => {
  it('shows p50/p99 of received_at − timestamp, the settle mark, and the traces backlog with its drain time', () => {
    const doc: StateDocument = {
      version: 1,
      projects: [],
      streams: {
        'events:default': {
          mark: '2026-01-01T12:00:00.000Z',
          settled: '2026-01-01T10:00:00.000Z',
          lateness: { at: '2026-01-01T12:00:00.000Z', records: 1200, p50Ms: 1500, p99Ms: 95_000, maxMs: 400_000 },
        },
      },
      sections: {
        server: { perParent: { traces: { byParent: true, learnedAt: '2026-01-01T00:00:00.000Z', evidence: 'x' } } },
        'children:traces': {
          default: { pending: Object.fromEntries(Array.from({ length: 800 }, (_, i) => [`e${i}`, i])), done: { z: 1 } },
        },
      },
    };
    const report = buildStatus('state.json', doc, [events, traces], warehouse, DEFAULT_RATE_LIMITS);
    const tr = report.resources.find((r) => r.resource === 'traces');
    expect(tr?.readBy).toBe('parent');
    expect(tr?.backlog).toMatchObject({
      total: 800,
      pending: { default: 800 },
      remembered: 1,
      etaSeconds: 120,
      ratePerMinute: 400,
    });
    const text = formatStatus(report).join('\n');
    expect(text).toContain('settled (re-read after enrichment) up to 2026-01-01T10:00:00.000Z');
    expect(text).toContain('p50 1.5s, p99 1m35s');
    expect(text).toContain('backlog 800 (default 800), drains in 2m00s at 400/min');
  });
});
