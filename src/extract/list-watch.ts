import type { ApiRecord, JsonValue, ResourceDefinition } from '../core/types.js';

/**
 * What one walk's records and answers showed of its list (docs/list-semantics.md): nothing about a
 * list's order, page size or cursors is taken on trust, it is read from what comes back.
 */
export interface ListObservation {
  /**
   * The order the records came in, as `order_by` would name it (`"-last_message_at"`), once two
   * records proved it; `"unordered"` when they contradicted every candidate field.
   */
  readonly order?: string;
  /** Records contradicted the order on the cursor field (the walk read the whole list). */
  readonly orderBroken?: boolean;
  /** Most records a page held while the server said there were more, below the `limit` asked. */
  readonly pageCap?: number;
  /** The server's cursors counted records (offsets). */
  readonly offsetCursor?: boolean;
  readonly evidence?: string;
  /** What could not be proven exact in this walk (the run then fails, naming it). */
  readonly inexact?: string;
}

function instantMs(value: JsonValue | undefined): number | undefined {
  if (typeof value !== 'string') return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

/** One field's order as the records show it: newest first still possible, and values that differed. */
class FieldOrder {
  desc = true;
  distinct = false;
  private last: number | undefined;

  constructor(readonly field: string) {}

  see(record: ApiRecord): void {
    const ms = instantMs(record[this.field]);
    if (ms === undefined) return;
    if (this.last !== undefined && ms !== this.last) {
      this.distinct = true;
      if (ms > this.last) this.desc = false;
    }
    this.last = ms;
  }
}

/**
 * Learns, from the records of one walk, whether the list comes newest first by its cursor field.
 * Proof needs two different values in that order and, where the list has other fields it could be
 * sorted by (`orderCandidates`), a record that tells them apart: a quiet list whose conversations
 * never overlap looks sorted by `started_at` and `last_message_at` alike, and proves neither.
 */
export class OrderLearner {
  private readonly cursor: FieldOrder;
  private readonly others: FieldOrder[];

  constructor(resource: ResourceDefinition) {
    this.cursor = new FieldOrder(resource.cursorField ?? '');
    this.others = (resource.orderCandidates ?? []).map((f) => new FieldOrder(f));
  }

  see(records: readonly ApiRecord[]): void {
    for (const record of records) {
      this.cursor.see(record);
      for (const other of this.others) other.see(record);
    }
  }

  /** Newest first by the cursor field, told apart from every other candidate. */
  get proven(): boolean {
    return this.cursor.desc && this.cursor.distinct && this.others.every((o) => !o.desc);
  }

  get broken(): boolean {
    return !this.cursor.desc;
  }

  observation(): ListObservation {
    if (this.proven) {
      return {
        order: `-${this.cursor.field}`,
        evidence: `records came newest first by ${this.cursor.field} and not by ${this.others.map((o) => o.field).join(' or ') || 'anything else'}`,
      };
    }
    if (!this.broken) return {};
    const follows = this.others.find((o) => o.desc && o.distinct);
    return {
      order: follows === undefined ? 'unordered' : `-${follows.field}`,
      orderBroken: true,
      evidence: `a record with a newer ${this.cursor.field} came after an older one${follows === undefined ? '' : `; records came newest first by ${follows.field}`}`,
    };
  }
}

/** A cursor that counts records: a plain non-negative integer. */
export function offsetOf(cursor: string | null): number | undefined {
  return cursor !== null && /^\d{1,15}$/.test(cursor) ? Number(cursor) : undefined;
}

/** A record's identity across pages: its project (all-projects reads) and key. */
export function recordIdentity(resource: ResourceDefinition, record: ApiRecord): string {
  return `${String(record['project_id'] ?? '')}\u0000${String(record[resource.key] ?? '')}`;
}
