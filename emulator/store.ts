/**
 * All records of all active projects, kept sorted for keyset walks, plus the events not yet visible.
 * Users and conversations are derived from visible events only, and updated as events become visible.
 */

import type { ApiRecord } from './types.js';
import { ProjectGenerator } from './data.js';
import {
  convoRecord,
  eventRecord,
  iso,
  signalGroupRecord,
  signalRecord,
  spanRecord,
  userRecord,
  type ConvoEntry,
  type EventEntry,
  type SignalEntry,
  type SignalGroupEntry,
  type SpanEntry,
  type UserEntry,
} from './entries.js';
import { cloneJson } from './json.js';
import { deriveSeed, Random } from './random.js';
import { SortedList, type Entry } from './sorted-list.js';

const DAY_MS = 86_400_000;
/** Events in the newest 30 % of the history carry `feature_flags` and `topics`. */
const RECENT_SHARE = 0.3;
/** The newest 2 % of seeded events carry `tool_calls`. */
const TOOL_CALLS_SHARE = 0.02;
/** Share of added events that come from a user never seen before. */
const NEW_USER_RATE = 0.05;

const RESOURCES = ['events', 'traces', 'signals', 'signal_groups', 'users', 'conversations'] as const;
type ResourceName = (typeof RESOURCES)[number];

export interface ProjectData {
  readonly slug: string;
  readonly generator: ProjectGenerator;
  readonly events: SortedList<EventEntry>;
  readonly eventsById: Map<string, EventEntry>;
  readonly traces: SortedList<SpanEntry>;
  readonly signals: SortedList<SignalEntry>;
  readonly signalsById: Map<string, SignalEntry>;
  readonly signalGroups: SortedList<SignalGroupEntry>;
  readonly signalGroupsById: Map<string, SignalGroupEntry>;
  /** The signal ids of each group: what the `signal_group` filter on events matches. */
  readonly signalIdsByGroup: Map<string, ReadonlySet<string>>;
  readonly users: SortedList<UserEntry>;
  readonly usersById: Map<string, UserEntry>;
  readonly convos: SortedList<ConvoEntry>;
  readonly convosById: Map<string, ConvoEntry>;
  /** Events not yet visible, ordered by `visibleFrom`. */
  readonly pending: EventEntry[];
}

export interface StoreOptions {
  readonly seed: number;
  readonly projects: readonly string[];
  readonly eventsPerProject: number;
  readonly historyDays: number;
  readonly startMs: number;
  /** Share of seeded events in the last `lateMs` that become visible `lateMs` after their timestamp. */
  readonly lateRate: number;
  readonly lateMs: number;
  /** An event's enriched fields are served this long after it becomes visible; 0: at once. */
  readonly enrichAfterMs: number;
  /** Spans carry `event_id` (the spec flavor). */
  readonly spanEventId: boolean;
  /** `user_input` served padded to this many characters (`EmulatorOptions.userInputChars`). */
  readonly userInputChars?: number;
  /** Half the events serve an ISO instant as `user_input`, the other half as `assistant_output` (`ListQuirks.instantTexts`). */
  readonly instantTexts?: boolean;
  /** Events served with `model: null` (`EmulatorOptions.hideModel`). */
  readonly hideModel?: boolean;
  /** An event's spans are served this long after it becomes visible (`EmulatorOptions.spanLagMs`). */
  readonly spanLagMs?: number;
  /** Conversations carry `signals`, enriched this long after their last message (`EmulatorOptions.convoEnrichAfterMs`). */
  readonly convoEnrichAfterMs?: number;
  /** The real flavor's answer to `/v1/traces` without `event_id` (`EmulatorOptions.tracesWithoutEvent`). */
  readonly tracesWithoutEvent?: 'refuse' | 'empty' | 'unprocessable';
  /** Counts and timeseries leave out events indexed less than this long ago (`EmulatorOptions.countLagMs`). */
  readonly countLagMs?: number;
  /** Events older than this are removed, with their spans, as retention would (`EmulatorOptions.retentionMs`). */
  readonly retentionMs?: number;
}

export interface AddEventsOptions {
  readonly timestamp?: number;
  readonly lateByMs?: number;
  readonly lateRate: number;
  readonly lateMs: number;
}

