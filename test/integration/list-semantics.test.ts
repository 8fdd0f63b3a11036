import { describe, expect, it } from 'vitest';
import { conversations } from '../../connectors/conversations.js';
import { events } from '../../connectors/events.js';
import { RESOURCES } from '../../connectors/index.js';
import { signals } from '../../connectors/signals.js';
import { users } from '../../connectors/users.js';
import type { Emulator, EmulatorOptions, RequestInfo } from '../../emulator/index.js';
import type { ResourceDefinition } from '../../src/core/types.js';
import { cursorMillis } from '../../src/normalize/normalize.js';
import { listFacts } from '../../src/sync/list-facts.js';
import type { RunSummary } from '../../src/sync/engine.js';
import { StateStore } from '../../src/state/store.js';
import { silentLogger } from '../../src/core/log.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { recordRun, RUNS_TABLE } from '../../src/analysts/run-history.js';
import { dbPathOf, expectTableMatches, readTable, statePathOf, syncOnce, type HarnessRun } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

/**
 * Lists on servers that differ from our emulator only in ways the SDK allows (docs/list-semantics.md):
 * each variant is played by the emulator's `lists` quirks, and a default sync and a second one
 * leave every table exact (or the run fails naming what could not be made exact).
 */

const okOf = (run: RunSummary): string =>
  JSON.stringify(run.streams.filter((s) => s.outcome !== 'ok').map((s) => [s.resource, s.scope, s.error?.message]));

/** Each table equals the API's records up to the last run's start. */
async function expectExact(
  d: string,
  emu: Emulator,
  last: RunSummary,
  resources: readonly ResourceDefinition[],
  project?: string,
): Promise<void> {
  const cutoff = Date.parse(last.startedAt);
  for (const resource of resources) {
    const truth = emu
      .snapshot(resource.name, project)
      .filter((r) => resource.cursorField === undefined || (cursorMillis(resource, r) ?? 0) < cutoff);
    expectTableMatches(await readTable(d, resource.name), truth, resource.key, resource.name);
  }
}

async function twoSyncs(
  emu: Emulator,
  run: Omit<HarnessRun, 'baseUrl' | 'apiKey' | 'dir'>,
  between?: () => void,
): Promise<{ d: string; first: RunSummary; second: RunSummary }> {
  const d = dir();
  const target = { baseUrl: emu.url, apiKey: emu.apiKey, dir: d, ...run };
  const first = await syncOnce(target);
  expect(first.ok, okOf(first)).toBe(true);
  between?.();
  const second = await syncOnce(target);
  expect(second.ok, okOf(second)).toBe(true);
  return { d, first, second };
}

function requestLog(): {
  readonly onRequest: (info: RequestInfo) => void;
  readonly of: (path: string) => URLSearchParams[];
} {
  const seen: RequestInfo[] = [];
  return {
    onRequest: (info) => seen.push(info),
    of: (path) => seen.filter((r) => r.path === path).map((r) => r.query),
  };
}

