/**
 * `npm run bench:bridge`: what the event_signals bridge costs a DuckDB write. Writes 30,000
 * events (a third with two signals) in 5,000-row batches into a fresh file at the default memory
 * limit, with and without the bridge, and prints the seconds of each run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { events } from '../connectors/events.js';
import type { ApiRecord, ResourceDefinition } from '../src/core/types.js';
import { DuckDbDestination } from '../src/load/duckdb/destination.js';
import { SchemaTracker } from '../src/normalize/normalize.js';

const ROWS = Number(process.env.BENCH_ROWS ?? 30_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 5_000);

async function run(resource: ResourceDefinition): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'bridge-bench-'));
  const db = await DuckDbDestination.open(join(dir, 'w.duckdb'));
  const tracker = new SchemaTracker(resource, undefined, 'bench');
  const started = performance.now();
  for (let from = 0; from < ROWS; from += BATCH) {
    const records: ApiRecord[] = [];
    for (let i = from; i < from + BATCH; i++) {
      records.push({
        id: `e${i}`,
        timestamp: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(),
        user_input: 'x'.repeat(200),
        signals:
          i % 3 === 0
            ? [
                { id: 's1', name: 'one', score: 0.5 },
                { id: 's2', name: 'two', score: 0.25 },
              ]
            : [],
      });
    }
    const rows = records.map((r) => tracker.normalize(r, 'default', '2026-01-01T00:00:00.000Z'));
    await db.write({ table: tracker.schema, rows });
  }
  const seconds = (performance.now() - started) / 1000;
  await db.close();
  rmSync(dir, { recursive: true, force: true });
  return seconds;
}

const { bridges: _unused, ...withoutBridge } = events;
for (const [label, resource] of [
  ['with event_signals', events],
  ['without', withoutBridge as ResourceDefinition],
] as const) {
  console.log(`${label.padEnd(20)} ${(await run(resource)).toFixed(2)} s for ${ROWS} events in ${ROWS / BATCH} writes`);
}
