/**
 * Round-robin over fairness lanes. A lane is a caller's own stream of requests (e.g. `events|alpha`);
 * lanes take turns so one large backfill cannot starve the others.
 */

/** A ring of keys with a cursor: the key at the cursor has the next turn. */
export class RoundRobin<K> {
  readonly #keys: K[] = [];
  #cursor = 0;

  get size(): number {
    return this.#keys.length;
  }

  has(key: K): boolean {
    return this.#keys.includes(key);
  }

  /** The key whose turn it is. */
  current(): K | undefined {
    return this.#keys[this.#cursor];
  }

  /**
   * Join just before the cursor: a newcomer gets its turn after every key already waiting has had
   * one. (Callers that paginate sequentially leave and rejoin all the time; joining at the cursor
   * would let them jump ahead of backlogs on every page.)
   */
  add(key: K): void {
    if (this.#keys.includes(key)) return;
    this.#keys.splice(this.#cursor, 0, key);
    if (this.#keys.length > 1) this.#cursor += 1;
  }

  /** Leave the ring without taking a turn from anyone. */
  delete(key: K): void {
    const index = this.#keys.indexOf(key);
    if (index < 0) return;
    this.#keys.splice(index, 1);
    if (index < this.#cursor) this.#cursor -= 1;
    if (this.#cursor >= this.#keys.length) this.#cursor = 0;
  }

  /** `key` was served: the turn passes to the key after it. */
  advancePast(key: K): void {
    const index = this.#keys.indexOf(key);
    if (index >= 0) this.#cursor = (index + 1) % this.#keys.length;
  }

  /** Keys in turn order, starting with the current one. */
  *inTurnOrder(): Generator<K> {
    const n = this.#keys.length;
    for (let i = 0; i < n; i += 1) {
      const key = this.#keys[(this.#cursor + i) % n];
      if (key !== undefined) yield key;
    }
  }
}

/** FIFO queues per lane, served round-robin across lanes. */
export class LaneQueues<T> {
  readonly #queues = new Map<string, T[]>();
  /** Each queued item's rank, index for index (see `push`). */
  readonly #ranks = new Map<string, number[]>();
  readonly #ring = new RoundRobin<string>();
  #size = 0;

  /** Items waiting across all lanes. */
  get size(): number {
    return this.#size;
  }

  /** The lane whose turn it is, if any lane has items. */
  currentLane(): string | undefined {
    return this.#ring.current();
  }

  peek(lane: string): T | undefined {
    return this.#queues.get(lane)?.[0];
  }

  /**
   * Queue `item` in `lane`: behind every item of equal or greater `rank` (FIFO among equals), ahead
   * of those of lower rank.
   */
  push(lane: string, item: T, rank = Number.POSITIVE_INFINITY): void {
    let queue = this.#queues.get(lane);
    let ranks = this.#ranks.get(lane);
    if (queue === undefined || ranks === undefined) {
      queue = [];
      ranks = [];
      this.#queues.set(lane, queue);
      this.#ranks.set(lane, ranks);
      this.#ring.add(lane);
    }
    let at = queue.length;
    while (at > 0 && (ranks[at - 1] as number) < rank) at -= 1;
    queue.splice(at, 0, item);
    ranks.splice(at, 0, rank);
    this.#size += 1;
  }

  /** Take the head of `lane` and pass the turn to the next lane. */
  shift(lane: string): T | undefined {
    const queue = this.#queues.get(lane);
    const item = queue?.shift();
    if (queue === undefined || item === undefined) return undefined;
    this.#ranks.get(lane)?.shift();
    this.#size -= 1;
    this.#ring.advancePast(lane);
    if (queue.length === 0) this.#dropLane(lane);
    return item;
  }

  /** Remove a waiting item (it was aborted) without passing any turn. */
  remove(lane: string, item: T): boolean {
    const queue = this.#queues.get(lane);
    const index = queue?.indexOf(item) ?? -1;
    if (queue === undefined || index < 0) return false;
    queue.splice(index, 1);
    this.#ranks.get(lane)?.splice(index, 1);
    this.#size -= 1;
    if (queue.length === 0) this.#dropLane(lane);
    return true;
  }

  /** Take every waiting item out, with its lane (the queue is empty after). */
  drain(): [string, T][] {
    const out: [string, T][] = [];
    for (const [lane, queue] of this.#queues) for (const item of queue) out.push([lane, item]);
    for (const lane of [...this.#queues.keys()]) this.#dropLane(lane);
    this.#size = 0;
    return out;
  }

  #dropLane(lane: string): void {
    this.#queues.delete(lane);
    this.#ranks.delete(lane);
    this.#ring.delete(lane);
  }
}
