/**
 * A faithful local emulator of the read-only, rate-limited Query API, served over HTTP on
 * 127.0.0.1: records, envelopes, filters and errors in the shape of the vendor's SDK
 * (`@raindrop-ai/query`, proven by test/contract), the spec's behaviours where the SDK is silent
 * (`shared/spec/query-api.md`, `field-notes.md`), in two flavors (`spec`, `real`: see `Flavor`).
 * Seeded data, keyset cursors, project scopes, sliding-window limits, latency, late visibility,
 * late enrichment and injectable faults, for integration tests and benchmarks of the sync client.
 *
 * It sits beside `src/`, not in it, and imports nothing from `src/` nor from `connectors/` (its
 * limits are the spec's, `SPEC_RATE_LIMITS`; test/emulator/independence checks): the oracle shares no
 * code with what it tests.
 */

import { createServer, type Server } from 'node:http';
import type { ApiRecord } from './types.js';
import { DEFAULT_LATE_MS, FaultPicker, type FaultOptions } from './faults.js';
import { cloneJson } from './json.js';
import { RateLimiter, type RateLimitOptions } from './limits.js';
import { deriveSeed } from './random.js';
import { SEARCH_TEMPLATE } from './routes.js';
import { isSlug } from './scope.js';
import { createListener, type RequestInfo, type ServerContext, type Settings } from './server.js';
import { Random } from './random.js';
import type { Flavor } from './handler-context.js';
import { StatsRecorder, type EmulatorStats } from './stats.js';
import { Store } from './store.js';
import type { ListQuirks } from './quirks.js';
import { serverVariant, type Lack, type TimeseriesShape } from './variants.js';

export type { FaultKind, FaultOptions } from './faults.js';
export { SPEC_RATE_LIMITS, type RateLimitOptions } from './limits.js';
export type { EmulatorStats } from './stats.js';
export type { Flavor } from './handler-context.js';
export { LACKS, TIMESERIES_SHAPES, type Lack, type TimeseriesShape } from './variants.js';
export type { RequestInfo } from './server.js';
export { parseListQuirks, type ListQuirks } from './quirks.js';
export type { ApiRecord, JsonValue } from './types.js';

/** The project header of each flavor. */
export const PROJECT_HEADERS: Readonly<Record<Flavor, string>> = {
  spec: 'X-Service-Project-Id',
  real: 'X-Raindrop-Project-Id',
};
/** How long after it becomes visible an event of the real flavor gets its enriched fields, by default. */
export const DEFAULT_ENRICH_AFTER_MS = 60_000;

