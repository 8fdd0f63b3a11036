#!/usr/bin/env node
import { setFlagsFromString } from 'node:v8';
import yargs, { type Argv } from 'yargs';
import { hideBin } from 'yargs/helpers';
import {
  resolveBackfillConfig,
  resolvePlanConfig,
  resolveStatusConfig,
  resolveSyncConfig,
  resolveVerifyConfig,
  type RunFlags,
  type SyncFlags,
} from './config.js';
import { exitCodeFor, QuerySyncError } from './core/errors.js';
import { redact } from './core/log.js';

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
    .option('project-header', { type: 'string', describe: 'project header name (default: both X-Raindrop-Project-Id and X-Service-Project-Id are sent)' })
    .option('resources', { type: 'string', describe: 'comma-separated: events,traces,signals,signal_groups,users,conversations (default: all)' })
    .option('destination', { type: 'string', choices: ['duckdb', 'bigquery'], default: 'duckdb' })
    .option('duckdb-path', { type: 'string', default: 'warehouse.duckdb' })
    .option('duckdb-memory-limit', { type: 'string', describe: "DuckDB's memory limit in this process (default 32MB; larger operations spill to <file>.tmp; a batch that does not fit is written in parts, and the limit is raised for the run if even that fails)" })
    .option('bq-project', { type: 'string', describe: 'BigQuery project (with --destination bigquery)' })
    .option('bq-dataset', { type: 'string', describe: 'BigQuery dataset' })
    .option('bq-location', { type: 'string', default: 'US', describe: 'BigQuery location for a new dataset' })
    .option('bq-api-endpoint', { type: 'string', describe: 'another BigQuery endpoint (local emulator or test double)' })
    .option('bq-key-file', { type: 'string', describe: 'service-account key file (default: Application Default Credentials)' })
    .option('dry-run', { type: 'boolean', default: false, describe: 'BigQuery: print the requests each write would send (DDL, load job, MERGE), send nothing' })
    .option('dry-run-limit', { type: 'number', describe: 'with --dry-run: rows each stream reads before it stops (default 100)' })
    .option('state', { type: 'string', default: 'state/state.json', describe: 'state file (high-water marks, checkpoints)' })
    .option('lock-wait', { type: 'string', default: '0', describe: 'wait this long (e.g. 10m) for another run holding the state lock or the DuckDB file' })
    .option('lookback', { type: 'string', default: '15m', describe: 're-read this far before the high-water mark (late-indexed events)' })
    .option('settle', { type: 'string', describe: 're-read each events window once it is this old, for fields enriched late (default 2h; 0: off)' })
    .option('traces', { type: 'string', choices: ['all', 'traced', 'none'], describe: 'where traces are read per event, for which events: all, or those whose tool_calls/error_spans/model show a trace (default); none: no traces' })
    .option('start', { type: 'string', describe: 'ISO instant: the oldest data a first sync reads (default: all history)' })
    .option('batch-rows', { type: 'number', describe: 'rows per write + checkpoint (default 5000 for DuckDB, 50000 for BigQuery)' })
    .option('batch-bytes', { type: 'string', describe: 'also write a batch once its rows hold this much text (default 8MB)' })
    .option('max-rpm', { type: 'number', default: 400, describe: 'requests per minute per endpoint' })
    .option('search-rpm', { type: 'number', default: 50, describe: 'requests per minute to /v1/events/search' })
    .option('max-rps', { type: 'number', default: 40, describe: 'requests per second, all endpoints' })
    .option('search-gate-rps', { type: 'number', default: 20, describe: 'search only while combined usage of the last second is under this' })
    .option('connect-timeout', { type: 'string', default: '10s', describe: 'TCP/TLS connect timeout' })
    .option('headers-timeout', { type: 'string', default: '30s', describe: 'time to wait for response headers' })
    .option('body-timeout', { type: 'string', default: '60s', describe: 'longest pause while reading a response body' })
    .option('request-timeout', { type: 'string', default: '2m', describe: 'longest time for one request, connect to last byte of the body' })
    .option('max-retry-after', { type: 'string', default: '5m', describe: 'longest Retry-After honoured; a longer one fails the stream, naming the wait' })
    .option('log-level', { type: 'string', describe: 'pino level (default info; --verbose: debug)' })
    .option('log-format', { type: 'string', choices: ['json', 'pretty'], describe: 'default: pretty on a TTY, JSON otherwise' })
    .option('verbose', { type: 'boolean', default: false })
    .option('quiet', { type: 'boolean', default: false, describe: 'only the summary' })
    .option('exclude-columns', { type: 'string', describe: 'resource.field items never written, e.g. events.user_input,traces.input' })
    .option('hash-columns', { type: 'string', describe: 'resource.field items written as a salted SHA-256 (HMAC) hex string; salt from env QUERY_SYNC_HASH_SALT' })
    .option('schema-contract', { type: 'string', choices: ['evolve', 'freeze-columns', 'freeze'], describe: 'evolve (default): new fields become columns; freeze-columns: a new field or a type change fails the stream; freeze: nor may a table be created' })
    .option('progress-interval', { type: 'string', default: '5s', describe: 'not on a TTY: a progress log line this often' }) as Argv<T & SyncFlags>;
}

