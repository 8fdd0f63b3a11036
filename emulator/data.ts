/**
 * Seeded data of one project. Every draw comes from the project's own PRNG (derived from the seed
 * and the slug), so a project's data does not depend on which other projects exist, and timestamps
 * are offsets from the start time.
 */

import type { JsonValue } from './types.js';
import {
  APP_VERSIONS,
  ASSISTANT_OUTPUTS,
  EVENT_NAMES,
  LOCALES,
  MODELS,
  PLANS,
  PLATFORMS,
  PROVIDERS,
  REGIONS,
  LLM_SPAN_TYPES,
  SIGNAL_DEFINITIONS,
  SIGNAL_GROUP_DEFINITIONS,
  SPAN_KINDS,
  SPAN_STATUSES,
  TAGS,
  TOPICS,
  USER_INPUTS,
  USER_NAMES,
} from './content.js';
import {
  iso,
  type EventEntry,
  type JsonObject,
  type SignalEntry,
  type SignalGroupEntry,
  type SpanEntry,
} from './entries.js';
import { deriveSeed, Random } from './random.js';

const DAY_MS = 86_400_000;
/** Share of events whose timestamp is copied from the previous event (≈2× as many share one). */
const SAME_TIMESTAMP_RATE = 0.1;
/** Share of events with a client-supplied id (`evt-000123`), repeated across projects. */
const CLIENT_ID_RATE = 0.1;
const TRACED_RATE = 0.5;
const SIGNAL_MATCH_RATE = 0.25;
/** A conversation ends after this much silence. */
const CONVO_GAP_MS = 2 * 3_600_000;
const NS_PER_MS = 1_000_000n;
const PROPERTY_POOL_SIZE = 2048;
const NO_SPANS: readonly SpanEntry[] = Object.freeze([]);
const NO_SIGNALS: readonly JsonValue[] = Object.freeze([]);
const NO_IDS: readonly string[] = Object.freeze([]);

/**
 * Nested values are drawn from shared pools: records are never mutated (handlers only read them,
 * `snapshot` deep-copies), and sharing keeps 100k events per project small enough to seed quickly.
 */
function subsets<T>(items: readonly T[], maxSize: number): readonly (readonly T[])[] {
  const out: T[][] = [];
  const grow = (start: number, current: T[]): void => {
    if (current.length > 0) out.push([...current]);
    if (current.length === maxSize) return;
    for (let i = start; i < items.length; i++) grow(i + 1, [...current, items[i]!]);
  };
  grow(0, []);
  return out;
}
const TAG_SETS = subsets(TAGS, 3);
const TOPIC_SETS = subsets(TOPICS, 3);
const APPS: readonly JsonObject[] = APP_VERSIONS.flatMap((version) =>
  PLATFORMS.flatMap((platform) => Array.from({ length: 12 }, (_, i) => ({ version, platform, build: 1000 + i * 17 }))),
);
/** Flag values are strings: the SDK types `feature_flags` as a map of flag name to string. */
const FEATURE_FLAGS: readonly JsonObject[] = ['false', 'true'].flatMap((newUi) =>
  ['false', 'true'].flatMap((ranking) =>
    ['control', 'treatment'].map((variant) => ({ new_ui: newUi, ranking_v2: ranking, variant })),
  ),
);
const EXPERIMENTS: readonly JsonObject[] = ['a', 'b'].flatMap((arm) =>
  [1, 3, 7].flatMap((x) => [2, 5, 9].map((y) => ({ name: 'ranking_v2', arm, exposures: [x, y] }))),
);
/** Attribute values are strings or numbers (the SDK's span schema), keyed by span name. */
const SPAN_ATTRIBUTES: ReadonlyMap<string, readonly JsonObject[]> = new Map(
  SPAN_KINDS.map((kind) => [
    kind.name,
    [0, 1, 2].flatMap((retries) =>
      ['ok', 'error'].map((outcome) => {
        const attributes: JsonObject = { 'service.name': 'assistant-api', 'retry.count': retries, 'sampling.rate': 1 };
        if (LLM_SPAN_TYPES.has(kind.type)) attributes['llm.temperature'] = retries === 0 ? 0.2 : 0.7;
        if (kind.name === 'http.request') attributes['http.status_code'] = outcome === 'error' ? 502 : 200;
        return attributes;
      }),
    ),
  ]),
);