export interface EmulatorOptions {
  /**
   * `spec`: the specification's service — project header `X-Service-Project-Id`, traces listed by
   * time window as well as by `event_id`, `timestamp[...]` windows on users (`last_seen`) and
   * conversations (`last_message_at`), no enrichment delay.
   * `real`: the service the vendor's SDK describes — `X-Raindrop-Project-Id` (the spec's header is
   * ignored like any unknown header, so the read goes to `default`), `GET /v1/traces` needs
   * `event_id` (400 naming it otherwise), `timestamp[...]` ignored on users and conversations, and
   * events enriched `enrichAfterMs` after they become visible.
   * Both: SDK record shapes and error bodies, `received_at`, signal groups, `first_seen[...]`,
   * `last_seen[...]`, `started_at[...]`, facets' `timestamp.gte`/`timestamp.lt`.
   * @default 'spec'
   */
  flavor?: Flavor;
  /**
   * An event's `signals`, `topics`, attachments, `error_spans` and `tool_calls` are absent until
   * this long after it becomes visible (same id, same timestamp after); 0: served at once.
   * @default 60000 on the real flavor, 0 on the spec flavor
   */
  enrichAfterMs?: number;
  /**
   * Every event's `user_input` is served padded to this many characters (its text, a space, then a
   * fixed filler): very large rows, for memory tests and `bench:big-rows`. @default no padding
   */
  userInputChars?: number;
  /**
   * Events are served with `model: null` while their spans stay: a server where an event's fields
   * do not show that it has a trace (`--traces traced` then skips spans that exist). @default false
   */
  hideModel?: boolean;
  /** An event's spans are served only this long after the event becomes visible (a tracer that writes apart from the logger). @default 0 */
  spanLagMs?: number;
  /**
   * Conversations carry `signals`, absent until this long after their last message (enrichment
   * that lands late, as events' does). @default no `signals` on conversations
   */
  convoEnrichAfterMs?: number;
  /**
   * How the real flavor answers `/v1/traces` without `event_id`: `refuse` (400 naming it),
   * `empty` (`{"data":[]}`: nothing proves it lists by time), `unprocessable` (422 with
   * `details.field` only). @default 'refuse'
   */
  tracesWithoutEvent?: 'refuse' | 'empty' | 'unprocessable';
  /** `false`: `*` is refused with 400 on every endpoint (to test a client's per-project fallback). @default true */
  allProjects?: boolean;
  /**
   * Optional capabilities this server lacks (`signal-groups`: a server built from the spec;
   * `timeseries`, `facets`, `search`): their routes answer 404 `not_found`, as unknown paths.
   * @default none
   */
  lacks?: readonly Lack[];
  /** Intervals `/v1/events/timeseries` accepts; any other is refused with 400 naming `interval`. @default all five */
  timeseriesIntervals?: readonly string[];
  /** `rows`: the timeseries answers `{"data": [{"bucket", "events"}]}` instead of the SDK's shape. @default 'sdk' */
  timeseriesShape?: TimeseriesShape;
  /** Every answer waits this long (ms) before it is sent. @default 0 */
  latencyMs?: number;
  /** Uniform jitter (± ms) around `latencyMs`, seeded. @default latencyMs / 5 */
  latencyJitterMs?: number;
  /** Called with every request as it arrives (method, path, template, query, headers). */
  onRequest?: (info: RequestInfo) => void;
  /** Same seed, same options and same clock ⇒ same data. @default 1 */
  seed?: number;
  /** @default 0 (ephemeral). The host is always 127.0.0.1. */
  port?: number;
  /** Active project slugs. @default ['default', 'alpha', 'beta'] */
  projects?: string[];
  /** Archived project slugs: answered with 403. @default ['legacy'] */
  archivedProjects?: string[];
  /** Seeded events per active project. @default 500 */
  eventsPerProject?: number;
  /** Seeded events spread over this many days ending at the start time. @default 30 */
  historyDays?: number;
  /** The Organization API Key that is accepted. @default 'qs_org_emulator_key' */
  apiKey?: string;
  /** The write key: refused with 401 and a message naming it. @default 'qs_write_emulator_key' */
  writeKey?: string;
  /** Project header, matched case-insensitively. @default the flavor's (`PROJECT_HEADERS`) */
  projectHeader?: string;
  /** Default order of every list. @default 'desc' (newest first) */
  order?: 'desc' | 'asc';
  /** Rate limits enforced with 429, or `false` for none. @default false */
  limits?: false | RateLimitOptions;
  /** Fault injection. @default none */
  faults?: FaultOptions;
  /**
   * Events whose timestamp lies in [fromMs, toMs) are counted by `/v1/events/count` and
   * `/v1/events/timeseries` but never listed by `/v1/events`: a server whose counts and list
   * disagree for good (reconcile must say so, not loop). @default none
   */
  unlistedEvents?: { readonly fromMs: number; readonly toMs: number };
  /**
   * `/v1/events/count` and `/v1/events/timeseries` trail the list by this long: an event indexed
   * (visible) less than this ago is listed but not yet counted, as a rollup a minute behind. Seeded
   * events count as indexed when the emulator starts. @default 0
   */
  countLagMs?: number;
  /**
   * Events whose timestamp is older than this are deleted at the source, with their spans, as the
   * service's retention would (gone from lists, counts and lookups). @default none (kept for ever)
   */
  retentionMs?: number;
  /** Clock in ms. @default Date.now */
  now?: () => number;
  /** List behaviours of servers we have not met (offset cursors, page caps, …: `quirks.ts`). @default none */
  lists?: ListQuirks;
}