describe('lists: order_by sent, order learned from records', () => {
  it('every list sends the SDK order_by (conversations included, which sent none)', async () => {
    const log = requestLog();
    const emu = await emulator({ seed: 41, eventsPerProject: 60, onRequest: log.onRequest });
    await twoSyncs(emu, { project: 'alpha', resources: [conversations, users, signals] });
    for (const path of ['/v1/conversations', '/v1/users', '/v1/signals']) {
      const sent = log.of(path);
      expect(sent.length, path).toBeGreaterThan(0);
      expect(
        sent.every((q) => q.get('order_by') === '-timestamp'),
        path,
      ).toBe(true);
    }
  });

  it('conversations served by started_at: never stopped early on an unproven order, the new message of an old conversation is read, the order kept in state', async () => {
    // One conversation a page: a walk that trusted the order it had seen would stop at the first
    // page older than the window, before the older conversations that got a new message.
    const quirks: EmulatorOptions['lists'] = { conversationsByStartedAt: true, pageCap: 1 };
    const emu = await emulator({
      seed: 2,
      eventsPerProject: 300,
      historyDays: 1,
      projects: ['default'],
      lists: quirks,
    });
    const { d, second } = await twoSyncs(emu, { resources: [events, conversations] }, () => {
      emu.addEvents('default', 3);
    });
    await expectExact(d, emu, second, [conversations]);
    expect(listFacts(await StateStore.read(statePathOf(d))).conversations?.order).toBe('-started_at');
  });

  it('on a server that lists conversations by last message, the order is proven once, kept, and the next run stops early', async () => {
    const log = requestLog();
    const emu = await emulator({
      seed: 44,
      eventsPerProject: 300,
      historyDays: 1,
      projects: ['default'],
      lists: { pageCap: 5 },
      onRequest: log.onRequest,
    });
    const { d, first, second } = await twoSyncs(emu, { resources: [events, conversations] }, () => {
      emu.addEvents('default', 3);
    });
    await expectExact(d, emu, second, [conversations]);
    expect(listFacts(await StateStore.read(statePathOf(d))).conversations?.order).toBe('-last_message_at');
    const pagesOf = (run: RunSummary): number => run.streams.find((s) => s.resource === 'conversations')?.pages ?? 0;
    expect(pagesOf(second)).toBeLessThan(pagesOf(first) / 2);
  });

  it('a server that ignores order_by leaves every table exact', async () => {
    const emu = await emulator({ seed: 45, eventsPerProject: 200, lists: { ignoreOrderBy: true, pageCap: 20 } });
    const { d, second } = await twoSyncs(emu, { project: 'alpha' }, () => {
      emu.addEvents('alpha', 20);
    });
    await expectExact(
      d,
      emu,
      second,
      RESOURCES.filter((r) => r.name !== 'traces'),
      'alpha',
    );
  });
});

describe('lists: page caps are learned and asked for', () => {
  for (const cap of [50, 200]) {
    it(`a silent cap of ${cap}: every table exact, the cap kept in state, later pages ask for it`, async () => {
      const log = requestLog();
      // 400 events a project (was 900): alpha's ~450 spans still fill a 200-span page, its events a 50-row one.
      const emu = await emulator({
        seed: 47,
        eventsPerProject: 400,
        lists: { pageCap: cap },
        onRequest: log.onRequest,
      });
      const { d, second } = await twoSyncs(emu, { project: 'alpha' }, () => {
        emu.addEvents('alpha', 30);
      });
      await expectExact(d, emu, second, RESOURCES, 'alpha');
      // Lists ask for 100 and spans by time for 1000: a cap below that is learned; above it, nothing is.
      const facts = listFacts(await StateStore.read(statePathOf(d)));
      expect(facts.traces?.pageCap).toBe(cap);
      if (cap < 100) {
        expect(facts.events?.pageCap).toBe(cap);
        expect(second.streams.find((s) => s.resource === 'events')?.lists?.pageCap ?? cap).toBe(cap);
        expect(log.of('/v1/events').at(-1)?.get('limit')).toBe(String(cap));
      } else {
        expect(facts.events?.pageCap).toBeUndefined();
      }
    });
  }
});

describe('lists: offset cursors', () => {
  it('rows that move during a walk shift the offset pages: the anchored walk skips none', async () => {
    let usersPages = 0;
    let emu: Emulator | undefined;
    const onRequest = (info: RequestInfo): void => {
      // While the first sync walks users (two a page), two are seen again: they move to the head,
      // out of the walk's window, and every row after a user already read shifts up one place.
      if (info.path === '/v1/users' && ++usersPages === 5) emu?.addEvents('alpha', 2, {});
    };
    emu = await emulator({
      seed: 49,
      eventsPerProject: 400,
      projects: ['alpha'],
      lists: { offsetCursors: true, pageCap: 2 },
      onRequest,
    });
    const { d, second } = await twoSyncs(emu, { project: 'alpha', resources: [events, users] });
    await expectExact(d, emu, second, [users, events], 'alpha');
    expect(listFacts(await StateStore.read(statePathOf(d))).users?.cursor).toBe('offset');
  });
});