export interface EventFeatures {
  /** Carries `feature_flags` and `topics` (fields that appear only in later records). */
  readonly recent: boolean;
  /** Carries `tool_calls` (the newest records). */
  readonly toolCalls: boolean;
}

interface UserProfile {
  readonly id: string;
  readonly traits: JsonObject;
}

export class ProjectGenerator {
  readonly project: string;
  readonly signals: SignalEntry[];
  readonly signalGroups: SignalGroupEntry[];
  private readonly rng: Random;
  private readonly users: UserProfile[] = [];
  private readonly traitsById = new Map<string, JsonObject>();
  private readonly openConvos = new Map<string, { id: string; lastMs: number }>();
  /** Drawn once per generator and shared by events: 100k distinct objects per project cost seconds of GC. */
  private readonly propertyPool: readonly JsonObject[];
  private clientIds = 0;
  private spanCount = 0;

  constructor(seed: number, project: string, expectedEvents: number, startMs: number, historyMs: number) {
    this.project = project;
    this.rng = new Random(deriveSeed(seed, `project:${project}`));
    const userCount = Math.max(8, Math.round(expectedEvents / 40));
    for (let i = 0; i < userCount; i++) this.addUser(i);
    this.propertyPool = Array.from({ length: PROPERTY_POOL_SIZE }, () => this.properties());
    // Groups draw from their own stream, so adding them left the events' data unchanged.
    const groupRng = new Random(deriveSeed(seed, `groups:${project}`));
    const groupIds = SIGNAL_GROUP_DEFINITIONS.map(() => groupRng.uuid());
    const orgId = `org_${groupRng.hex(12)}`;
    this.signals = SIGNAL_DEFINITIONS.map((definition, i) => {
      const createdMs =
        i < 6
          ? startMs - historyMs - this.rng.int(1, 60) * DAY_MS - this.rng.int(0, DAY_MS)
          : startMs - this.rng.int(1, historyMs);
      const id = this.rng.token('sig_', 12);
      const groupId = definition.group === null ? null : (groupIds[definition.group] ?? null);
      const groupName = definition.group === null ? null : (SIGNAL_GROUP_DEFINITIONS[definition.group]?.name ?? null);
      return {
        project,
        id,
        sortKey: createdMs,
        groupId,
        record: {
          id,
          type: definition.type,
          name: definition.name,
          description: definition.description,
          created_at: iso(createdMs),
          group_id: groupId,
          group_name: groupName,
          sentiment: definition.sentiment,
        },
      };
    });
    this.signalGroups = SIGNAL_GROUP_DEFINITIONS.map((definition, i) => {
      const id = groupIds[i]!;
      const members = this.signals.filter((signal) => signal.groupId === id);
      const created = Math.min(startMs - historyMs, ...members.map((m) => m.sortKey)) - groupRng.int(1, DAY_MS);
      const updated = Math.max(created, ...members.map((m) => m.sortKey));
      const record: JsonObject = {
        id,
        name: definition.name,
        description: definition.description,
        org_id: orgId,
        created_at: iso(created),
      };
      if (members.length > 0) record['updated_at'] = iso(updated);
      record['signal_count'] = members.length;
      return { project, id, sortKey: created, record };
    });
  }

  /** Trait object of a user of this project. */
  traits(userId: string): JsonObject {
    return this.traitsById.get(userId) ?? {};
  }

