import { events } from '../../connectors/events.js';
import { traces } from '../../connectors/traces.js';
import { PIPELINE_DEFAULTS } from '../../src/config/index.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { owedQuery } from '../../src/sync/traces/queue.js';
import { workingPathForReading } from '../../src/publish/layout.js';

/**
 * Events of a DuckDB warehouse that still owe their traces, per project, as the warehouse's trace
 * book says (the owed set a sync drains), at the default `--settle`. Open it only once no run holds it.
 */
export async function owedTraces(
  dbPath: string,
  settleMs: number = PIPELINE_DEFAULTS.sync.settleMs,
): Promise<Readonly<Record<string, number>>> {
  const db = await DuckDbDestination.open(workingPathForReading(dbPath));
  try {
    return await db.countOwedTraces(owedQuery(traces, events, { selection: 'all', settleMs }, Date.now()));
  } finally {
    await db.close();
  }
}
