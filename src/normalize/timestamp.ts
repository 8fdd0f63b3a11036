/**
 * One canonical form for every instant the warehouse stores: `YYYY-MM-DDTHH:MM:SS[.ffffff]Z`, in
 * UTC, at most six fractional digits (microseconds: the precision of both BigQuery's TIMESTAMP and
 * DuckDB's TIMESTAMPTZ; further digits are cut, never rounded, so both agree on the instant).
 *
 * Why: the API writes valid ISO-8601 in several shapes (`…T00:00Z` without seconds, `+0530`
 * without a colon, `+05`, nine fractional digits), and BigQuery's JSON loader refuses some of them
 * (https://cloud.google.com/bigquery/docs/loading-data-cloud-storage-json: the time part must be
 * `hh:mm:ss`; offsets are `(+|-)H[H][:M[M]]` per
 * https://cloud.google.com/bigquery/docs/reference/standard-sql/data-types#timestamp_type). A
 * refused value fails the whole batch (no bad records allowed) at the same place every run.
 */

const ISO = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|z|[+-]\d{2}(?::?\d{2})?)$/;

/** The canonical UTC text of an ISO-8601 instant with an offset, or `undefined` when it is not one. */
export function canonicalTimestamp(value: string): string | undefined {
  const m = ISO.exec(value);
  if (m === null) return undefined;
  const [, y, mo, d, h, mi, s = '00', fraction = '', zone = 'Z'] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  // Real calendar dates only: Date.UTC would roll 2026-02-30 over into March.
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || second > 59) {
    return undefined;
  }
  let offsetMinutes = 0;
  if (zone !== 'Z' && zone !== 'z') {
    const sign = zone.startsWith('-') ? -1 : 1;
    const digits = zone.slice(1).replace(':', '');
    const oh = Number(digits.slice(0, 2));
    const om = digits.length > 2 ? Number(digits.slice(2, 4)) : 0;
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = sign * (oh * 60 + om);
  }
  const ms = Date.UTC(year, month - 1, day, hour, minute, second) - offsetMinutes * 60_000;
  if (!Number.isFinite(ms)) return undefined;
  const whole = new Date(ms).toISOString().slice(0, 19);
  const micros = fraction.slice(0, 6).replace(/0+$/, '');
  return `${whole}${micros.length > 0 ? `.${micros}` : ''}Z`;
}

function daysIn(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}
