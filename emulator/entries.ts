/**
 * What the store keeps per record: typed fields for sorting, filtering and visibility. The JSON
 * record is built from them when served (a page is at most 1000 rows), which keeps 100k events per
 * project small enough to seed in about a second. Nested values may be shared between entries:
 * nothing mutates them, and `snapshot` deep-copies.
 */

import { LLM_SPAN_TYPES } from './content.js';
import type { ApiRecord, JsonValue } from './types.js';
import type { Entry } from './sorted-list.js';

export type JsonObject = { [key: string]: JsonValue };

export interface EventEntry extends Entry {
  /** Timestamp in ms. */
  readonly sortKey: number;
  /** When the event becomes visible (ms); later than `sortKey` for late events. */
  readonly visibleFrom: number;
  readonly eventName: string;
  readonly userId: string;
  readonly convoId: string;
  readonly userInput: string;
  readonly assistantOutput: string;
  /** The `signals` array as served. */
  readonly signals: readonly JsonValue[];
  readonly signalIds: readonly string[];
  readonly properties: JsonObject;
  readonly model: string;
  /** `feature_flags` (only later events carry it), present from the start. */
  readonly extras: JsonObject | undefined;
  /**
   * Fields the service adds after the event first appears (`topics`, `tool_calls`); `signals`,
   * `error_spans` and attachments are enrichment too (the SDK: "may be absent for very recent events").
   */
  readonly enrichment: JsonObject | undefined;
  /** Sorted by (start, span_id). Set once, right after the event is generated. */
  spans: readonly SpanEntry[];
}

export interface SpanEntry extends Entry {
  /** `start_time_ns`. */
  readonly sortKey: bigint;
  /** `span_id`. */
  readonly id: string;
  readonly event: EventEntry;
  readonly traceId: string;
  readonly parentSpanId: string | null;
  readonly spanName: string;
  readonly spanType: string;
  readonly status: string;
  readonly durationNs: number;
  readonly input: string;
  readonly output: string;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly provider: string | null;
  readonly attributes: JsonObject;
}

export interface SignalEntry extends Entry {
  /** `created_at` in ms. */
  readonly sortKey: number;
  readonly groupId: string | null;
  readonly record: ApiRecord;
}

export interface SignalGroupEntry extends Entry {
  /** `created_at` in ms. */
  readonly sortKey: number;
  readonly record: ApiRecord;
}

/** Derived from visible events; changes as events arrive (remove from its list before changing). */
export interface UserEntry extends Entry {
  /** `last_seen` in ms. */
  sortKey: number;
  readonly traits: JsonObject;
  firstSeen: number;
  eventCount: number;
}

/** Derived from visible events; changes as events arrive (remove from its list before changing). */
export interface ConvoEntry extends Entry {
  /** `last_message_at` in ms. */
  sortKey: number;
  readonly userId: string;
  startedAt: number;
  messageCount: number;
}

/** ISO-8601 with milliseconds and `Z`, e.g. `2026-11-20T10:00:00.123Z`. */
/**
 * `new Date(ms).toISOString()`, computed: every served record formats two or three instants, and
 * `toISOString` took about 1.4 µs a call, most of the emulator's time in a test's profile (a page of
 * 1,000 events, thousands of pages a test file). Instants outside years 1970–9999 or not whole
 * milliseconds go to `Date` as before.
 */
export function iso(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms >= LAST_MS) return new Date(ms).toISOString();
  const days = Math.floor(ms / DAY_MS);
  let rest = ms - days * DAY_MS;
  // The civil date of a day number (H. Hinnant's `civil_from_days`): eras of 400 years from 0000-03-01.
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const dayOfEra = z - era * 146_097;
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36_524) - Math.floor(dayOfEra / 146_096)) / 365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const fromMarch = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * fromMarch + 2) / 5) + 1;
  const month = fromMarch < 10 ? fromMarch + 3 : fromMarch - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  const hour = Math.floor(rest / 3_600_000);
  rest -= hour * 3_600_000;
  const minute = Math.floor(rest / 60_000);
  rest -= minute * 60_000;
  const second = Math.floor(rest / 1000);
  const milli = rest - second * 1000;
  return `${year < 1000 ? String(year).padStart(4, '0') : year}-${two(month)}-${two(day)}T${two(hour)}:${two(minute)}:${two(second)}.${milli < 10 ? `00${milli}` : milli < 100 ? `0${milli}` : milli}Z`;
}

