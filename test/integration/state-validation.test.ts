import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RESOURCE_NAMES } from '../../connectors/index.js';
import { systemClock } from '../../src/core/clock.js';
import { StateError } from '../../src/core/errors.js';
import { StateStore } from '../../src/state/store.js';
import { STATE_VERSION } from '../../src/state/validate.js';
import { runCli } from '../fakes/cli.js';
import { dir } from '../fakes/lifecycle.js';

const GOOD_RUN = { at: '2026-11-01T00:00:00.000Z', outcome: 'ok', rows: 1, pages: 1, requests: 1, seconds: 0.5 };

/** A state document with one stream changed by `edit`. */
function stateWith(edit: (doc: Record<string, unknown>) => void): Record<string, unknown> {
  const doc: Record<string, unknown> = {
    version: 1,
    streams: { 'events:default': { mark: '2026-11-01T00:00:00.000Z', lastRun: GOOD_RUN } },
    projects: ['alpha'],
    sections: {},
  };
  edit(doc);
  return doc;
}
const events = (doc: Record<string, unknown>): Record<string, unknown> =>
  (doc.streams as Record<string, Record<string, unknown>>)['events:default'] as Record<string, unknown>;

const cases: Array<[string, Record<string, unknown>, RegExp]> = [
  [
    'a mark that is not an instant',
    stateWith((d) => (events(d).mark = 'yesterday')),
    /stream "events:default", field "mark": expected an ISO-8601 instant.*got "yesterday"/,
  ],
  [
    'a checkpoint cursor of the wrong type',
    stateWith((d) => (events(d).pending = { from: '2026-11-01T00:00:00Z', to: '2026-11-02T00:00:00Z', cursor: 42 })),
    /stream "events:default", field "pending": field "cursor": expected a non-empty cursor string, got 42/,
  ],
  [
    'a checkpoint window that ends before it starts',
    stateWith((d) => (events(d).pending = { from: '2026-11-02T00:00:00Z', to: '2026-11-01T00:00:00Z' })),
    /field "pending": expected "from" before "to"/,
  ],
  [
    'a lastRun count that is not a number',
    stateWith((d) => (events(d).lastRun = { ...GOOD_RUN, rows: 'many' })),
    /stream "events:default", field "lastRun": field "rows": expected a whole number/,
  ],
  [
    '"streams" as an array (a silent full re-sync before)',
    stateWith((d) => (d.streams = [{ mark: '2026-11-01T00:00:00Z' }])),
    /field "streams": expected an object keyed by "<resource>:<scope>"/,
  ],
  [
    'a stream of an unknown resource',
    stateWith((d) => ((d.streams as Record<string, unknown>)['evnts:default'] = {})),
    /stream "evnts:default": unknown resource "evnts"/,
  ],
  // lastRun is one shape (state/document.ts): a backfill's is checked as a sync's, its counts too.
  [
    'a backfill lastRun page count that is not a number',
    stateWith(
      (d) =>
        (d.sections = {
          backfills: {
            version: 1,
            streams: {
              'events:*': {
                requested: [],
                done: [],
                running: [],
                lastRun: { ...GOOD_RUN, windows: 2, skipped: 0, pages: -1 },
              },
            },
          },
        }),
    ),
    /backfill ledger stream "events:\*", field "lastRun": field "pages": expected a whole number/,
  ],
  [
    'a ledger window of the wrong shape',
    stateWith(
      (d) =>
        (d.sections = {
          backfills: {
            version: 1,
            streams: {
              'events:*': {
                requested: [],
                done: [{ from: '2026-11-01T00:00:00Z', to: 'soon', at: '2026-11-01T00:00:00Z' }],
                running: [],
              },
            },
          },
        }),
    ),
    /backfill ledger stream "events:\*", field "done": entry 0: field "to": expected an ISO-8601 instant/,
  ],
  [
    'a settle mark that is not an instant',
    stateWith((d) => (events(d).settled = 'later')),
    /stream "events:default", field "settled": expected an ISO-8601 instant/,
  ],
  [
    'an arrival delay that is not a number',
    stateWith(
      (d) => (events(d).lateness = { at: '2026-11-01T00:00:00Z', records: 3, p50Ms: 'fast', p99Ms: 1, maxMs: 1 }),
    ),
    /field "lateness": field "p50Ms": expected a whole number/,
  ],
  [
    'a traces backlog entry without its time',
    stateWith((d) => (d.sections = { 'children:traces': { default: { pending: { e1: 'soon' }, done: {} } } })),
    /section "children:traces", project "default", field "pending": "e1": expected an epoch in milliseconds/,
  ],
  [
    'a learned server fact that is not a boolean',
    stateWith((d) => (d.sections = { server: { perParent: { traces: { byParent: 'yes' } } } })),
    /section "server", field "perParent": "traces", field "byParent": expected true or false/,
  ],
  [
    'a split walk whose sub-window has no end',
    stateWith(
      (d) =>
        (events(d).split = {
          from: '2026-11-01T00:00:00Z',
          to: '2026-11-02T00:00:00Z',
          parts: [{ from: '2026-11-01T00:00:00Z' }],
        }),
    ),
    /stream "events:default", field "split": field "parts": entry 0: field "to": expected it to be present/,
  ],
  [
    'a saved search mark that is not an instant',
    stateWith((d) => (d.sections = { searches: { 'errors|alpha': { mark: 'now', definition: '{}' } } })),
    /section "searches", search "errors\|alpha", field "mark": expected an ISO-8601 instant/,
  ],
  [
    'an aggregates as-of that is not an instant',
    stateWith((d) => (d.sections = { aggregates: { alpha: 12 } })),
    /section "aggregates", project "alpha": expected an ISO-8601 instant/,
  ],
  [
    'a file from a newer format',
    stateWith((d) => (d.version = STATE_VERSION + 1)),
    /field "version": the file is format 2, written by a newer query-sync/,
  ],
];

