/**
 * The vendor's SDK (`@raindrop-ai/query`) as the emulator's contract: every one of its 16
 * operations, called by the SDK itself against the emulator on loopback, with no project, with a
 * project and with `*` where the service takes it, paging through every list. Each response must
 * pass the SDK's validation strictly (no value coerced, no field the SDK does not declare beyond
 * the spec's `project_id`, the field notes' `total_tokens` and the spec flavor's span `event_id`),
 * and hold exactly the records the emulator's ground truth says.
 */

import * as errors from '@raindrop-ai/query/models/errors';
import * as operations from '@raindrop-ai/query/models/operations';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type ApiRecord, type Emulator, type Flavor } from '../../emulator/index.js';
import { sdkOperations } from './sdk-params.js';
import { sdkClient, strictCall, type StrictClient } from './sdk-client.js';

const DAY = 86_400_000;
const SDK_HEADER = 'X-Raindrop-Project-Id';
/** Scopes: no project header (the service reads `default`), one project, all projects. */
const SCOPES = [undefined, 'alpha', '*'] as const;
type Scope = (typeof SCOPES)[number];
const TESTED = new Set<string>();

function projectsOf(scope: Scope): string[] {
  return scope === undefined ? ['default'] : scope === '*' ? ['default', 'alpha', 'beta'] : [scope];
}
function truth(em: Emulator, resource: string, scope: Scope): ApiRecord[] {
  return projectsOf(scope).flatMap((p) => em.snapshot(resource, p));
}
const key = (project: string | undefined, id: unknown): string => `${project ?? ''}|${String(id)}`;