const DAY_MS = 86_400_000;
/** 10000-01-01T00:00:00Z: `toISOString` writes years past 9999 with a sign and six digits. */
const LAST_MS = 253_402_300_800_000;
const two = (n: number): string => (n < 10 ? `0${n}` : `${n}`);

/**
 * The event as served. `enriched: false` leaves out what the service adds later (`signals`,
 * `topics`, attachments, `error_spans`, `tool_calls`); the rest never changes.
 */
export function eventRecord(event: EventEntry, enriched = true): ApiRecord {
  const record: JsonObject = {
    id: event.id,
    event_name: event.eventName,
    user_id: event.userId,
    convo_id: event.convoId,
    timestamp: iso(event.sortKey),
    received_at: iso(event.visibleFrom),
    user_input: event.userInput,
    assistant_output: event.assistantOutput,
    model: event.model,
  };
  if (enriched) {
    if (event.enrichment) Object.assign(record, event.enrichment);
    if (event.userInput.includes('(see attached)')) {
      record['input_attachments'] = [
        {
          attachment_id: `att_${event.id}`,
          attachment_type: 'image',
          name: 'screenshot.png',
          value: `https://files.example.com/${event.id}/screenshot.png`,
        },
      ];
    }
    record['signals'] = event.signals;
    record['error_spans'] = event.spans
      .filter((span) => span.status === 'ERROR')
      .map((span) => ({
        span_id: span.id,
        started_at: iso(Number(span.sortKey / 1_000_000n)),
        status: span.status,
        duration_ms: Math.round(span.durationNs / 1000) / 1000,
        span_type: span.spanType,
        span_name: span.spanName,
        output_payload: span.output,
      }));
  }
  if (event.extras) Object.assign(record, event.extras);
  record['properties'] = event.properties;
  return record;
}

/**
 * A span as served. `eventId` adds `event_id` (the spec flavor, where spans are also listed by time
 * and a client needs it to join them to their event; the real service has no such field).
 * `truncLen` cuts `input` and `output` to that many characters (`trunc_len`).
 */
export function spanRecord(span: SpanEntry, options: { eventId?: boolean; truncLen?: number } = {}): ApiRecord {
  const llm = LLM_SPAN_TYPES.has(span.spanType);
  const cut = (text: string): string => (options.truncLen === undefined ? text : text.slice(0, options.truncLen));
  const record: JsonObject = {
    trace_id: span.traceId,
    span_id: span.id,
    parent_span_id: span.parentSpanId,
    span_name: span.spanName,
    span_type: span.spanType,
    status: span.status,
    start_time_ns: span.sortKey,
    end_time_ns: span.sortKey + BigInt(span.durationNs),
    duration_ns: span.durationNs,
    input: cut(span.input),
    output: cut(span.output),
    input_tokens: span.inputTokens,
    output_tokens: span.outputTokens,
    total_tokens: span.inputTokens + span.outputTokens,
    model: llm ? span.event.model : null,
    provider: span.provider,
    attributes: span.attributes,
  };
  if (options.eventId === true) record['event_id'] = span.event.id;
  return record;
}

export function signalRecord(signal: SignalEntry): ApiRecord {
  return signal.record;
}

export function signalGroupRecord(group: SignalGroupEntry): ApiRecord {
  return group.record;
}

export function userRecord(user: UserEntry): ApiRecord {
  return {
    id: user.id,
    traits: user.traits,
    first_seen: iso(user.firstSeen),
    last_seen: iso(user.sortKey),
    event_count: user.eventCount,
  };
}

export function convoRecord(convo: ConvoEntry): ApiRecord {
  return {
    id: convo.id,
    user_id: convo.userId,
    started_at: iso(convo.startedAt),
    last_message_at: iso(convo.sortKey),
    message_count: convo.messageCount,
  };
}