describe('the state file is validated on read: a bad entry is a clear state error and nothing is rewritten', () => {
  for (const [name, doc, message] of cases) {
    it(name, async () => {
      const path = join(dir(), 'state.json');
      const text = `${JSON.stringify(doc, null, 2)}\n`;
      writeFileSync(path, text);
      const opening = StateStore.open(path, { clock: systemClock, purpose: 'sync', resources: RESOURCE_NAMES });
      await expect(opening).rejects.toBeInstanceOf(StateError);
      await expect(StateStore.read(path, { resources: RESOURCE_NAMES })).rejects.toThrow(message);
      expect(readFileSync(path, 'utf8')).toBe(text);
    });
  }

  it('the CLI exits 4 naming the stream and field, before touching the API or the warehouse', async () => {
    const d = dir();
    const statePath = join(d, 'state.json');
    const text = JSON.stringify(stateWith((doc) => (events(doc).mark = 'yesterday')));
    writeFileSync(statePath, text);
    const duckdbPath = join(d, 'w.duckdb');
    // Nothing listens on port 9: a request would fail with a connection error, not a state error.
    const run = await runCli({ url: 'http://127.0.0.1:9', apiKey: 'k' }, [
      'sync',
      '--state',
      statePath,
      '--duckdb-path',
      duckdbPath,
      '--log-format',
      'json',
    ]);
    expect(run.code).toBe(4);
    expect(run.stdout).toMatch(
      /sync FAILED: state file .*state\.json: stream "events:default", field "mark": expected an ISO-8601 instant.*"yesterday"\. Nothing was changed/,
    );
    expect(readFileSync(statePath, 'utf8')).toBe(text);
    expect(existsSync(duckdbPath)).toBe(false);
    const status = await runCli({ url: 'http://127.0.0.1:9', apiKey: 'k' }, [
      'status',
      '--state',
      statePath,
      '--duckdb-path',
      duckdbPath,
    ]);
    expect(status.code).toBe(4);
    expect(status.stdout).toMatch(/field "mark"/);
  });

  it('a valid file with fields this version does not know keeps them through a write', async () => {
    const path = join(dir(), 'state.json');
    writeFileSync(
      path,
      JSON.stringify(stateWith((d) => (events(d).someFutureField = { until: '2026-11-01T00:00:00Z' }))),
    );
    const store = await StateStore.open(path, { clock: systemClock, purpose: 'sync', resources: RESOURCE_NAMES });
    await store.updateStream('events:default', (s) => ({ ...s, mark: '2026-11-02T00:00:00.000Z' }));
    await store.close();
    const doc = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
    expect(events(doc)).toMatchObject({
      mark: '2026-11-02T00:00:00.000Z',
      someFutureField: { until: '2026-11-01T00:00:00Z' },
    });
    expect(doc.version).toBe(STATE_VERSION);
  });
});