for (const flavor of ['real', 'spec'] as const satisfies readonly Flavor[]) {
  describe(`the SDK against the emulator (${flavor} flavor)`, () => {
    let em: Emulator;
    let client: StrictClient;
    const base = new Set(['total_tokens']);
    if (flavor === 'spec') base.add('event_id');
    const allowed = (scope: Scope): ReadonlySet<string> => (scope === '*' ? new Set([...base, 'project_id']) : base);
    const opts = (scope: Scope): { projectId?: string } => (scope === undefined ? {} : { projectId: scope });
    const label = (op: string, scope: Scope): string => `${flavor} ${op} [${scope ?? 'no project'}]`;

    beforeAll(async () => {
      // The SDK sends X-Raindrop-Project-Id: the spec flavor is told to read it.
      em = await startEmulator({ flavor, eventsPerProject: 80, projectHeader: SDK_HEADER });
      // Fresh events: on the real flavor they are not enriched yet, so both shapes are checked.
      for (const project of ['default', 'alpha', 'beta']) em.addEvents(project, 10);
      client = sdkClient(em.url, em.apiKey);
    });
    afterAll(() => em.close());

    /** Pages through a list with the SDK; returns the rows' keys (from the raw body, with project_id on `*`). */
    async function walk(
      op: string,
      scope: Scope,
      schema: unknown,
      page: (
        cursor: string | undefined,
      ) => Promise<{ data: unknown[]; meta: { cursor: string | null; hasMore: boolean } }>,
    ): Promise<string[]> {
      const keys: string[] = [];
      let cursor: string | undefined;
      for (let pages = 0; ; pages++) {
        expect(pages, `${label(op, scope)}: the walk does not end`).toBeLessThan(1000);
        const result = await strictCall(client, label(op, scope), schema, allowed(scope), () => page(cursor));
        const raw = JSON.parse(client.exchanges.at(-1)!.body) as { data: Record<string, unknown>[] };
        for (const row of raw.data) {
          if (scope === '*') expect(row['project_id'], label(op, scope)).toBeTypeOf('string');
          keys.push(key(scope === '*' ? String(row['project_id']) : projectsOf(scope)[0], row['id']));
        }
        expect(result.data.length).toBe(raw.data.length);
        expect(result.meta.hasMore).toBe(result.meta.cursor !== null);
        if (!result.meta.hasMore) return keys;
        cursor = result.meta.cursor ?? undefined;
      }
    }
    const expectedKeys = (resource: string, scope: Scope, keep: (r: ApiRecord) => boolean = () => true): string[] =>
      truth(em, resource, scope)
        .filter(keep)
        .map((r) => key(String(r['project_id']), r['id']))
        .sort();

    for (const scope of SCOPES) {
      const where = scope ?? 'no project';

      it(`events: list, search, count, timeseries, facets [${where}]`, async () => {
        TESTED.add('events_list')
          .add('events_search')
          .add('events_count')
          .add('events_timeseries')
          .add('events_facets');
        const listed = await walk('events.list', scope, operations.EventsListResponse$inboundSchema, (cursor) =>
          client.sdk.events.list({ ...opts(scope), limit: 40, cursor }),
        );
        expect(listed.sort()).toEqual(expectedKeys('events', scope));
        expect(new Set(listed).size).toBe(listed.length);

        const now = Date.now();
        const since = new Date(now - 13 * DAY);
        const found = await walk('events.search', scope, operations.EventsSearchResponse$inboundSchema, (cursor) =>
          client.sdk.events.search({ ...opts(scope), query: 'the', timestampGte: since, limit: 25, cursor }),
        );
        expect(found.length).toBeGreaterThan(0);

        const total = truth(em, 'events', scope).length;
        const count = await strictCall(
          client,
          label('events.count', scope),
          operations.EventsCountResponse$inboundSchema,
          allowed(scope),
          (sdk) => sdk.events.count({ ...opts(scope) }),
        );
        expect(count.data.total).toBe(total);
        const users = await strictCall(
          client,
          label('events.count by user', scope),
          operations.EventsCountResponse$inboundSchema,
          allowed(scope),
          (sdk) => sdk.events.count({ ...opts(scope), countBy: 'user_id' }),
        );
        expect(users.data.total).toBe(
          new Set(truth(em, 'events', scope).map((e) => key(String(e['project_id']), e['user_id']))).size,
        );

        const series = await strictCall(
          client,
          label('events.timeseries', scope),
          operations.EventsTimeseriesResponse$inboundSchema,
          allowed(scope),
          (sdk) =>
            sdk.events.timeseries({ ...opts(scope), interval: 'week', timestamp: { gte: new Date(now - 60 * DAY) } }),
        );
        expect(series.data.total).toBe(total);
        expect(series.data.buckets.reduce((n, b) => n + b.count, 0)).toBe(total);
        expect(series.meta.interval).toBe('week');

        const facets = await strictCall(
          client,
          label('events.facets', scope),
          operations.EventsFacetsResponse$inboundSchema,
          allowed(scope),
          (sdk) =>
            sdk.events.facets({
              ...opts(scope),
              field: 'event_name',
              timestampGte: new Date(now - 60 * DAY),
              timestampLt: new Date(now + DAY),
            }),
        );
        expect(facets.data.reduce((n, f) => n + f.count, 0)).toBe(total);
        const bySignal = await strictCall(
          client,
          label('events.facets signal', scope),
          operations.EventsFacetsResponse$inboundSchema,
          allowed(scope),
          (sdk) => sdk.events.facets({ ...opts(scope), field: 'signal', countBy: 'convo_id', limit: 100 }),
        );
        expect(bySignal.data.length).toBeGreaterThan(0);
      });

      it(`users and conversations: list with the SDK's filters, and get [${where}]`, async () => {
        TESTED.add('users_list').add('users_get').add('conversations_list').add('conversations_get');
        const users = await walk('users.list', scope, operations.UsersListResponse$inboundSchema, (cursor) =>
          client.sdk.users.list({ ...opts(scope), limit: 30, cursor }),
        );
        expect(users.sort()).toEqual(expectedKeys('users', scope));
        const lastSeens = truth(em, 'users', scope)
          .map((u) => Date.parse(String(u['last_seen'])))
          .sort((a, b) => a - b);
        const mid = lastSeens[Math.floor(lastSeens.length / 2)]!;
        const recent = await walk('users.list last_seen', scope, operations.UsersListResponse$inboundSchema, (cursor) =>
          client.sdk.users.list({ ...opts(scope), limit: 30, cursor, lastSeen: { gte: new Date(mid) } }),
        );
        expect(recent.sort()).toEqual(expectedKeys('users', scope, (u) => Date.parse(String(u['last_seen'])) >= mid));

        const convos = await walk(
          'conversations.list',
          scope,
          operations.ConversationsListResponse$inboundSchema,
          (cursor) => client.sdk.conversations.list({ ...opts(scope), limit: 30, cursor }),
        );
        expect(convos.sort()).toEqual(expectedKeys('conversations', scope));
        const starts = truth(em, 'conversations', scope)
          .map((c) => Date.parse(String(c['started_at'])))
          .sort((a, b) => a - b);
        const from = starts[Math.floor(starts.length / 2)]!;
        const started = await walk(
          'conversations.list started_at',
          scope,
          operations.ConversationsListResponse$inboundSchema,
          (cursor) =>
            client.sdk.conversations.list({ ...opts(scope), limit: 30, cursor, startedAt: { gte: new Date(from) } }),
        );
        expect(started.sort()).toEqual(
          expectedKeys('conversations', scope, (c) => Date.parse(String(c['started_at'])) >= from),
        );

        if (scope === '*') return; // single-record gets refuse `*` (below)
        for (const user of em.snapshot('users', projectsOf(scope)[0]).slice(0, 5)) {
          const got = await strictCall(
            client,
            label('users.get', scope),
            operations.UsersGetResponse$inboundSchema,
            allowed(scope),
            (sdk) => sdk.users.get({ ...opts(scope), id: String(user['id']) }),
          );
          expect(got.data.id).toBe(user['id']);
          expect(got.data.eventCount).toBe(user['event_count']);
        }
        for (const convo of em.snapshot('conversations', projectsOf(scope)[0]).slice(0, 5)) {
          const got = await strictCall(
            client,
            label('conversations.get', scope),
            operations.ConversationsGetResponse$inboundSchema,
            allowed(scope),
            (sdk) => sdk.conversations.get({ ...opts(scope), id: String(convo['id']) }),
          );
          expect(got.data.id).toBe(convo['id']);
          expect(got.data.messageCount).toBe(convo['message_count']);
        }
      });

      if (scope === '*') {
        it("single-record gets, traces, signals and signal groups refuse * with the SDK's 400 error", async () => {
          // The SDK's 400 schema of traces has no `details` (it drops it); the others keep it.
          const refusals: [string, () => Promise<unknown>, new (...args: never[]) => Error][] = [
            ['events.get', () => client.sdk.events.get({ projectId: '*', id: 'x' }), errors.EventsGetBadRequestError],
            [
              'traces.list',
              () => client.sdk.traces.list({ projectId: '*', eventId: 'x' }),
              errors.TracesListBadRequestError,
            ],
            [
              'signalGroups.listSignals',
              () => client.sdk.signalGroups.listSignals({ projectId: '*', id: 'x' }),
              errors.SignalGroupsListSignalsBadRequestError,
            ],
            ['signals.list', () => client.sdk.signals.list({ projectId: '*' }), errors.SignalsListBadRequestError],
            [
              'signals.get',
              () => client.sdk.signals.get({ projectId: '*', id: 'x' }),
              errors.SignalsGetBadRequestError,
            ],
            [
              'signalGroups.list',
              () => client.sdk.signalGroups.list({ projectId: '*' }),
              errors.SignalGroupsListBadRequestError,
            ],
            [
              'signalGroups.get',
              () => client.sdk.signalGroups.get({ projectId: '*', id: 'x' }),
              errors.SignalGroupsGetBadRequestError,
            ],
            ['users.get', () => client.sdk.users.get({ projectId: '*', id: 'x' }), errors.UsersGetBadRequestError],
            [
              'conversations.get',
              () => client.sdk.conversations.get({ projectId: '*', id: 'x' }),
              errors.ConversationsGetBadRequestError,
            ],
          ];
          for (const [name, call, type] of refusals) {
            const error = await call().then(
              () => undefined,
              (e: unknown) => e,
            );
            expect(error, name).toBeInstanceOf(type);
            const body = JSON.parse(client.exchanges.at(-1)!.body) as {
              error: { code: string; details?: { field?: string } };
            };
            expect(body.error.code, name).toBe('all_projects_not_supported');
            expect(body.error.details?.field, name).toBe(SDK_HEADER);
            if (name !== 'traces.list')
              expect((error as { error: { details?: { field?: string } } }).error.details?.field, name).toBe(
                SDK_HEADER,
              );
          }
        });
        continue;
      }

      it(`events.get and traces.list (spans of each event) [${where}]`, async () => {
        TESTED.add('events_get').add('traces_list');
        const project = projectsOf(scope)[0]!;
        const events = em.snapshot('events', project);
        let spans = 0;
        for (const event of events) {
          const id = String(event['id']);
          const got = await strictCall(
            client,
            label('events.get', scope),
            operations.EventsGetResponse$inboundSchema,
            allowed(scope),
            (sdk) => sdk.events.get({ ...opts(scope), id }),
          );
          expect(got.data.id).toBe(id);
          expect(got.data.timestamp.toISOString()).toBe(event['timestamp']);
          const traces = await strictCall(
            client,
            label('traces.list', scope),
            operations.TracesListResponse$inboundSchema,
            allowed(scope),
            (sdk) => sdk.traces.list({ ...opts(scope), eventId: id }),
          );
          expect(JSON.parse(client.exchanges.at(-1)!.body)).not.toHaveProperty('meta');
          spans += traces.data.length;
        }
        expect(spans).toBe(em.snapshot('traces', project).length);
        expect(spans).toBeGreaterThan(0);
      });

      it(`signals, signal groups and the signals of each group [${where}]`, async () => {
        TESTED.add('signals_list')
          .add('signals_get')
          .add('signal_groups_list')
          .add('signal_groups_get')
          .add('signal_groups_list_signals');
        const project = projectsOf(scope)[0]!;
        const signals = await walk('signals.list', scope, operations.SignalsListResponse$inboundSchema, (cursor) =>
          client.sdk.signals.list({ ...opts(scope), limit: 3, cursor }),
        );
        expect(signals.sort()).toEqual(expectedKeys('signals', scope));
        for (const signal of em.snapshot('signals', project)) {
          const got = await strictCall(
            client,
            label('signals.get', scope),
            operations.SignalsGetResponse$inboundSchema,
            allowed(scope),
            (sdk) => sdk.signals.get({ ...opts(scope), id: String(signal['id']) }),
          );
          expect(got.data.sentiment).toBe(signal['sentiment']);
          expect(got.data.groupId).toBe(signal['group_id']);
        }
        const groups = await walk(
          'signalGroups.list',
          scope,
          operations.SignalGroupsListResponse$inboundSchema,
          (cursor) => client.sdk.signalGroups.list({ ...opts(scope), limit: 2, cursor }),
        );
        expect(groups.sort()).toEqual(expectedKeys('signal_groups', scope));
        for (const group of em.snapshot('signal_groups', project)) {
          const id = String(group['id']);
          const got = await strictCall(
            client,
            label('signalGroups.get', scope),
            operations.SignalGroupsGetResponse$inboundSchema,
            allowed(scope),
            (sdk) => sdk.signalGroups.get({ ...opts(scope), id }),
          );
          expect(got.data.signalCount).toBe(group['signal_count']);
          const members = await walk(
            'signalGroups.listSignals',
            scope,
            operations.SignalGroupsListSignalsResponse$inboundSchema,
            (cursor) => client.sdk.signalGroups.listSignals({ ...opts(scope), id, limit: 2, cursor }),
          );
          expect(members.sort()).toEqual(expectedKeys('signals', scope, (s) => s['group_id'] === id));
        }
      });
    }

    it("errors parse as the SDK's typed 400, 401 and 403 errors", async () => {
      const unauthorized = await sdkClient(em.url, 'qs_org_wrong')
        .sdk.events.list()
        .catch((e: unknown) => e);
      expect(unauthorized).toBeInstanceOf(errors.EventsListUnauthorizedError);
      const forbidden = await client.sdk.users.list({ projectId: 'legacy' }).catch((e: unknown) => e);
      expect(forbidden).toBeInstanceOf(errors.UsersListForbiddenError);
      const bad = await client.sdk.events
        .search({ query: 'a', timestampGte: new Date(Date.now() - 30 * DAY) })
        .catch((e: unknown) => e);
      expect(bad).toBeInstanceOf(errors.EventsSearchBadRequestError);
      expect((bad as errors.EventsSearchBadRequestError).error.details?.field).toBe('timestamp[gte]');
    });
  });
}

