import type { JobMetadata } from '@google-cloud/bigquery';
import type { BillingTotals } from '../destination.js';

/**
 * What the BigQuery jobs of one destination (one run) were billed, from each DONE job's own
 * statistics (`statistics.query.totalBytesBilled`, what on-demand pricing charges, after the 10 MB
 * minimum per table referenced; `totalBytesProcessed` beside it). Load jobs carry no query
 * statistics and cost nothing; a script job (a MERGE with the state in one transaction) reports
 * the total of its child jobs (BigQuery's term). A job adopted after a lost response (409) is
 * counted once, when it is seen DONE; a failed job is not counted (BigQuery does not bill a query
 * that fails before it reads).
 */
export class BillingTally {
  private bytesBilled = 0;
  private bytesProcessed = 0;
  private queryJobs = 0;
  private readonly byTable = new Map<string, number>();

  /** Count one DONE job; `table` is the resource (or query-sync table) it was run for. */
  add(table: string | undefined, metadata: JobMetadata): void {
    const query = metadata.statistics?.query;
    if (query === undefined || query === null) return;
    const billed = numeric(query.totalBytesBilled);
    this.queryJobs += 1;
    this.bytesBilled += billed;
    this.bytesProcessed += numeric(query.totalBytesProcessed);
    if (table !== undefined) this.byTable.set(table, (this.byTable.get(table) ?? 0) + billed);
  }

  totals(): BillingTotals {
    return {
      bytesBilled: this.bytesBilled,
      bytesProcessed: this.bytesProcessed,
      queryJobs: this.queryJobs,
      byTable: Object.fromEntries([...this.byTable].sort(([, a], [, b]) => b - a)),
    };
  }
}

/** BigQuery sends int64 statistics as decimal strings. */
function numeric(value: string | number | null | undefined): number {
  const n = value === undefined || value === null ? 0 : Number(value);
  return Number.isFinite(n) ? n : 0;
}
