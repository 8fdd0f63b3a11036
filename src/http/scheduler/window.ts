/**
 * A sliding log of request start times, the building block of every limit the scheduler enforces.
 *
 * Limits are sliding windows, so a fixed-window counter would either burst past the limit at a window
 * boundary or waste budget. Keeping the start times themselves lets the scheduler compute the exact
 * moment the next request may start: when enough old starts have left the window.
 */

export class SlidingLog {
  /** Start times in ascending order; entries before `#head` are forgotten. */
  #times: number[] = [];
  #head = 0;

  /** Starts still remembered. */
  get size(): number {
    return this.#times.length - this.#head;
  }

  /** Record a start (usually the latest; a restamped one may be later, so keep the order). */
  push(time: number): void {
    let at = this.#times.length;
    while (at > this.#head && (this.#times[at - 1] as number) > time) at -= 1;
    if (at === this.#times.length) this.#times.push(time);
    else this.#times.splice(at, 0, time);
  }

  /** A start recorded at `from` really happened at `to` (later): move it. No-op when none is at `from`. */
  restamp(from: number, to: number): void {
    const i = this.#firstAfter(from) - 1;
    if (i < this.#head || this.#times[i] !== from) return;
    this.#times.splice(i, 1);
    this.push(to);
  }

  /** Forget starts at or before `cutoff`: no window the caller asks about can hold them any more. */
  forgetThrough(cutoff: number): void {
    this.#head = this.#firstAfter(cutoff);
    // Compact once most of the array is dead, so memory stays bounded by the window, not the run.
    if (this.#head > 64 && this.#head * 2 > this.#times.length) {
      this.#times = this.#times.slice(this.#head);
      this.#head = 0;
    }
  }

  /** Starts that a window of `windowMs` ending at `now` holds: those with `start > now - windowMs`. */
  countWithin(now: number, windowMs: number): number {
    return this.#times.length - this.#firstAfter(now - windowMs);
  }

  /** The starts a window of `windowMs` ending at `now` holds, oldest first (a copy). */
  startsWithin(now: number, windowMs: number): number[] {
    return this.#times.slice(this.#firstAfter(now - windowMs));
  }

  /**
   * The earliest time, not before `now`, at which a window of `windowMs` holds fewer than `limit`
   * starts, assuming no further starts. A start at `s` stops counting at `s + windowMs`.
   */
  nextFreeAt(now: number, windowMs: number, limit: number): number {
    const first = this.#firstAfter(now - windowMs);
    const inWindow = this.#times.length - first;
    if (inWindow < limit) return now;
    // Once this start leaves the window, `limit - 1` remain: one more may start.
    const leaving = this.#times[this.#times.length - limit];
    return leaving === undefined ? now : leaving + windowMs;
  }

  /** Index of the first remembered start later than `cutoff` (binary search; times ascend). */
  #firstAfter(cutoff: number): number {
    let low = this.#head;
    let high = this.#times.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      const time = this.#times[mid];
      if (time !== undefined && time <= cutoff) low = mid + 1;
      else high = mid;
    }
    return low;
  }
}
