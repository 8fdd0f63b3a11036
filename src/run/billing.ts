import type { BillingTotals } from '../load/destination.js';

/**
 * Bytes billed in the run summary. Only for a destination that bills queries (BigQuery): DuckDB's
 * summary is unchanged.
 */

/** The text summary's line, e.g. `BigQuery: 1.23 GB billed by 14 query jobs (users 448.4 MB, …)`. */
export function billingLine(billing: BillingTotals | undefined): string[] {
  if (billing === undefined) return [];
  const tables = Object.entries(billing.byTable).filter(([, bytes]) => bytes > 0);
  const shown = tables.slice(0, 6).map(([table, bytes]) => `${table} ${formatBytes(bytes)}`);
  if (tables.length > shown.length) shown.push(`${tables.length - shown.length} more`);
  return [
    `BigQuery: ${formatBytes(billing.bytesBilled)} billed by ${billing.queryJobs} query job(s)${shown.length === 0 ? '' : ` (${shown.join(', ')})`}`,
  ];
}

/** The `--json` summary's fields. */
export function billingJson(billing: BillingTotals | undefined): {
  readonly bytesBilled?: number;
  readonly bytesBilledByTable?: Readonly<Record<string, number>>;
} {
  return billing === undefined ? {} : { bytesBilled: billing.bytesBilled, bytesBilledByTable: billing.byTable };
}

/** Binary units, as BigQuery's console shows them (1 MB = 2^20 bytes). */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : 2)} ${units[unit] ?? ''}`;
}
