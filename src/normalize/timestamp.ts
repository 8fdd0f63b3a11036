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

/**
 * Already canonical (`2026-11-20T10:00:00.123Z`, the API's usual shape): then only the date and
 * time fields need checking, and the value is its own canonical text. Years below 1000 take the
 * general path (Date.UTC reads years 0–99 as 1900–1999, which that path keeps).
 */
const CANONICAL = /^[1-9]\d{3}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{0,5}[1-9])?Z$/;

/** The number written by the two digits at `at`. */
const twoDigits = (value: string, at: number): number =>
  (value.charCodeAt(at) - 48) * 10 + value.charCodeAt(at + 1) - 48;

/** The canonical UTC text of an ISO-8601 instant with an offset, or `undefined` when it is not one. */
export function canonicalTimestamp(value: string): string | undefined {
  if (CANONICAL.test(value)) {
    const year = twoDigits(value, 0) * 100 + twoDigits(value, 2);
    const month = twoDigits(value, 5);
    const day = twoDigits(value, 8);
    if (
      month >= 1 &&
      month <= 12 &&
      day >= 1 &&
      day <= gregorianDaysIn(year, month) &&
      twoDigits(value, 11) <= 23 &&
      twoDigits(value, 14) <= 59 &&
      twoDigits(value, 17) <= 59
    )
      return value;
    return undefined;
  }
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

/** Days in `month` (1–12) of `year` in the Gregorian calendar, without a Date. */
function gregorianDaysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}
