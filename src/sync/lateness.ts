import type { ResourceDefinition, Row } from '../core/types.js';
import type { Lateness } from '../state/store.js';

/**
 * Receipt delay of the records a run stored (`arrivalField` − cursor field), in log-spaced buckets
 * (10 % wide): bounded memory whatever the run's size, quantiles within a bucket's width.
 */
export class LatenessHistogram {
  private readonly buckets = new Map<number, number>();
  private count = 0;
  private maxMs = 0;

  constructor(private readonly resource: ResourceDefinition) {}

  add(rows: readonly Row[]): void {
    for (const row of rows) {
      const received = Date.parse(String(row[this.resource.arrivalField ?? '']));
      const at = Date.parse(String(row[this.resource.cursorField ?? '']));
      if (Number.isNaN(received) || Number.isNaN(at)) continue;
      const ms = Math.max(0, received - at);
      const bucket = ms < 1 ? 0 : Math.ceil(Math.log(ms) / Math.log(1.1));
      this.buckets.set(bucket, (this.buckets.get(bucket) ?? 0) + 1);
      this.count += 1;
      this.maxMs = Math.max(this.maxMs, ms);
    }
  }

  summary(nowMs: number): Lateness | undefined {
    if (this.count === 0) return undefined;
    const sorted = [...this.buckets.entries()].sort((a, b) => a[0] - b[0]);
    const quantile = (q: number): number => {
      let seen = 0;
      for (const [bucket, n] of sorted) {
        seen += n;
        if (seen >= q * this.count) return bucket === 0 ? 0 : Math.min(this.maxMs, Math.round(1.1 ** bucket));
      }
      return this.maxMs;
    };
    return {
      at: new Date(nowMs).toISOString(),
      records: this.count,
      p50Ms: quantile(0.5),
      p99Ms: quantile(0.99),
      maxMs: this.maxMs,
    };
  }
}
