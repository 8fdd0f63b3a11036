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
 * `version`: the table then says its format from its first commit on.
 */
export function rowsOfChange(before: StateDocument, after: StateDocument): StateRow[] {
  const old = entries(before);
  const rows: StateRow[] = [];
  for (const [key, value] of entries(after)) {
    if (old.get(key) !== value || key === 'version') rows.push({ key, value });
    old.delete(key);
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
  out.set('version', JSON.stringify(doc.version));
  out.set('projects', JSON.stringify(doc.projects));
  for (const [key, stream] of Object.entries(doc.streams)) out.set(`${STREAM}${key}`, JSON.stringify(stream));
  for (const [name, section] of Object.entries(doc.sections)) {
    if (section !== undefined) out.set(`${SECTION}${name}`, JSON.stringify(section));
  }
  return out;
}
