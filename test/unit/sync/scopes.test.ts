import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { conversations } from '../../../connectors/conversations.js';
import { events } from '../../../connectors/events.js';
import { signals } from '../../../connectors/signals.js';
import { traces } from '../../../connectors/traces.js';
import { users } from '../../../connectors/users.js';
import { systemClock } from '../../../src/core/clock.js';
import type { ConfigError } from '../../../src/core/errors.js';
import { silentLogger } from '../../../src/core/log.js';
import type { ProjectScope, ResourceDefinition } from '../../../src/core/types.js';
import {
  allProjectsScope,
  forEachScope,
  initialScopes,
  singleProjectScope,
  type ScopeHooks,
} from '../../../src/sync/scopes.js';
import { StateStore } from '../../../src/state/store.js';
import type { StateDocument } from '../../../src/state/document.js';

/** Project discovery (`src/sync/scopes.ts`): which (resource, project scope) walks a run starts. */

interface Result {
  readonly outcome: 'ok' | 'scope-rejected' | 'no-projects';
  readonly id: string;
  readonly error?: ConfigError;
}

function state(projects: readonly string[] = []): StateStore {
  const doc = { version: 1, streams: {}, projects: [...projects], sections: {} } as StateDocument;
  return StateStore.memory(doc, systemClock);
}

/** A walk that records what it was started with and answers as `answer` says (default: ok). */
function recorder(
  answer: (
    resource: ResourceDefinition,
    scope: ProjectScope,
    hooks: ScopeHooks,
  ) => Promise<Result['outcome']> | Result['outcome'] = () => 'ok',
) {
  const calls: Array<{ id: string; scope: ProjectScope; hooks: ScopeHooks }> = [];
  const walk = async (resource: ResourceDefinition, scope: ProjectScope, hooks: ScopeHooks): Promise<Result> => {
    const id = `${resource.name}:${scope.key}`;
    calls.push({ id, scope, hooks });
    return { outcome: await answer(resource, scope, hooks), id };
  };
  const noProjects = (resource: ResourceDefinition, error: ConfigError): Result => ({
    outcome: 'no-projects',
    id: `${resource.name}:-`,
    error,
  });
  return { calls, walk, noProjects, ids: () => calls.map((c) => c.id).sort() };
}

describe('scopes of one project', () => {
  it('a slug is the header, the state key and the fallback project_id; no slug sends no header and reads "default"', () => {
    expect(singleProjectScope('alpha')).toEqual({ key: 'alpha', header: 'alpha', fallbackProjectId: 'alpha' });
    expect(singleProjectScope(undefined)).toEqual({ key: 'default', header: undefined, fallbackProjectId: 'default' });
  });

  it('all projects: "*", narrowed by a sorted --project-ids list that becomes part of the key', () => {
    expect(allProjectsScope(undefined)).toEqual({
      key: '*',
      header: '*',
      projectIds: undefined,
      fallbackProjectId: undefined,
    });
    expect(allProjectsScope([])).toEqual({
      key: '*',
      header: '*',
      projectIds: undefined,
      fallbackProjectId: undefined,
    });
    expect(allProjectsScope(['beta', 'alpha'])).toEqual({
      key: '*[alpha,beta]',
      header: '*',
      projectIds: ['alpha', 'beta'],
      fallbackProjectId: undefined,
    });
  });

  it('without "*" every resource is walked once in that project, whatever it declares, and state is not touched', async () => {
    const r = recorder();
    const s = state();
    const results = await forEachScope(
      { resources: [events, traces, users], project: 'alpha' },
      { state: s, logger: silentLogger() },
      r.walk,
      r.noProjects,
    );
    expect(r.ids()).toEqual(['events:alpha', 'traces:alpha', 'users:alpha']);
    expect(results.map((x) => x.id).sort()).toEqual(['events:alpha', 'traces:alpha', 'users:alpha']);
    expect(r.calls.every((c) => c.hooks.onProjects === undefined)).toBe(true);
    expect(s.document.projects).toEqual([]);
  });
});