export interface Emulator {
  /** e.g. `http://127.0.0.1:41234` */
  readonly url: string;
  readonly port: number;
  readonly apiKey: string;
  readonly writeKey: string;
  readonly flavor: Flavor;
  /** The project header this emulator reads. */
  readonly projectHeader: string;
  /**
   * Adds `count` new events (timestamp = now unless given), with their spans, updating users and
   * conversations once visible. `lateByMs` makes them visible that long after their timestamp;
   * otherwise `faults.lateRate` decides. Returns copies of the new events, each with `project_id`,
   * as they will be once enriched.
   */
  addEvents(project: string, count: number, options?: { timestamp?: number; lateByMs?: number }): ApiRecord[];
  /**
   * Ground truth: copies of every visible record of `resource` ('events' | 'traces' | 'signals' |
   * 'signal_groups' | 'users' | 'conversations'), each with `project_id`, across all active
   * projects or one, as served now (events without their enriched fields until those are due).
   * `spanEventId: true` adds each span's `event_id` on every flavor (the real service does not serve
   * it: ground truth for a client that records which event it read a span for).
   */
  snapshot(resource: string, project?: string, options?: { spanEventId?: boolean }): ApiRecord[];
  /**
   * Deletes events of `project` at the source, as an erasure request (`ids`) or retention (`beforeMs`:
   * every event older) does: gone from lists, counts, lookups, with their spans. Returns copies of them.
   */
  deleteEvents(project: string, select: { ids?: readonly string[]; beforeMs?: number }): ApiRecord[];
  /** Live counters (a copy). */
  stats(): EmulatorStats;
  resetStats(): void;
  /** Changes limits, faults, order, latency or `*` acceptance at run time; new limits start with empty windows. */
  configure(
    patch: Partial<
      Pick<EmulatorOptions, 'limits' | 'faults' | 'order' | 'latencyMs' | 'latencyJitterMs' | 'allProjects'>
    >,
  ): void;
  close(): Promise<void>;
}

const DEFAULTS = {
  seed: 1,
  projects: ['default', 'alpha', 'beta'],
  archivedProjects: ['legacy'],
  eventsPerProject: 500,
  historyDays: 30,
  apiKey: 'qs_org_emulator_key',
  writeKey: 'qs_write_emulator_key',
} as const;

