import { StateError } from '../core/errors.js';
import type { StateRow } from '../core/state-table.js';
import type { StateDocument } from './document.js';

/**
 * The state document as rows of `_query_sync_state`, one per key, so that writers of different
 * keys never overwrite each other: `version`, `projects`, `stream:<resource>:<scope>`,
 * `section:<name>`. Values are JSON text.
 */

const STREAM = 'stream:';
const SECTION = 'section:';

/** Every key of a document. */
export function rowsOfDocument(doc: StateDocument): StateRow[] {
  return [...entries(doc)].map(([key, value]) => ({ key, value }));
}

/**
 * The rows that differ between two documents (a key gone is a `null` value: deleted), and always
 * `version`: the table then says its format from its first commit on. Changes replace what they
 * change and keep the rest (`state/batch.ts`), so an entry that is the same object in both is the
 * same row and is not serialized again: a backfill's commit serializes its ledger once, not every
 * stream and section twice.
 */
export function rowsOfChange(before: StateDocument, after: StateDocument): StateRow[] {
  const old = new Map(entryValues(before));
  const rows: StateRow[] = [];
  for (const [key, value] of entryValues(after)) {
    const was = old.get(key);
    old.delete(key);
    if (key !== 'version' && was !== undefined && was === value) continue;
    const text = serialized(value);
    if (key === 'version' || was === undefined || serialized(was) !== text) rows.push({ key, value: text });
  }
  for (const key of old.keys()) rows.push({ key, value: null });
  return rows;
}

/**
 * The document the rows hold, to be validated by the caller (rows come from outside). `where`
 * names the table in a message.
 */
export function documentFromRows(rows: readonly StateRow[], where: string): Record<string, unknown> {
  const streams: Record<string, unknown> = {};
  const sections: Record<string, unknown> = {};
  let version: unknown;
  let projects: unknown = [];
  for (const row of rows) {
    if (row.value === null) continue;
    let value: unknown;
    try {
      value = JSON.parse(row.value);
    } catch (error) {
      throw new StateError(
        `${where}: key "${row.key}": expected JSON text, got ${row.value.slice(0, 80)} (${(error as Error).message}). ` +
          `Nothing was changed and no stream was read; correct or delete that row.`,
      );
    }
    if (row.key === 'version') version = value;
    else if (row.key === 'projects') projects = value;
    else if (row.key.startsWith(STREAM)) streams[row.key.slice(STREAM.length)] = value;
    else if (row.key.startsWith(SECTION)) sections[row.key.slice(SECTION.length)] = value;
    // Keys of a newer format are kept out of the document; this build does not write them.
  }
  return { version, streams, projects, sections };
}

function entries(doc: StateDocument): Map<string, string> {
  const out = new Map<string, string>();
  for (const [key, value] of entryValues(doc)) out.set(key, JSON.stringify(value));
  return out;
}

/**
 * The JSON text of a state value, kept per object: state is changed by replacing objects, never by
 * mutating them, so the text of the ledger a commit wrote is the "before" of the next commit's.
 */
const texts = new WeakMap<object, string>();
function serialized(value: unknown): string {
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  let text = texts.get(value);
  if (text === undefined) {
    text = JSON.stringify(value);
    texts.set(value, text);
  }
  return text;
}

/** Every key of a document with its value, not yet serialized. */
function* entryValues(doc: StateDocument): Generator<[string, unknown]> {
  yield ['version', doc.version];
  yield ['projects', doc.projects];
  for (const [key, stream] of Object.entries(doc.streams)) yield [`${STREAM}${key}`, stream];
  for (const [name, section] of Object.entries(doc.sections)) {
    if (section !== undefined) yield [`${SECTION}${name}`, section];
  }
}