describe('"*": one all-projects walk where the endpoint takes it, one walk per project elsewhere', () => {
  it('--project-ids: the narrowed "*" walk plus one per listed project; slugs seen in rows start nothing; the list is kept in state', async () => {
    const r = recorder((_resource, _scope, hooks) => {
      hooks.onProjects?.(new Set(['gamma'])); // ignored: the list was given
      return 'ok';
    });
    const s = state();
    const results = await forEachScope(
      { resources: [events, traces], project: '*', projectIds: ['beta', 'alpha'] },
      { state: s, logger: silentLogger() },
      r.walk,
      r.noProjects,
    );
    expect(r.ids()).toEqual(['events:*[alpha,beta]', 'traces:alpha', 'traces:beta']);
    expect(results).toHaveLength(3);
    expect(r.calls.find((c) => c.id === 'events:*[alpha,beta]')?.scope.projectIds).toEqual(['alpha', 'beta']);
    expect(s.document.projects).toEqual(['alpha', 'beta']);
  });

  it('the projects in state start per-project walks at once; a slug discovered by a "*" walk starts them too, once, and is stored', async () => {
    let release!: () => void;
    const eventsDone = new Promise<void>((resolve) => (release = resolve));
    const r = recorder(async (resource, _scope, hooks): Promise<Result['outcome']> => {
      if (resource.name === 'events') {
        hooks.onProjects?.(new Set(['alpha', 'gamma']));
        hooks.onProjects?.(new Set(['gamma'])); // seen again: no second walk
        await eventsDone;
      }
      if (resource.name === 'users') {
        hooks.onProjects?.(new Set(['gamma', 'delta']));
        release();
      }
      return 'ok';
    });
    const s = state(['alpha']);
    const results = await forEachScope(
      { resources: [events, users, traces, signals], project: '*' },
      { state: s, logger: silentLogger() },
      r.walk,
      r.noProjects,
    );
    expect(r.ids()).toEqual([
      'events:*',
      'signals:alpha',
      'signals:delta',
      'signals:gamma',
      'traces:alpha',
      'traces:delta',
      'traces:gamma',
      'users:*',
    ]);
    // Every walk started, including those discovered while others ran, is waited for and reported.
    expect(results.map((x) => x.id).sort()).toEqual(r.ids());
    expect(s.document.projects).toEqual(['alpha', 'delta', 'gamma']);
  });

  it('no project known and none discovered: the per-project resources report a ConfigError naming --project-ids; nothing is walked for them', async () => {
    const r = recorder();
    const results = await forEachScope(
      { resources: [events, traces, signals], project: '*' },
      { state: state(), logger: silentLogger() },
      r.walk,
      r.noProjects,
    );
    expect(r.ids()).toEqual(['events:*']);
    const failed = results.filter((x) => x.outcome === 'no-projects');
    expect(failed.map((x) => x.id).sort()).toEqual(['signals:-', 'traces:-']);
    for (const f of failed) {
      expect(f.error?.message).toMatch(
        /does not accept the all-projects scope "\*", and no project slugs are known yet .*pass --project-ids a,b/,
      );
    }
  });

  it('an endpoint declared to take "*" that refuses it (400) is read one project at a time, with a warning; the refused result is dropped', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino(
      { level: 'warn' },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
          done();
        },
      }),
    );
    const r = recorder((resource, scope) =>
      resource.name === 'conversations' && scope.key === '*' ? 'scope-rejected' : 'ok',
    );
    const results = await forEachScope(
      { resources: [conversations, events], project: '*' },
      { state: state(['alpha', 'beta']), logger },
      r.walk,
      r.noProjects,
    );
    expect(r.ids()).toEqual(['conversations:*', 'conversations:alpha', 'conversations:beta', 'events:*']);
    expect(results.map((x) => x.id).sort()).toEqual(['conversations:alpha', 'conversations:beta', 'events:*']);
    expect(results.every((x) => x.outcome === 'ok')).toBe(true);
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.map((l) => [l.resource, l.msg])).toEqual([
      ['conversations', '"*" was rejected (400); reading conversations one project at a time'],
    ]);
  });
});

describe('initialScopes (plan, verify, status: no discovery)', () => {
  it('one project: that scope for every resource', () => {
    expect(initialScopes(traces, { project: 'alpha' }, ['beta'])).toEqual([singleProjectScope('alpha')]);
    expect(initialScopes(events, { project: undefined }, [])).toEqual([singleProjectScope(undefined)]);
  });

  it('"*": the all-projects scope where the endpoint takes it; else --project-ids, else the known projects, sorted; undefined when none is known', () => {
    expect(initialScopes(events, { project: '*', projectIds: ['b', 'a'] }, [])).toEqual([allProjectsScope(['a', 'b'])]);
    expect(initialScopes(traces, { project: '*', projectIds: ['b', 'a'] }, ['c'])).toEqual([
      singleProjectScope('a'),
      singleProjectScope('b'),
    ]);
    expect(initialScopes(traces, { project: '*' }, ['c', 'a'])).toEqual([
      singleProjectScope('a'),
      singleProjectScope('c'),
    ]);
    expect(initialScopes(traces, { project: '*' }, [])).toBeUndefined();
  });
});
