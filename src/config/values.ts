import { parseDuration } from '../core/duration.js';
import { ConfigError } from '../core/errors.js';
import type { SavedSearch } from '../core/types.js';
import { bytesOf } from './size.js';

/**
 * The values a setting can take, parsed and checked: numbers, durations, sizes, instants, lists and
 * saved searches. Pure (no environment, no files): `config/index.ts` reads where each value came from and
 * passes its label, which every message names.
 */

export function parseNumber(label: string, text: string, integer: boolean): number {
  const n = /^\s*\d+(\.\d+)?\s*$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) {
    throw new ConfigError(
      `${label}: expected a ${integer ? 'whole number of at least 1' : 'positive number'}, got "${text}"`,
    );
  }
  return n;
}

/**
 * A duration with its unit. A bare number is refused (it used to mean milliseconds, so
 * `--window 1` read 1 ms); a bare `0` is accepted, having no unit to get wrong.
 */
export function parseStrictDuration(label: string, text: string): number {
  const t = text.trim();
  if (/^0+(\.0+)?$/.test(t)) return 0;
  if (/^\d+(\.\d+)?$/.test(t)) {
    throw new ConfigError(
      `${label}: "${text}" has no unit; write it with one, e.g. ${t}s, ${t}m, ${t}h or ${t}d (units: ms, s, m, h, d, w)`,
    );
  }
  if (!/^\d+(\.\d+)?\s*(ms|s|m|h|d|w)$/.test(t)) {
    throw new ConfigError(`${label}: expected a duration with a unit such as 500ms, 30s, 15m, 1h or 1d, got "${text}"`);
  }
  return parseDuration(t);
}

/** A size with its unit, as DuckDB reads it (`32MB`, `1GB`, `512MiB`), in bytes (`config/size.ts`). */
export function parseSize(label: string, text: string): number {
  const t = text.trim();
  if (/^\d+(\.\d+)?$/.test(t))
    throw new ConfigError(
      `${label}: "${text}" has no unit; write it with one, e.g. ${t}MB or ${t}GB (units: KB, MB, GB, TB, KiB, MiB, GiB)`,
    );
  const bytes = bytesOf(t);
  if (bytes === undefined)
    throw new ConfigError(`${label}: expected a size with a unit such as 32MB or 1GB, got "${text}"`);
  return bytes;
}

const INSTANT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2})$/;

/**
 * An ISO-8601 instant that names its offset (`Z` or `±hh:mm`) and a real calendar date and time:
 * `2026-02-30` (which `Date.parse` turns into 2 March) and a time without an offset (which it reads
 * in the machine's zone) are refused.
 */
export function parseInstant(label: string, text: string): number {
  const m = INSTANT.exec(text.trim());
  const example = '2026-01-01T00:00:00Z or 2026-01-01T09:00:00+09:00';
  if (m === null) {
    const hint = /^\d{4}-\d{2}-\d{2}(T[\d:.]+)?$/.test(text.trim())
      ? ' (it has no offset: add Z for UTC, or +hh:mm)'
      : '';
    throw new ConfigError(
      `${label}: expected an ISO-8601 instant with its offset, such as ${example}, got "${text}"${hint}`,
    );
  }
  const [y, mo, d, h, mi, s] = [m[1], m[2], m[3], m[4], m[5], m[6] ?? '0'].map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const real = new Date(Date.UTC(y, mo - 1, d, h, mi, s));
  if (
    real.getUTCFullYear() !== y ||
    real.getUTCMonth() !== mo - 1 ||
    real.getUTCDate() !== d ||
    real.getUTCHours() !== h ||
    real.getUTCMinutes() !== mi ||
    real.getUTCSeconds() !== s
  ) {
    throw new ConfigError(
      `${label}: "${text}" is not a real date and time (no such day or hour); expected e.g. ${example}`,
    );
  }
  return Date.parse(text.trim());
}

export function splitList(text: string): string[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

export function emptyToUndefined(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

/** The search modes of `/v1/events/search` (SDK). */
const SEARCH_MODES = ['text', 'semantic', 'regex'] as const;
/** Fields `search_in` takes (SDK and field notes). */
const SEARCH_FIELDS = ['user_input', 'assistant_output'] as const;
/** A trailing `,mode=…`, `,search_in=…` or `,threshold=…` (values hold no `=`; `search_in` may list fields with commas). */
const SEARCH_OPTION = /,(mode|search_in|threshold)=([^=]*)$/;

/**
 * `--search name=query[,mode=…][,search_in=…][,threshold=…]`, one a line (the flag repeated, a
 * list in a config file). The query is everything between the first `=` and the options at the end,
 * so it may hold commas.
 */
export function parseSearches(label: string, text: string | undefined): SavedSearch[] | undefined {
  if (text === undefined) return undefined;
  const out: SavedSearch[] = [];
  for (const line of text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')) {
    const eq = line.indexOf('=');
    const name = eq < 0 ? '' : line.slice(0, eq).trim();
    if (!/^[A-Za-z0-9][A-Za-z0-9_-]*$/.test(name)) {
      throw new ConfigError(
        `${label}: expected name=query[,mode=text|semantic|regex][,search_in=user_input,assistant_output] with a name of letters, digits, - and _, got "${line}"`,
      );
    }
    let rest = line.slice(eq + 1);
    const options: Record<string, string> = {};
    for (let m = SEARCH_OPTION.exec(rest); m !== null; m = SEARCH_OPTION.exec(rest)) {
      options[m[1] as string] = (m[2] as string).trim();
      rest = rest.slice(0, m.index);
    }
    const query = rest.trim();
    if (query === '') throw new ConfigError(`${label}: search "${name}" has an empty query (expected name=query)`);
    const mode = options.mode ?? 'text';
    if (!(SEARCH_MODES as readonly string[]).includes(mode))
      throw new ConfigError(
        `${label}: search "${name}": mode must be one of ${SEARCH_MODES.join(', ')}, got "${mode}"`,
      );
    const searchIn = options.search_in === undefined ? undefined : splitList(options.search_in);
    const badField = searchIn?.find((f) => !(SEARCH_FIELDS as readonly string[]).includes(f));
    if (searchIn !== undefined && (badField !== undefined || searchIn.length === 0)) {
      throw new ConfigError(
        `${label}: search "${name}": search_in takes ${SEARCH_FIELDS.join(', ')} (comma-separated), got "${options.search_in ?? ''}"`,
      );
    }
    const threshold = options.threshold === undefined ? undefined : Number(options.threshold);
    if (threshold !== undefined && !(Number.isFinite(threshold) && threshold >= 0 && threshold <= 1)) {
      throw new ConfigError(
        `${label}: search "${name}": threshold must be a number from 0 to 1, got "${options.threshold ?? ''}"`,
      );
    }
    if (out.some((s) => s.name === name))
      throw new ConfigError(`${label}: two searches are named "${name}"; each name is one search in search_results`);
    out.push({
      name,
      query,
      mode: mode as SavedSearch['mode'],
      ...(searchIn === undefined ? {} : { searchIn }),
      ...(threshold === undefined ? {} : { threshold }),
    });
  }
  return out;
}