describe('lists: scope', () => {
  it('a server that ignores project_ids: rows of projects not asked for are dropped, counted in the summary and _query_sync_runs', async () => {
    const emu = await emulator({ seed: 51, eventsPerProject: 80, lists: { ignoreProjectIds: true } });
    const { d, first, second } = await twoSyncs(emu, {
      project: '*',
      projectIds: ['alpha'],
      resources: [events, users, conversations],
    });
    for (const table of ['events', 'users', 'conversations']) {
      const projects = new Set((await readTable(d, table)).map((r) => r.project_id));
      expect([...projects], table).toEqual(['alpha']);
    }
    await expectExact(d, emu, second, [events, users, conversations], 'alpha');
    const dropped = first.streams.find((s) => s.resource === 'events')?.lists;
    expect(dropped?.foreignRowsDropped ?? 0).toBeGreaterThan(0);
    expect(dropped?.foreignProjects).toEqual(['beta', 'default']);
    // The run's row says so too (as the CLI records it after the run).
    const db = await DuckDbDestination.open(dbPathOf(d));
    try {
      await recordRun(
        db,
        {
          command: 'sync',
          startedAt: first.startedAt,
          endedAt: second.startedAt,
          streams: first.streams,
          settings: {},
          secrets: [],
        },
        [],
        silentLogger(),
        'list-semantics-run',
      );
    } finally {
      await db.close();
    }
    const [row] = await readTable(d, RUNS_TABLE);
    const streams = JSON.parse(String(row?.streams)) as { resource: string; lists?: { foreignRowsDropped?: number } }[];
    expect(streams.find((s) => s.resource === 'events')?.lists?.foreignRowsDropped).toBe(dropped?.foreignRowsDropped);
  });
});

describe('free text', () => {
  it('a first value that looks like an instant does not make user_input or assistant_output a TIMESTAMP', async () => {
    const emu = await emulator({ seed: 53, eventsPerProject: 120, lists: { instantTexts: true } });
    const { d, second } = await twoSyncs(emu, { project: 'alpha', resources: [events] }, () => {
      emu.addEvents('alpha', 5);
    });
    const rows = await readTable(d, 'events');
    expect(Object.keys(rows[0] ?? {}).filter((c) => c.includes('__v_'))).toEqual([]);
    expect(rows.some((r) => typeof r.user_input === 'string' && /^\d{4}-\d\d-\d\dT/.test(r.user_input))).toBe(true);
    expect(rows.some((r) => typeof r.user_input === 'string' && !/^\d{4}-\d\d-\d\dT/.test(r.user_input))).toBe(true);
    await expectExact(d, emu, second, [events], 'alpha');
  });
});

describe('identical requests', () => {
  it('are sent once per run (split planning asks the same timeseries for events, users and conversations)', async () => {
    const seen: RequestInfo[] = [];
    const emu = await emulator({ seed: 55, eventsPerProject: 300, onRequest: (r) => seen.push(r) });
    let firstRun = 0;
    await twoSyncs(emu, { project: '*' }, () => {
      firstRun = seen.length;
    });
    // A request is its project (the header) and its query. The reconcile after each run asks each
    // project's hours of the last two days: the same request in both runs (the hours are aligned),
    // once in each.
    const sent = (runs: readonly RequestInfo[]): string[] =>
      runs
        .filter((r) => r.path === '/v1/events/timeseries')
        .map((r) => `${String(r.headers['x-service-project-id'])} ${r.query.toString()}`);
    for (const run of [seen.slice(0, firstRun), seen.slice(firstRun)]) {
      expect(sent(run).length).toBeGreaterThan(0);
      // Each distinct request once in a run.
      const counts = new Map<string, number>();
      for (const q of sent(run)) counts.set(q, (counts.get(q) ?? 0) + 1);
      expect(Math.max(...counts.values())).toBe(1);
    }
    // The walks' requests (all projects at once) once over both runs: the second run's windows end at its own start.
    const walks = sent(seen).filter((q) => q.startsWith('* '));
    expect(walks.length).toBeGreaterThan(0);
    expect(new Set(walks).size).toBe(walks.length);
  });
});