export class Store {
  private readonly projects = new Map<string, ProjectData>();
  /** Lateness draws have their own stream, so the data does not depend on `lateRate`. */
  private readonly lateRng: Random;
  /** Lower-cased texts for case-insensitive search; texts come from fixed pools, so this stays small. */
  private readonly lowered = new Map<string, string>();
  readonly enrichAfterMs: number;
  readonly spanEventId: boolean;
  readonly hideModel: boolean;
  readonly spanLagMs: number;
  readonly convoEnrichAfterMs: number | undefined;
  readonly tracesWithoutEvent: 'refuse' | 'empty' | 'unprocessable';
  /** The filler `eventAt` pads `user_input` with, as long as the padded length (none: no padding). */
  private readonly filler: string | undefined;
  private readonly instantTexts: boolean;
  readonly countLagMs: number;
  private readonly retentionMs: number | undefined;
  /** When the store was made: the seeded events were indexed then (a server that just loaded them). */
  private readonly startMs: number;
  /** When each added event was indexed: as it was added, or when it became visible if later. */
  private readonly addedAt = new WeakMap<EventEntry, number>();

  constructor(options: StoreOptions) {
    this.countLagMs = Math.max(0, options.countLagMs ?? 0);
    this.retentionMs = options.retentionMs;
    this.startMs = options.startMs;
    this.enrichAfterMs = Math.max(0, options.enrichAfterMs);
    const chars = Math.floor(options.userInputChars ?? 0);
    this.filler =
      chars > 0
        ? 'the quick brown fox jumps over the lazy dog 0123456789 '.repeat(Math.ceil(chars / 55)).slice(0, chars)
        : undefined;
    this.spanEventId = options.spanEventId;
    this.instantTexts = options.instantTexts === true;
    this.hideModel = options.hideModel === true;
    this.spanLagMs = Math.max(0, options.spanLagMs ?? 0);
    this.tracesWithoutEvent = options.tracesWithoutEvent ?? 'refuse';
    this.convoEnrichAfterMs =
      options.convoEnrichAfterMs === undefined ? undefined : Math.max(0, options.convoEnrichAfterMs);
    this.lateRng = new Random(deriveSeed(options.seed, 'late'));
    for (const slug of options.projects) this.projects.set(slug, this.seedProject(slug, options));
  }

  project(slug: string): ProjectData | undefined {
    return this.projects.get(slug);
  }

  lowerCase(text: string): string {
    let lower = this.lowered.get(text);
    if (lower === undefined) {
      lower = text.toLowerCase();
      if (this.lowered.size < 100_000) this.lowered.set(text, lower);
    }
    return lower;
  }

  /** Whether `event` is served with its enriched fields at `now`. */
  isEnriched(event: EventEntry, now: number): boolean {
    return now >= event.visibleFrom + this.enrichAfterMs;
  }

  /** The event as served at `now` (with or without its enriched fields). */
  eventAt(event: EventEntry, now: number): ApiRecord {
    const served = withInstantText(eventRecord(event, this.isEnriched(event, now)), event, this.instantTexts);
    // A logger that does not know the model: the event shows no trace by its fields, its spans stay.
    const record = this.hideModel ? { ...served, model: null } : served;
    if (this.filler === undefined) return record;
    const text = `${event.userInput} `;
    return { ...record, user_input: text.length >= this.filler.length ? text : text + this.filler.slice(text.length) };
  }

  /** The spans of `event` served at `now`: none until `spanLagMs` after it became visible (a tracer writing apart from the logger). */
  spansAt(event: EventEntry, now: number): readonly SpanEntry[] {
    return now >= event.visibleFrom + this.spanLagMs ? event.spans : [];
  }

  /**
   * The conversation as served at `now`. With `convoEnrichAfterMs`, it carries `signals` (computed
   * from its messages), absent until that long after its last message: enrichment that lands late.
   */
  convoAt(convo: ConvoEntry, now: number): ApiRecord {
    const record = convoRecord(convo);
    if (this.convoEnrichAfterMs === undefined || now < convo.sortKey + this.convoEnrichAfterMs) return record;
    return {
      ...record,
      signals: [{ id: 'sig_long_conversation', name: 'long_conversation', count: convo.messageCount }],
    };
  }

  /**
   * Whether the counts (`/v1/events/count`, `/timeseries`) include `event` at `now`: a rollup that
   * trails the list by `countLagMs` leaves out what was indexed (became visible) less than that ago.
   */
  isCounted(event: EventEntry, now: number): boolean {
    if (this.countLagMs === 0) return true;
    const indexed = this.addedAt.get(event) ?? Math.max(event.visibleFrom, this.startMs);
    return indexed <= now - this.countLagMs;
  }

  /**
   * Deletes events at the source, as an erasure request or retention does: gone from every list,
   * count and lookup with their spans. Users and conversations keep what they were derived from
   * (a service's rollups are not rewritten by a deletion). Returns copies of the deleted events.
   */
  deleteEvents(slug: string, select: { readonly ids?: readonly string[]; readonly beforeMs?: number }): ApiRecord[] {
    const project = this.requireProject(slug);
    const victims = new Set<EventEntry>();
    for (const id of select.ids ?? []) {
      const event = project.eventsById.get(id);
      if (event !== undefined) victims.add(event);
    }
    if (select.beforeMs !== undefined)
      for (const event of project.events.values()) {
        if (event.sortKey >= select.beforeMs) break;
        victims.add(event);
      }
    const out: ApiRecord[] = [];
    for (const event of victims) {
      out.push(cloneJson({ ...this.eventAt(event, Number.POSITIVE_INFINITY), project_id: slug }));
      project.events.remove(event);
      project.eventsById.delete(event.id);
      for (const span of event.spans) project.traces.remove(span);
    }
    return out;
  }