export async function startEmulator(options: EmulatorOptions = {}): Promise<Emulator> {
  const now = options.now ?? Date.now;
  const seed = options.seed ?? DEFAULTS.seed;
  const projects = [...(options.projects ?? DEFAULTS.projects)];
  const archived = new Set(options.archivedProjects ?? DEFAULTS.archivedProjects);
  for (const slug of [...projects, ...archived]) {
    if (!isSlug(slug)) throw new Error(`Emulator: "${slug}" is not a valid project slug`);
  }
  for (const slug of projects) {
    if (archived.has(slug)) throw new Error(`Emulator: "${slug}" is both active and archived`);
  }
  const flavor: Flavor = options.flavor ?? 'spec';
  if (flavor !== 'spec' && flavor !== 'real')
    throw new Error(`Emulator: flavor must be "spec" or "real", got "${String(flavor)}"`);
  const apiKey = options.apiKey ?? DEFAULTS.apiKey;
  const writeKey = options.writeKey ?? DEFAULTS.writeKey;
  const latencyMs = Math.max(0, options.latencyMs ?? 0);
  const settings: Settings = {
    order: options.order ?? 'desc',
    limiter: makeLimiter(options.limits),
    faults: options.faults,
    latencyMs,
    latencyJitterMs: Math.max(0, options.latencyJitterMs ?? latencyMs / 5),
    allProjects: options.allProjects ?? true,
    unlistedEvents: options.unlistedEvents,
  };
  const projectHeader = options.projectHeader ?? PROJECT_HEADERS[flavor];
  const store = new Store({
    seed,
    projects,
    eventsPerProject: Math.max(0, Math.floor(options.eventsPerProject ?? DEFAULTS.eventsPerProject)),
    historyDays: options.historyDays ?? DEFAULTS.historyDays,
    startMs: now(),
    lateRate: options.faults?.lateRate ?? 0,
    lateMs: options.faults?.lateMs ?? DEFAULT_LATE_MS,
    enrichAfterMs: options.enrichAfterMs ?? (flavor === 'real' ? DEFAULT_ENRICH_AFTER_MS : 0),
    spanEventId: flavor === 'spec',
    userInputChars: options.userInputChars,
    instantTexts: options.lists?.instantTexts === true,
    hideModel: options.hideModel,
    spanLagMs: options.spanLagMs,
    convoEnrichAfterMs: options.convoEnrichAfterMs,
    tracesWithoutEvent: options.tracesWithoutEvent,
    countLagMs: options.countLagMs,
    retentionMs: options.retentionMs,
  });
  const stats = new StatsRecorder();
  const timers = new Set<{ timer: NodeJS.Timeout; resolve: () => void }>();
  const context: ServerContext = {
    store,
    stats,
    faultPicker: new FaultPicker(deriveSeed(seed, 'faults')),
    settings,
    apiKey,
    writeKey,
    scopeRules: { headerName: projectHeader, active: projects, archived },
    flavor,
    latencyRng: new Random(deriveSeed(seed, 'latency')),
    onRequest: options.onRequest,
    now,
    lists: options.lists,
    variant: serverVariant(options),
    sleep: (ms) =>
      new Promise<void>((resolve) => {
        const entry = {
          resolve,
          timer: setTimeout(() => {
            timers.delete(entry);
            resolve();
          }, ms),
        };
        timers.add(entry);
      }),
  };
  const server = createServer(createListener(context));
  const port = await listen(server, options.port ?? 0);
  const url = `http://127.0.0.1:${port}`;

  return {
    url,
    port,
    apiKey,
    writeKey,
    flavor,
    projectHeader,
    addEvents(project, count, addOptions = {}) {
      const faults = settings.faults;
      const added = store.addEvents(project, count, now(), {
        timestamp: addOptions.timestamp,
        lateByMs: addOptions.lateByMs,
        lateRate: faults?.lateRate ?? 0,
        lateMs: faults?.lateMs ?? DEFAULT_LATE_MS,
      });
      // As served once enriched (an instant no event is enriched after).
      return added.map((event) =>
        cloneJson({ ...store.eventAt(event, Number.POSITIVE_INFINITY), project_id: event.project }),
      );
    },
    snapshot(resource, project, snapshotOptions) {
      return store.snapshot(resource, now(), project, snapshotOptions?.spanEventId);
    },
    deleteEvents(project, select) {
      store.advance(now());
      return store.deleteEvents(project, select);
    },
    stats: () => stats.snapshot(),
    resetStats: () => stats.reset(),
    configure(patch) {
      if ('order' in patch && patch.order !== undefined) settings.order = patch.order;
      if ('limits' in patch) settings.limiter = makeLimiter(patch.limits);
      if ('faults' in patch) settings.faults = patch.faults;
      if (patch.latencyMs !== undefined) {
        settings.latencyMs = Math.max(0, patch.latencyMs);
        if (patch.latencyJitterMs === undefined) settings.latencyJitterMs = settings.latencyMs / 5;
      }
      if (patch.latencyJitterMs !== undefined) settings.latencyJitterMs = Math.max(0, patch.latencyJitterMs);
      if (patch.allProjects !== undefined) settings.allProjects = patch.allProjects;
    },
    close: () => closeServer(server, timers),
  };
}

function makeLimiter(limits: false | RateLimitOptions | undefined): RateLimiter | undefined {
  return limits ? new RateLimiter(limits, SEARCH_TEMPLATE) : undefined;
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      const address = server.address();
      if (address === null || typeof address === 'string') reject(new Error('Emulator: no TCP address'));
      else resolve(address.port);
    });
  });
}

function closeServer(server: Server, timers: Set<{ timer: NodeJS.Timeout; resolve: () => void }>): Promise<void> {
  for (const entry of timers) {
    clearTimeout(entry.timer);
    entry.resolve();
  }
  timers.clear();
  return new Promise((resolve, reject) => {
    if (!server.listening) return resolve();
    server.close((error) => (error ? reject(error) : resolve()));
    server.closeAllConnections();
  });
}
