import type { Emulator } from '../../emulator/index.js';
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