  /** Makes every pending event whose time has come visible; removes what retention no longer keeps. */
  advance(now: number): void {
    if (this.retentionMs !== undefined)
      for (const slug of this.projects.keys()) this.deleteEvents(slug, { beforeMs: now - this.retentionMs });
    for (const project of this.projects.values()) {
      const pending = project.pending;
      let ready = 0;
      while (ready < pending.length && pending[ready]!.visibleFrom <= now) ready++;
      if (ready === 0) continue;
      for (const event of pending.splice(0, ready)) this.makeVisible(project, event);
    }
  }

  addEvents(slug: string, count: number, now: number, options: AddEventsOptions): EventEntry[] {
    const project = this.requireProject(slug);
    this.advance(now);
    const ms = Math.floor(options.timestamp ?? now);
    const added: EventEntry[] = [];
    for (let i = 0; i < count; i++) {
      let lateBy = options.lateByMs ?? 0;
      if (options.lateByMs === undefined && options.lateRate > 0 && this.lateRng.chance(options.lateRate))
        lateBy = options.lateMs;
      const event = project.generator.event(ms, ms + lateBy, { recent: true, toolCalls: true }, NEW_USER_RATE);
      this.addedAt.set(event, Math.max(now, event.visibleFrom));
      if (event.visibleFrom <= now) this.makeVisible(project, event);
      else insertPending(project.pending, event);
      added.push(event);
    }
    return added;
  }

  /**
   * Deep copies of every visible record of `resource`, each with `project_id`, as served at `now`
   * (events without their enriched fields until those are due).
   */
  snapshot(resource: string, now: number, slug?: string, spanEventId = this.spanEventId): ApiRecord[] {
    this.advance(now);
    const projects = slug === undefined ? [...this.projects.values()] : [this.requireProject(slug)];
    // What each resource serves of a project, as of `now`.
    const served: Readonly<Record<ResourceName, (p: ProjectData) => ApiRecord[]>> = {
      events: (p) => [...p.events.values()].map((e) => this.eventAt(e, now)),
      traces: (p) =>
        [...p.traces.values()]
          .filter((s) => now >= s.event.visibleFrom + this.spanLagMs)
          .map((s) => spanRecord(s, { eventId: spanEventId })),
      signals: (p) => [...p.signals.values()].map((s) => signalRecord(s)),
      signal_groups: (p) => [...p.signalGroups.values()].map((g) => signalGroupRecord(g)),
      users: (p) => [...p.users.values()].map((u) => userRecord(u)),
      conversations: (p) => [...p.convos.values()].map((c) => this.convoAt(c, now)),
    };
    if (!Object.hasOwn(served, resource))
      throw new Error(`snapshot: unknown resource "${resource}"; expected one of ${RESOURCES.join(', ')}`);
    const out: ApiRecord[] = [];
    for (const p of projects) {
      for (const record of served[resource as ResourceName](p)) out.push(cloneJson({ ...record, project_id: p.slug }));
    }
    return out;
  }

  private requireProject(slug: string): ProjectData {
    const project = this.projects.get(slug);
    if (!project)
      throw new Error(`Emulator: "${slug}" is not an active project (active: ${[...this.projects.keys()].join(', ')})`);
    return project;
  }

