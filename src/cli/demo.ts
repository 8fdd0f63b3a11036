import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { syncCommand } from './commands/sync.js';
import { resolveSyncConfig } from '../config/index.js';
import { SPEC_RATE_LIMITS } from '../../emulator/index.js';
import { startEmulatorThread } from '../../emulator/thread.js';
import { DuckDbDestination } from '../load/duckdb/destination.js';
import { EXIT_CODES } from '../core/exit-codes.js';
import { RESOURCE_NAMES } from '../../connectors/index.js';
import { EVENT_COUNTS_TABLE, EVENT_FACETS_TABLE } from '../analysts/aggregates.js';
import { SEARCH_RESULTS_TABLE } from '../analysts/searches.js';

/**
 * `npm run demo`: the whole thing with no account. Starts the emulator in its real-service flavor
 * (the vendor SDK's shapes: traces per event, late enrichment; three projects, the documented rate
 * limits on), syncs every resource of every project into `.demo/warehouse.duckdb` with no setting
 * beyond the URL and key, shows the tables and a query, then adds events and syncs again to show an
 * incremental run. Traces are read one event at a time (400 a minute), so the history is small.
 */
const DEMO_DIR = '.demo';

async function main(): Promise<number> {
  rmSync(DEMO_DIR, { recursive: true, force: true });
  // On its own thread, like a real server: its rate windows see when requests really arrive.
  const emulator = await startEmulatorThread({
    flavor: 'real',
    seed: 42,
    eventsPerProject: 100,
    limits: { ...SPEC_RATE_LIMITS },
  });
  const print = (line: string): void => void process.stdout.write(`${line}\n`);
  const flags = {
    baseUrl: emulator.url,
    apiKey: emulator.apiKey,
    project: '*',
    duckdbPath: join(DEMO_DIR, 'warehouse.duckdb'),
    state: join(DEMO_DIR, 'state.json'),
    logLevel: 'warn',
    // For analysts: two saved searches, the API's aggregates, and a dbt sources.yml.
    search: ['refunds=refund', 'denied=access denied,search_in=assistant_output'],
    aggregates: true,
    dbtSources: join(DEMO_DIR, 'dbt', 'sources.yml'),
  };
  try {
    print(
      `Emulator: ${emulator.url} (real-service flavor; projects default, alpha, beta; limits 400/min per endpoint, 40/s)`,
    );
    print('\n== First sync (all history) ==');
    let code = await syncCommand(resolveSyncConfig(flags, {}), { print });
    if (code !== 0) return code;

    for (const project of ['default', 'alpha', 'beta']) await emulator.addEvents(project, 25);
    print('\n== 75 new events arrive; second sync reads only the new window ==');
    code = await syncCommand(resolveSyncConfig(flags, {}), { print });
    if (code !== 0) return code;

    // The published read copy (what analysts open; the sync writes warehouse.work.duckdb beside it).
    const db = await DuckDbDestination.open(flags.duckdbPath, { readOnly: true });
    try {
      print('\n== Rows per table ==');
      for (const table of [
        ...RESOURCE_NAMES,
        'event_signals',
        SEARCH_RESULTS_TABLE,
        EVENT_COUNTS_TABLE,
        EVENT_FACETS_TABLE,
      ]) {
        print(`${table.padEnd(14)} ${await db.count(table)}`);
      }
      const sql = `SELECT project_id, event_name, COUNT(*) AS events, COUNT(DISTINCT user_id) AS users
FROM events GROUP BY ALL ORDER BY events DESC LIMIT 5`;
      print(`\n== ${sql.replace(/\n/g, ' ')} ==`);
      for (const row of await db.query(sql)) {
        print(
          `${String(row.project_id).padEnd(8)} ${String(row.event_name).padEnd(18)} ${String(row.events).padStart(6)} ${String(row.users).padStart(6)}`,
        );
      }
      const [span] = await db.query(
        'SELECT span_id, start_time_ns, duration_ns FROM traces ORDER BY start_time_ns DESC LIMIT 1',
      );
      if (span)
        print(
          `\nNewest span ${String(span.span_id)}: start_time_ns=${String(span.start_time_ns)} (exact BIGINT, beyond 2^53)`,
        );
    } finally {
      await db.close();
    }
    print(`\nWarehouse: ${flags.duckdbPath}   State: ${flags.state}   dbt sources: ${flags.dbtSources}`);
    print(`Try: duckdb -readonly ${flags.duckdbPath} "SELECT * FROM users ORDER BY last_seen DESC LIMIT 5"`);
    print(
      `  or: query-sync sql --duckdb-path ${flags.duckdbPath} "SELECT event_name, count(*) FROM events GROUP BY 1"   (Parquet: ${flags.duckdbPath}.files/)`,
    );
    return EXIT_CODES.ok;
  } finally {
    await emulator.close();
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`demo failed: ${String((error as Error)?.stack ?? error)}\n`);
    process.exitCode = EXIT_CODES.failed;
  },
);