  /** `count` ascending timestamps in (start − history, start]; about 20 % share theirs with another. */
  timestamps(count: number, startMs: number, historyMs: number): Float64Array {
    const times = new Float64Array(count);
    for (let i = 0; i < count; i++) times[i] = startMs - Math.floor(this.rng.next() * historyMs);
    times.sort();
    for (let i = 1; i < count; i++) {
      if (this.rng.chance(SAME_TIMESTAMP_RATE)) times[i] = times[i - 1]!;
    }
    return times;
  }

  /** One event at `ms` (conversations assume events come roughly in time order). */
  event(ms: number, visibleFrom: number, features: EventFeatures, newUserRate = 0): EventEntry {
    const rng = this.rng;
    const id = rng.chance(CLIENT_ID_RATE) ? `evt-${String(++this.clientIds).padStart(6, '0')}` : rng.uuid();
    const user = rng.chance(newUserRate) ? this.addUser(this.users.length) : this.pickUser();
    const convoId = this.convoFor(user.id, ms);
    const eventName = rng.pick(EVENT_NAMES);
    const userInput = rng.pick(USER_INPUTS);
    const assistantOutput = rng.pick(ASSISTANT_OUTPUTS);
    const model = rng.pick(MODELS);
    let signals: readonly JsonValue[] = NO_SIGNALS;
    let signalIds: readonly string[] = NO_IDS;
    if (rng.chance(SIGNAL_MATCH_RATE)) {
      const matched = rng.pickSome(this.signals, 2);
      signalIds = matched.map((signal) => signal.id);
      signals = matched.map((signal) => ({
        id: signal.id,
        name: signal.record['name'] ?? null,
        score: Math.round(rng.next() * 1000) / 1000,
      }));
    }
    const properties = rng.pick(this.propertyPool);
    let extras: JsonObject | undefined;
    let enrichment: JsonObject | undefined;
    if (features.recent) {
      extras = { feature_flags: rng.pick(FEATURE_FLAGS) };
      enrichment = { topics: rng.pick(TOPIC_SETS) };
    }
    if (features.toolCalls) {
      enrichment ??= {};
      const spanId = rng.hex(16);
      const durationMs = 5 + rng.int(0, 12) * 37;
      enrichment['tool_calls'] = [
        {
          tool_name: 'search_docs',
          status: rng.chance(0.2) ? 'ERROR' : 'OK',
          duration_ms: durationMs,
          started_at: iso(ms),
          span_id: spanId,
        },
      ];
    }
    const event: EventEntry = {
      project: this.project,
      id,
      sortKey: ms,
      visibleFrom,
      eventName,
      userId: user.id,
      convoId,
      userInput,
      assistantOutput,
      signals,
      signalIds,
      properties,
      model,
      extras,
      enrichment,
      spans: NO_SPANS,
    };
    if (rng.chance(TRACED_RATE)) event.spans = this.spans(event);
    return event;
  }

  private addUser(index: number): UserProfile {
    const rng = this.rng;
    const id = index % 5 === 4 ? `user${index}@example.com` : `user_${String(index).padStart(5, '0')}`;
    const traits: JsonObject = {
      name: rng.pick(USER_NAMES),
      plan: rng.pick(PLANS),
      locale: rng.pick(LOCALES),
      beta: rng.chance(0.2),
      signup: {
        source: rng.pick(['ads', 'organic', 'referral']),
        campaign: rng.chance(0.5) ? null : `spring-${rng.int(1, 9)}`,
      },
    };
    const profile = { id, traits };
    this.users.push(profile);
    this.traitsById.set(id, traits);
    return profile;
  }

  /** Skewed: a few users produce most events. */
  private pickUser(): UserProfile {
    const r = this.rng.next();
    return this.users[Math.floor(r * r * this.users.length)] ?? this.rng.pick(this.users);
  }

