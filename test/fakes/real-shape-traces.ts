import { expect } from 'vitest';
import type { Emulator } from '../../emulator/index.js';
import type { ApiRecord } from '../../src/core/types.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { expectTableMatches, readTable } from './harness.js';
import { emulator } from './lifecycle.js';

/**
 * The real service's traces shape (spans read one event at a time, `event_id` required) for the
 * traces-owed tests: test/integration/traces-owed.test.ts (in process) and traces-owed-cli.test.ts
 * (through the CLI).
 */
export const realShape = (seed: number): Promise<Emulator> =>
  emulator({ flavor: 'real', seed, eventsPerProject: 120, projects: ['default'], enrichAfterMs: 0 });

export const traceReads = (emu: Emulator): number => emu.stats().byEndpoint['/v1/traces'] ?? 0;

/** Every span of the emulator's one project is in the warehouse, once. */
export async function expectEverySpan(emu: Emulator, d: string): Promise<void> {
  expectTableMatches(await readTable(d, 'traces'), emu.snapshot('traces', 'default'), 'span_id', 'traces');
}

/** Take events (and what hangs off them) out of the warehouse, as if they had never been stored. */
export async function forgetEvents(path: string, ids: readonly string[]): Promise<void> {
  const db = await DuckDbDestination.open(path);
  try {
    const list = ids.map((id) => `'${id}'`).join(', ');
    await db.query(`DELETE FROM events WHERE id IN (${list})`);
    await db.query(`DELETE FROM traces WHERE event_id IN (${list})`);
    await db.query(`DELETE FROM _query_sync_children WHERE parent_id IN (${list})`);
  } finally {
    await db.close();
  }
}

/** A day in milliseconds. */
export const DAY_MS = 86_400_000;

/**
 * The emulator's events, and the ones a repair test takes out of the warehouse: six older ones for
 * `verify --repair` (outside reconcile's recent two days) and up to four of the last day for
 * reconcile's repair.
 */
export function eventsToForget(emu: Emulator): {
  readonly all: ApiRecord[];
  readonly now: number;
  readonly old: ApiRecord[];
  readonly recent: ApiRecord[];
} {
  const all = emu.snapshot('events', 'default');
  const now = Date.now();
  const old = all.filter((e) => Date.parse(String(e.timestamp)) < now - 5 * DAY_MS).slice(0, 6);
  const recent = all.filter((e) => Date.parse(String(e.timestamp)) > now - DAY_MS).slice(0, 4);
  expect(old.length).toBe(6);
  expect(recent.length).toBeGreaterThan(0);
  return { all, now, old, recent };
}