  private seedProject(slug: string, options: StoreOptions): ProjectData {
    const { startMs, eventsPerProject: n, lateMs, lateRate } = options;
    const historyMs = Math.max(1, Math.round(options.historyDays * DAY_MS));
    const generator = new ProjectGenerator(options.seed, slug, n, startMs, historyMs);
    const times = generator.timestamps(n, startMs, historyMs);
    const recentFrom = startMs - historyMs * RECENT_SHARE;
    const toolCallsFrom = n - Math.max(1, Math.ceil(n * TOOL_CALLS_SHARE));
    const visible: EventEntry[] = [];
    const pending: EventEntry[] = [];
    for (let i = 0; i < n; i++) {
      const ms = times[i]!;
      const late = ms > startMs - lateMs && lateRate > 0 && this.lateRng.chance(lateRate);
      const event = generator.event(ms, late ? ms + lateMs : ms, {
        recent: ms >= recentFrom,
        toolCalls: i >= toolCallsFrom,
      });
      (event.visibleFrom <= startMs ? visible : pending).push(event);
    }
    pending.sort((a, b) => a.visibleFrom - b.visibleFrom);

    const usersById = new Map<string, UserEntry>();
    const convosById = new Map<string, ConvoEntry>();
    const spans: SpanEntry[] = [];
    for (const event of visible) {
      applyToUser(usersById, event, generator, undefined);
      applyToConvo(convosById, event, undefined);
      for (const span of event.spans) spans.push(span);
    }
    return {
      slug,
      generator,
      events: new SortedList(visible),
      eventsById: new Map(visible.map((e) => [e.id, e])),
      traces: new SortedList(spans),
      signals: new SortedList([...generator.signals]),
      signalsById: new Map(generator.signals.map((s) => [s.id, s])),
      signalGroups: new SortedList([...generator.signalGroups]),
      signalGroupsById: new Map(generator.signalGroups.map((g) => [g.id, g])),
      signalIdsByGroup: new Map(
        generator.signalGroups.map((g) => [
          g.id,
          new Set(generator.signals.filter((s) => s.groupId === g.id).map((s) => s.id)),
        ]),
      ),
      users: new SortedList([...usersById.values()]),
      usersById,
      convos: new SortedList([...convosById.values()]),
      convosById,
      pending,
    };
  }

  private makeVisible(project: ProjectData, event: EventEntry): void {
    project.events.insert(event);
    project.eventsById.set(event.id, event);
    for (const span of event.spans) project.traces.insert(span);
    applyToUser(project.usersById, event, project.generator, project.users);
    applyToConvo(project.convosById, event, project.convos);
  }
}

function insertPending(pending: EventEntry[], event: EventEntry): void {
  let i = pending.length;
  while (i > 0 && pending[i - 1]!.visibleFrom > event.visibleFrom) i--;
  pending.splice(i, 0, event);
}

/** Folds a newly visible event into its user; `list` (when given) is kept sorted by `last_seen`. */
function applyToUser(
  byId: Map<string, UserEntry>,
  event: EventEntry,
  generator: ProjectGenerator,
  list: SortedList<UserEntry> | undefined,
): void {
  foldEvent(byId, list, event.userId, event.sortKey, {
    create: () => ({
      project: event.project,
      id: event.userId,
      sortKey: event.sortKey,
      traits: generator.traits(event.userId),
      firstSeen: event.sortKey,
      eventCount: 1,
    }),
    update: (user) => {
      user.eventCount++;
      user.firstSeen = Math.min(user.firstSeen, event.sortKey);
    },
  });
}

/** Moves `entry` to a later sort key, keeping `list` (sorted by sort key) in order. */
function advanceSortKey<T extends Entry & { sortKey: number }>(
  list: SortedList<T> | undefined,
  entry: T,
  sortKey: number,
): void {
  if (sortKey <= entry.sortKey) return;
  list?.remove(entry);
  entry.sortKey = sortKey;
  list?.insert(entry);
}

/** Folds a newly visible event into its conversation; `list` is kept sorted by `last_message_at`. */
function applyToConvo(
  byId: Map<string, ConvoEntry>,
  event: EventEntry,
  list: SortedList<ConvoEntry> | undefined,
): void {
  foldEvent(byId, list, event.convoId, event.sortKey, {
    create: () => ({
      project: event.project,
      id: event.convoId,
      sortKey: event.sortKey,
      userId: event.userId,
      startedAt: event.sortKey,
      messageCount: 1,
    }),
    update: (convo) => {
      convo.messageCount++;
      convo.startedAt = Math.min(convo.startedAt, event.sortKey);
    },
  });
}

/**
 * The record an event folds into (its user, its conversation): created by its first event, else
 * updated and moved to the event's sort key (`list`, sorted by sort key, stays in order).
 */
function foldEvent<T extends Entry & { sortKey: number }>(
  byId: Map<string, T>,
  list: SortedList<T> | undefined,
  id: string,
  sortKey: number,
  fold: { readonly create: () => T; readonly update: (entry: T) => void },
): void {
  const entry = byId.get(id);
  if (!entry) {
    const created = fold.create();
    byId.set(id, created);
    list?.insert(created);
    return;
  }
  fold.update(entry);
  advanceSortKey(list, entry, sortKey);
}

/**
 * Free text that looks like an instant (a "what time is it" answer): by the id's last character,
 * half the events carry their timestamp as `user_input`, the other half as `assistant_output`, so
 * whichever event a reader sees first, one of the two columns starts with an instant.
 */
function withInstantText(record: ApiRecord, event: EventEntry, on: boolean): ApiRecord {
  if (!on) return record;
  const field = event.id.charCodeAt(event.id.length - 1) % 2 === 0 ? 'user_input' : 'assistant_output';
  return { ...record, [field]: iso(event.sortKey) };
}
