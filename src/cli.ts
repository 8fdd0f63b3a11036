#!/usr/bin/env node
import yargs, { type Argv } from 'yargs';
import { hideBin } from 'yargs/helpers';
import { resolveSyncConfig, type SyncFlags } from './config.js';
import { exitCodeFor, QuerySyncError } from './core/errors.js';

/** Thin: flags → config → command; error → exit code. No logic lives here. */

const print = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

/** Flags shared by every command that reads the API and writes a destination. */
export function withSyncFlags<T>(y: Argv<T>): Argv<T & SyncFlags> {
  return y
    .option('base-url', { type: 'string', describe: 'Query API base URL (env QUERY_API_BASE_URL)' })
    .option('api-key', { type: 'string', describe: 'Organization API Key (env QUERY_API_KEY); never printed or logged' })
    .option('project', { type: 'string', describe: 'project slug, or "*" for all projects (env QUERY_API_PROJECT); absent: no header, the service reads "default"' })
    .option('project-ids', { type: 'string', describe: 'comma-separated slugs narrowing "*" (sent as project_ids)' })
    .option('project-header', { type: 'string', default: 'X-Service-Project-Id', describe: 'project header name (the real service documents X-Raindrop-Project-Id)' })
    .option('resources', { type: 'string', describe: 'comma-separated: events,traces,signals,users,conversations (default: all)' })
    .option('destination', { type: 'string', choices: ['duckdb', 'bigquery'], default: 'duckdb' })
    .option('duckdb-path', { type: 'string', default: 'warehouse.duckdb' })
    .option('bq-project', { type: 'string', describe: 'BigQuery project (with --destination bigquery)' })
    .option('bq-dataset', { type: 'string', describe: 'BigQuery dataset' })
    .option('bq-location', { type: 'string', default: 'US', describe: 'BigQuery location for a new dataset' })
    .option('bq-api-endpoint', { type: 'string', describe: 'another BigQuery endpoint (local emulator or test double)' })
    .option('bq-key-file', { type: 'string', describe: 'service-account key file (default: Application Default Credentials)' })
    .option('dry-run', { type: 'boolean', default: false, describe: 'BigQuery: print the DDL and MERGE statements, send nothing' })
    .option('state', { type: 'string', default: 'state/state.json', describe: 'state file (high-water marks, checkpoints)' })
    .option('lock-wait', { type: 'string', default: '0', describe: 'wait this long (e.g. 10m) for another run holding the state lock' })
    .option('lookback', { type: 'string', default: '15m', describe: 're-read this far before the high-water mark (late-indexed events)' })
    .option('start', { type: 'string', describe: 'ISO instant: the oldest data a first sync reads (default: all history)' })
    .option('batch-rows', { type: 'number', describe: 'rows per write + checkpoint (default 5000 for DuckDB, 50000 for BigQuery)' })
    .option('max-rpm', { type: 'number', default: 400, describe: 'requests per minute per endpoint' })
    .option('search-rpm', { type: 'number', default: 50, describe: 'requests per minute to /v1/events/search' })
    .option('max-rps', { type: 'number', default: 40, describe: 'requests per second, all endpoints' })
    .option('search-gate-rps', { type: 'number', default: 20, describe: 'search only while combined usage of the last second is under this' })
    .option('connect-timeout', { type: 'string', default: '10s', describe: 'TCP/TLS connect timeout' })
    .option('headers-timeout', { type: 'string', default: '30s', describe: 'time to wait for response headers' })
    .option('body-timeout', { type: 'string', default: '60s', describe: 'longest pause while reading a response body' })
    .option('log-level', { type: 'string', describe: 'pino level (default info; --verbose: debug)' })
    .option('log-format', { type: 'string', choices: ['json', 'pretty'], describe: 'default: pretty on a TTY, JSON otherwise' })
    .option('verbose', { type: 'boolean', default: false })
    .option('quiet', { type: 'boolean', default: false, describe: 'only the summary' }) as Argv<T & SyncFlags>;
}

async function main(): Promise<number> {
  let exitCode = 0;
  const setExit = (code: number): void => {
    exitCode = code;
  };
  await yargs(hideBin(process.argv))
    .scriptName('query-sync')
    .usage('$0 <command> [options]')
    .command(
      'sync',
      'incrementally sync the Query API into the warehouse',
      (y) => withSyncFlags(y),
      async (argv) => {
        const config = resolveSyncConfig(argv, process.env, process.stderr.isTTY === true);
        const { syncCommand } = await import('./commands/sync.js');
        setExit(await syncCommand(config, { print }));
      },
    )
    .command(
      'emulate',
      'serve a local emulator of the Query API (for the demo and tests)',
      (y) =>
        y
          .option('port', { type: 'number', default: 8787 })
          .option('seed', { type: 'number', default: 1 })
          .option('events-per-project', { type: 'number', default: 2000 })
          .option('faults', { type: 'number', default: 0, describe: 'fraction of requests that get a fault (5xx, HTML page, reset, slow, duplicate row, truncated body)' })
          .option('late-rate', { type: 'number', default: 0, describe: 'fraction of new events that become visible only after a delay' })
          .option('limits', { type: 'boolean', default: true, describe: 'enforce the documented rate limits (--no-limits to turn off)' }),
      async (argv) => {
        const { emulateCommand } = await import('./commands/emulate.js');
        setExit(
          await emulateCommand(
            { port: argv.port, seed: argv.seed, eventsPerProject: argv['events-per-project'], faults: argv.faults, lateRate: argv['late-rate'], limits: argv.limits },
            { print },
          ),
        );
      },
    )
    .demandCommand(1, 'name a command: sync or emulate')
    .strict()
    .help()
    .alias('help', 'h')
    .version()
    .fail((message, error) => {
      if (error) throw error;
      process.stderr.write(`query-sync: ${message}\nRun query-sync --help for usage.\n`);
      process.exit(2);
    })
    .parseAsync();
  return exitCode;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const message = error instanceof QuerySyncError ? `${error.name}: ${error.message}` : String((error as Error)?.stack ?? error);
    process.stderr.write(`query-sync: ${message}\n`);
    process.exitCode = exitCodeFor(error);
  },
);