  private convoFor(userId: string, ms: number): string {
    const open = this.openConvos.get(userId);
    if (open && Math.abs(ms - open.lastMs) < CONVO_GAP_MS && !this.rng.chance(0.25)) {
      open.lastMs = Math.max(open.lastMs, ms);
      return open.id;
    }
    const id = this.rng.token('conv_', 20);
    this.openConvos.set(userId, { id, lastMs: ms });
    return id;
  }

  private properties(): JsonObject {
    const rng = this.rng;
    const properties: JsonObject = {
      plan: rng.pick(PLANS),
      region: rng.pick(REGIONS),
      app: rng.pick(APPS),
      latency_ms: Math.round(rng.next() * 500_000) / 100,
      retries: rng.int(0, 3),
      cached: rng.chance(0.3),
      referrer: rng.chance(0.6) ? null : 'https://example.com/help?q=a&b="c"',
      tags: rng.pick(TAG_SETS),
    };
    if (rng.chance(0.2)) {
      properties['experiment'] = rng.pick(EXPERIMENTS);
    }
    return properties;
  }

  /** 1–3 spans whose sub-millisecond digits are non-zero, so any rounding of the ns values shows. */
  private spans(event: EventEntry): SpanEntry[] {
    const rng = this.rng;
    const traceId = rng.hex(32);
    const count = rng.int(1, 3);
    const rootStart = visibleNs(BigInt(event.sortKey) * NS_PER_MS + BigInt(rng.int(1, 999_998)));
    const rootDuration = rng.int(2_000_000, 4_000_000_000);
    const spans: SpanEntry[] = [];
    let parentSpanId: string | null = null;
    for (let i = 0; i < count; i++) {
      const root = i === 0;
      const kind = root ? SPAN_KINDS[0]! : rng.pick(SPAN_KINDS);
      const llm = LLM_SPAN_TYPES.has(kind.type);
      const status = rng.pick(SPAN_STATUSES);
      const id = rng.token('', 8, (++this.spanCount).toString(16).padStart(8, '0'));
      const start = root ? rootStart : visibleNs(rootStart + BigInt(rng.int(1, Math.floor(rootDuration / 2))));
      let durationNs = root ? rootDuration : rng.int(1_000, Math.floor(rootDuration / 3));
      while (visibleNs(start + BigInt(durationNs)) !== start + BigInt(durationNs)) durationNs++;
      spans.push({
        project: this.project,
        id,
        sortKey: start,
        event,
        traceId,
        parentSpanId,
        spanName: kind.name,
        spanType: kind.type,
        status,
        durationNs,
        input: llm ? event.userInput : (SPAN_INPUTS[i] ?? ''),
        output: llm ? event.assistantOutput : status === 'ERROR' ? SPAN_ERROR_OUTPUT : SPAN_OK_OUTPUT,
        inputTokens: llm ? rng.int(5, 4000) : 0,
        outputTokens: llm ? rng.int(1, 2000) : 0,
        provider: llm ? (PROVIDERS[event.model] ?? null) : null,
        attributes: rng.pick(SPAN_ATTRIBUTES.get(kind.name) ?? [{}]),
      });
      if (root) parentSpanId = id;
    }
    return spans.sort((a, b) => (a.sortKey < b.sortKey ? -1 : a.sortKey > b.sortKey ? 1 : a.id < b.id ? -1 : 1));
  }
}

const SPAN_INPUTS: readonly string[] = ['{"query": "root"}', '{"query": "step", "n": 1}', '{"query": "step", "n": 2}'];
const SPAN_OK_OUTPUT = '{"ok": true}';
const SPAN_ERROR_OUTPUT = 'Error: upstream timed out\n\tat fetch()';

/**
 * The nearest value at or above `ns` whose last digit is non-zero and which a double cannot hold
 * exactly, so a client that parses it as a JS number visibly corrupts it.
 */
function visibleNs(ns: bigint): bigint {
  let value = ns;
  while (value % 10n === 0n || BigInt(Number(value)) === value) value += 1n;
  return value;
}
