import type { Logger } from '../core/log.js';
import type { StreamResult } from '../sync/frame.js';
import { formatStreamLine, streamColumns, type StreamColumns } from './text.js';

/**
 * One line per distinct problem. A bad key fails every stream with the same 401, and a flaky
 * endpoint warns the same warning per page: the first occurrence is logged as it comes, the
 * repeats are counted, and `flush` logs one line with the count and where they came from. Two
 * messages are the same when they differ only in their "[resource x, project y]" prefix.
 */
export class RepeatedLogs {
  private readonly seen = new Map<string, { level: number; message: string; count: number; where: string[] }>();

  /** The logger's `admit` filter: warnings and errors seen before are counted, not logged. */
  readonly admit = (args: readonly unknown[], level: number): boolean => {
    if (level < WARN) return true;
    const [first, second] = args;
    const message = typeof first === 'string' ? first : typeof second === 'string' ? second : undefined;
    if (message === undefined) return true;
    const fields = typeof first === 'object' && first !== null ? (first as Record<string, unknown>) : {};
    const short = withoutContext(message);
    const key = `${level}|${short}`;
    const entry = this.seen.get(key);
    if (entry === undefined) {
      this.seen.set(key, { level, message: short, count: 0, where: [] });
      return true;
    }
    const where = [fields.resource, fields.project].filter((v): v is string => typeof v === 'string').join(' ');
    entry.count += 1;
    // Names kept are bounded: a warning repeated all night must not grow memory.
    if (entry.where.length < MAX_NAMES && !entry.where.includes(where))
      entry.where.push(where === '' ? '(no stream)' : where);
    return false;
  };

  /** Log one line per message that was repeated, then forget them. */
  flush(logger: Logger): void {
    const repeated = [...this.seen.values()].filter((e) => e.count > 0);
    this.seen.clear();
    for (const e of repeated) {
      const n = e.count;
      const kind = e.level >= ERROR ? 'error' : 'warning';
      const text = `the same ${kind} came ${n} more time${n === 1 ? '' : 's'} (${listed(e.where)}): ${e.message}`;
      // Logged afresh (its text differs), so the filter lets it through.
      if (e.level >= ERROR) logger.error({ repeated: n, streams: e.where }, text);
      else logger.warn({ repeated: n, streams: e.where }, text);
    }
  }
}

const WARN = 40;
/** Stream names kept per repeated message. */
const MAX_NAMES = 20;
const ERROR = 50;

/** At most 6 distinct names, then how many more (the count of repeats is in the line already). */
function listed(names: readonly string[]): string {
  const shown = names.slice(0, 6).join(', ');
  if (names.length <= 6) return shown;
  return `${shown} and ${names.length - 6}${names.length >= MAX_NAMES ? '+' : ''} more`;
}

/** A message without the "[resource x, project y]" prefix of `QuerySyncError`. */
export function withoutContext(message: string): string {
  // A project scope may itself hold brackets: `*[alpha,beta]`.
  return message.replace(/^\[(?:resource [^,\]]+)?(?:, )?(?:project (?:[^[\]]|\[[^\]]*\])*)?\]\s*/, '');
}

/**
 * The per-stream summary lines, then the run's verdict. A failure shared by several streams (the
 * same error but for the stream named in it) is printed once, as a note `[E1]` that those streams'
 * lines refer to; a failure of one stream stays on its line.
 */
export function summaryLines(
  streams: readonly StreamResult[],
  verdict: string,
  format?: (s: StreamResult, columns: StreamColumns) => string,
): string[] {
  const columns = streamColumns(streams);
  const line = (s: StreamResult): string =>
    format === undefined ? formatStreamLine(s, [], columns) : format(s, columns);
  const groups = new Map<string, { name: string; message: string; count: number; label?: string }>();
  const keyOf = (s: StreamResult): string | undefined =>
    s.outcome === 'ok' || s.error === undefined ? undefined : `${s.error.name}|${withoutContext(s.error.message)}`;
  for (const s of streams) {
    const key = keyOf(s);
    if (key === undefined || s.error === undefined) continue;
    const g = groups.get(key) ?? { name: s.error.name, message: withoutContext(s.error.message), count: 0 };
    g.count += 1;
    groups.set(key, g);
  }
  let n = 0;
  for (const g of groups.values()) if (g.count > 1) g.label = `E${++n}`;
  const lines = streams.map((s) => {
    const key = keyOf(s);
    const g = key === undefined ? undefined : groups.get(key);
    if (g?.label === undefined) return line(s);
    const ref = new Error(`[${g.label}] (below)`);
    return line({ ...s, error: ref });
  });
  for (const g of groups.values()) {
    if (g.label !== undefined) lines.push(`[${g.label}] ${g.name} in ${g.count} streams: ${g.message}`);
  }
  lines.push(verdict);
  return lines;
}