describe('the contract suite', () => {
  it('called every operation the SDK has', () => {
    const all = sdkOperations()
      .map((op) => op.operationId)
      .sort();
    expect(all).toHaveLength(16);
    expect([...TESTED].sort()).toEqual(all);
  });

  it('fails on a response the SDK would only accept by coercion, or with an undeclared field', async () => {
    const reply =
      (body: unknown): (() => Promise<Response>) =>
      async () =>
        new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } });
    const signal = {
      id: 's',
      type: 'topic',
      name: 'n',
      description: null,
      created_at: '2026-01-01T00:00:00Z',
      group_id: null,
      group_name: null,
      sentiment: 'NEUTRAL',
    };
    const call = (body: unknown, allowed: ReadonlySet<string> = new Set()): Promise<unknown> => {
      const client = sdkClient('http://127.0.0.1:9', 'k', reply(body));
      return strictCall(client, 'signals.get', operations.SignalsGetResponse$inboundSchema, allowed, (sdk) =>
        sdk.signals.get({ id: 's' }),
      );
    };
    await expect(call({ data: signal })).resolves.toBeDefined();
    const { sentiment: _missing, ...withoutSentiment } = signal;
    await expect(call({ data: withoutSentiment })).rejects.toThrow(/coercing|validation failed/);
    await expect(call({ data: { ...signal, name: 42 } })).rejects.toThrow(/coercing/);
    await expect(call({ data: { ...signal, description: undefined } })).rejects.toThrow(/coercing|validation failed/);
    await expect(call({ data: { ...signal, sentiment: 'meh' } })).rejects.toThrow(/coercing|validation failed/);
    await expect(call({ data: { ...signal, extra: 1 } })).rejects.toThrow(/\$\.data\.extra/);
    await expect(call({ data: { ...signal, extra: 1 } }, new Set(['extra']))).resolves.toBeDefined();
    await expect(call({ data: 'not an object' })).rejects.toThrow();
  });
});
