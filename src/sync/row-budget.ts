/**
 * Rows a stream's split parts hold at once, together: the pages they have asked for or read and
 * whose rows are not yet durable. A part takes a page's worth before asking for a page (the one it
 * fetches ahead while its batch is written included) and gives it back once the page's rows are
 * stored.
 *
 * Why: each part's batch is its share of `--batch-rows` (5,000 / 16 parts), but a part holds whole
 * pages whatever its share, and one more fetched ahead: 16 traces parts held up to 32 pages of
 * 1,000 spans (a third of a 100,000-span first sync) where the share meant 5,000 rows, most of the
 * sync's peak memory. With the budget the parts hold about `--batch-rows` together, as a backfill's
 * windows do. At a real server's latency it seldom binds (a page of 100 records is 1/50 of it).
 *
 * A part that cannot take a page's worth first writes what it holds (so that what is held is always
 * on its way to being released: no part waits on another that waits), then waits. Waiters are
 * served in order.
 */
export class RowBudget {
  private held = 0;
  private readonly waiting: { readonly rows: number; readonly resolve: () => void }[] = [];

  constructor(readonly capacity: number) {}

  /** What taking `rows` counts: a page larger than the whole budget takes all of it. */
  size(rows: number): number {
    return Math.max(1, Math.min(rows, this.capacity));
  }

  /** Take `rows` at once if there is room (and no one waits before), returning what was taken; else `undefined`. */
  tryTake(rows: number): number | undefined {
    const n = this.size(rows);
    if (this.waiting.length > 0 || this.held + n > this.capacity) return undefined;
    this.held += n;
    return n;
  }

  /** Take `rows` once there is room; resolves with what was taken. */
  async take(rows: number): Promise<number> {
    const n = this.size(rows);
    if (this.tryTake(n) !== undefined) return n;
    await new Promise<void>((resolve) => this.waiting.push({ rows: n, resolve }));
    return n;
  }

  /** Give back `n` (what `take` or `tryTake` returned), and let the waiters that now fit in. */
  give(n: number): void {
    if (n <= 0) return;
    this.held -= n;
    for (;;) {
      const first = this.waiting[0];
      if (first === undefined || this.held + first.rows > this.capacity) return;
      this.waiting.shift();
      this.held += first.rows;
      first.resolve();
    }
  }
}