/** `--from/--to/--window` of `backfill`, `plan` and `verify`. */
function withRangeFlags<T>(y: Argv<T>, required: boolean): Argv<T & RunFlags> {
  return y
    .option('from', { type: 'string', demandOption: required, describe: 'ISO instant: start of the interval (inclusive)' })
    .option('to', { type: 'string', demandOption: required, describe: 'ISO instant: end of the interval (exclusive)' })
    .option('window', { type: 'string', describe: 'window length the interval is sliced into (default 1d)' }) as Argv<T & RunFlags>;
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
      (y) =>
        withSyncFlags(y).option('concurrency', {
          type: 'number',
          describe: 'most sub-windows of one large window walked at once; how many help is found at run time (default 16; 1: one walk per window)',
        })
          .option('json', { type: 'boolean', default: false, describe: 'print the run summary as one JSON object on stdout (for schedulers)' }),
      async (argv) => {
        const config = resolveSyncConfig(argv, process.env, process.stderr.isTTY === true);
        const { syncCommand } = await import('./commands/sync.js');
        setExit(await syncCommand(config, { print }));
      },
    )
    .command(
      'check',
      'one request per endpoint and project scope: is the key accepted, which endpoints take "*", what the records look like',
      (y) => withSyncFlags(y).option('json', { type: 'boolean', default: false, describe: 'the report as one JSON object' }),
      async (argv) => {
        const config = resolveSyncConfig(argv, process.env, process.stderr.isTTY === true);
        const { checkCommand } = await import('./commands/check.js');
        setExit(await checkCommand(config, { print }));
      },
    )
    .command(
      'backfill',
      'load [--from, --to) in windows, resumable, without moving the sync marks',
      (y) =>
        withRangeFlags(withSyncFlags(y), true).option('concurrency', {
          type: 'number',
          default: 4,
          describe: 'windows read at once (all within the one request budget)',
        }),
      async (argv) => {
        const config = resolveBackfillConfig(argv, process.env, process.stderr.isTTY === true);
        const { backfillCommand } = await import('./commands/backfill.js');
        setExit(await backfillCommand(config, { print }));
      },
    )
    .command(
      'plan',
      'estimate requests and time of the next sync, or of a backfill with --from/--to (count requests only)',
      (y) => withRangeFlags(withSyncFlags(y), false).option('json', { type: 'boolean', default: false, describe: 'the plan as JSON' }),
      async (argv) => {
        const config = resolvePlanConfig(argv, process.env, process.stderr.isTTY === true);
        const { planCommand } = await import('./commands/plan.js');
        setExit(await planCommand(config, { print }));
      },
    )
    .command(
      'status',
      'marks, last runs, backfill ledger and gaps, table row counts (reads state without locking it)',
      (y) =>
        y
          .option('state', { type: 'string', default: 'state/state.json', describe: 'state file' })
          .option('resources', { type: 'string', describe: 'comma-separated subset (default: all)' })
          .option('destination', { type: 'string', choices: ['duckdb', 'bigquery'], default: 'duckdb' })
          .option('duckdb-path', { type: 'string', default: 'warehouse.duckdb' })
          .option('bq-project', { type: 'string' })
          .option('bq-dataset', { type: 'string' })
          .option('bq-location', { type: 'string', default: 'US' })
          .option('bq-api-endpoint', { type: 'string' })
          .option('bq-key-file', { type: 'string' })
          .option('lock-wait', { type: 'string', default: '0', describe: 'wait this long for a run holding the DuckDB file (else counts are reported unavailable)' })
          .option('json', { type: 'boolean', default: false, describe: 'the same as JSON, for orchestrators' }),
      async (argv) => {
        const config = resolveStatusConfig(argv);
        const { statusCommand } = await import('./commands/status.js');
        setExit(await statusCommand(config, { print }));
      },
    )
    .command(
      'verify',
      'compare /v1/events/count with the warehouse per window and project; exit 5 on a mismatch',
      (y) =>
        withRangeFlags(withSyncFlags(y), true)
          .option('repair', { type: 'boolean', default: false, describe: 're-read the mismatched windows, then check again' })
          .option('concurrency', { type: 'number', default: 4, describe: 'windows re-read at once by --repair' }),
      async (argv) => {
        const config = resolveVerifyConfig(argv, process.env, process.stderr.isTTY === true);
        const { verifyCommand } = await import('./commands/verify.js');
        setExit(await verifyCommand(config, { print }));
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
          .option('limits', { type: 'boolean', default: true, describe: 'enforce the documented rate limits (--no-limits to turn off)' })
          .option('flavor', { choices: ['spec', 'real'] as const, default: 'spec' as const, describe: 'spec: the specification (X-Service-Project-Id, traces by time); real: the service the vendor SDK describes (X-Raindrop-Project-Id, traces by event_id, late enrichment)' })
          .option('latency', { type: 'string', default: '0ms', describe: 'answer every request after this long (±20 % jitter), e.g. 250ms' })
          .option('enrich-after', { type: 'string', describe: "events get signals/topics/tool_calls this long after they appear (default 60s on --flavor real, 0 on spec)" })
          .option('all-projects', { type: 'boolean', default: true, describe: "accept the all-projects scope '*' where the service does (--no-all-projects refuses it everywhere)" }),
      async (argv) => {
        const { emulateCommand } = await import('./commands/emulate.js');
        setExit(
          await emulateCommand(
            {
              port: argv.port,
              seed: argv.seed,
              eventsPerProject: argv['events-per-project'],
              faults: argv.faults,
              lateRate: argv['late-rate'],
              limits: argv.limits,
              flavor: argv.flavor,
              latency: argv.latency,
              enrichAfter: argv['enrich-after'],
              allProjects: argv['all-projects'],
            },
            { print },
          ),
        );
      },
    )
    .demandCommand(1, 'name a command: sync, check, backfill, plan, status, verify or emulate')
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

/** The API keys this process was given (flag and environment), to keep them out of a last-resort error print. */
function apiKeysGiven(args: readonly string[], env: NodeJS.ProcessEnv): string[] {
  const keys = env.QUERY_API_KEY === undefined ? [] : [env.QUERY_API_KEY];
  args.forEach((arg, i) => {
    if (arg === '--api-key' && args[i + 1] !== undefined) keys.push(args[i + 1] as string);
    else if (arg.startsWith('--api-key=')) keys.push(arg.slice('--api-key='.length));
  });
  return keys;
}

// A sync is a long batch job whose speed the API's limits set, not the CPU: let V8 keep its heap
// small (collect sooner, grow slowly) rather than fast. This cut the JS heap of a 1M-event
// backfill from about 125 to 45 MB, and halves throughput with the limits off (24k → 12k rows/s,
// still far above the API's ~670 rows/s per endpoint). QUERY_SYNC_OPTIMIZE_FOR=speed opts out.
// V8 reads this flag as it goes, so setting it here works; heap size flags such as
// --max-semi-space-size only work on the command line or in NODE_OPTIONS (the Docker image sets
// one). Not for the emulator, a test server that should be fast.
if (hideBin(process.argv)[0] !== 'emulate' && process.env.QUERY_SYNC_OPTIMIZE_FOR !== 'speed') setFlagsFromString('--optimize-for-size');

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const message = error instanceof QuerySyncError ? `${error.name}: ${error.message}` : String((error as Error)?.stack ?? error);
    process.stderr.write(`query-sync: ${redact(message, apiKeysGiven(hideBin(process.argv), process.env))}\n`);
    process.exitCode = exitCodeFor(error);
  },
);
