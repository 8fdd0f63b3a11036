/**
 * Opaque page cursors: base64url JSON of the keyset position of the last row served, the walk
 * direction and the resource. A position (not an offset) keeps a walk stable while new records are
 * inserted: it never repeats or skips a record that existed when the walk started.
 */

import type { Direction, Position } from './sorted-list.js';

export interface CursorState {
  readonly resource: string;
  readonly direction: Direction;
  readonly position: Position;
}

interface CursorJson {
  readonly r: string;
  readonly d: 'a' | 'd';
  readonly t: 'n' | 'b';
  readonly k: string;
  readonly i: string;
  readonly p: string;
}

export function encodeCursor(state: CursorState): string {
  const { sortKey, id, project } = state.position;
  const json: CursorJson = {
    r: state.resource,
    d: state.direction === 'asc' ? 'a' : 'd',
    t: typeof sortKey === 'bigint' ? 'b' : 'n',
    k: sortKey.toString(),
    i: id,
    p: project,
  };
  return Buffer.from(JSON.stringify(json), 'utf8').toString('base64url');
}

/** The cursor's state, or `undefined` when it is malformed or belongs to another resource. */
export function decodeCursor(text: string, resource: string): CursorState | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(text)) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const json = parsed as Partial<Record<keyof CursorJson, unknown>>;
  const { r, d, t, k, i, p } = json;
  if (r !== resource || (d !== 'a' && d !== 'd') || (t !== 'n' && t !== 'b')) return undefined;
  if (typeof k !== 'string' || typeof i !== 'string' || typeof p !== 'string') return undefined;
  if (!/^-?\d+$/.test(k)) return undefined;
  const sortKey = t === 'b' ? BigInt(k) : Number(k);
  if (typeof sortKey === 'number' && !Number.isSafeInteger(sortKey)) return undefined;
  return { resource, direction: d === 'a' ? 'asc' : 'desc', position: { sortKey, id: i, project: p } };
}
