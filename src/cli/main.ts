#!/usr/bin/env node
import yargs, { type Argv } from 'yargs';
import { hideBin } from 'yargs/helpers';
import { cancelOnSignals } from '../run/stop.js';
import { secretsGiven } from '../config/secrets.js';
import { fitToTerminal } from './terminal-lines.js';
import { setV8Flags } from './v8-flags.js';
import {
  ENV,
  OPTIONS,
  resolveBackfillConfig,
  resolvePlanConfig,
  resolveResetConfig,
  resolveSqlConfig,
  resolvePublishConfig,
  resolveDbtSourcesConfig,
  resolveStatusConfig,
  resolveReportConfig,
  resolveSyncConfig,
  resolveVerifyConfig,
  type RunFlags,
} from '../config/index.js';
import { ConfigError, QuerySyncError } from '../core/errors.js';
import { EXIT_CODES, exitCodeFor } from '../core/exit-codes.js';
import { redact } from '../core/log.js';
import { packageVersion } from '../http/conventions.js';
import { envName, type CommandName, type OptionSpec } from '../config/options.js';
import type { ResetIo } from './commands/reset.js';
import type { CommandIo } from '../run/io.js';
import type { EmulateFlags } from './commands/emulate.js';

/** Thin: flags → config → command; error → exit code. No logic lives here. */

/**
 * Everything a command prints goes through here: the one place secrets are taken out (whatever
 * built the line) before it reaches stdout.
 */
const print = (line: string): void => {
  const clean = redact(line, secretsOfProcess());
  // On a terminal, a long line is broken at spaces rather than mid-word (see terminal-lines.ts).
  const lines = process.stdout.isTTY === true ? fitToTerminal(clean, process.stdout.columns) : [clean];
  process.stdout.write(`${lines.join('\n')}\n`);
};

/**
 * The flags of one command, from the option table (`config/options.ts`): no yargs defaults (`config/run.ts`
 * and `config/commands.ts` apply its constants, which the help shows), grouped for `--help`, each with its env name.
 */
export function withOptions<T>(y: Argv<T>, command: CommandName): Argv<T & RunFlags> {
  let out = y as Argv<T & RunFlags>;
  for (const spec of OPTIONS.filter((o) => o.commands.includes(command))) {
    const env = [envName(spec.name), ...(spec.envAliases ?? [])].join(' or ');
    if (spec.secret) {
      // The key is accepted with a warning; the salt only to refuse it with a message (see refuseKeyFlag).
      out = out.option(spec.name, {
        type: 'string',
        hidden: spec.name !== 'api-key',
        describe: `${spec.describe}; accepted as a flag with a warning (it shows in \`ps\`)`,
        group: `${spec.group}:`,
      });
      continue;
    }
    out = out.option(spec.name, {
      type: spec.kind === 'boolean' ? 'boolean' : 'string',
      ...(spec.repeatable === true ? { array: true } : {}),
      describe: `${spec.describe}${UNIT_HINT[spec.kind] ?? ''} [env ${env}]`,
      ...((spec.defaultText ?? spec.default) === undefined
        ? {}
        : { defaultDescription: spec.defaultText ?? spec.default }),
      ...(spec.choices === undefined ? {} : { choices: [...spec.choices] }),
      group: `${spec.group}:`,
    });
  }
  return out;
}

const UNIT_HINT: Partial<Record<OptionSpec['kind'], string>> = {
  duration: ' (duration with a unit: 500ms, 30s, 15m, 1h, 1d)',
  size: ' (size with a unit: 32MB, 1GB)',
  instant: ' (ISO instant with offset: 2026-01-01T00:00:00Z)',
};

/**
 * A secret as a flag: the hash salt is refused (it would show in the process list and shell
 * history); the API key is accepted, as `sync --base-url URL --api-key KEY` is the documented
 * first run, with a warning that the environment or `--api-key-file` keeps it out of `ps`.
 */
function refuseKeyFlag(argv: { readonly apiKey?: unknown; readonly hashSalt?: unknown }): void {
  if (argv.apiKey !== undefined && !warnedKeyFlag) {
    warnedKeyFlag = true;
    process.stderr.write(
      `query-sync: warning: --api-key shows in the process list and shell history; for schedules set ${envName('api-key')} (or ${ENV.apiKey}), or pass --api-key-file\n`,
    );
  }
  if (argv.hashSalt !== undefined)
    throw new ConfigError(
      `--hash-salt is not accepted on the command line (it would show in the process list): set ${envName('hash-salt')}`,
    );
}
let warnedKeyFlag = false;

const isTty = (): boolean => process.stderr.isTTY === true;

/** Run a command that SIGINT/SIGTERM may cancel (see `run/stop.ts`). */
async function withSignals(run: (signal: AbortSignal) => Promise<number>): Promise<number> {
  const signals = cancelOnSignals((line) => process.stderr.write(`${line}\n`));
  try {
    return await run(signals.signal);
  } finally {
    signals.dispose();
  }
}

/** A command that takes the shared options (`config/options.ts`). */
interface CliCommand {
  readonly describe: string;
  /** It reads the API: a key given as a flag gets a warning, the hash salt is refused. */
  readonly readsApi: boolean;
  readonly run: (argv: RunFlags) => Promise<number>;
  /** The command as yargs declares it, with positional arguments (`sql [query]`). @default its name */
  readonly usage?: string;
}

/**
 * The command's config from the flags (first: a config error needs nothing loaded), then the
 * command, imported only when it runs, given the output and, with `signals`, SIGINT/SIGTERM to stop on.
 */
function runs<C, F = RunFlags>(
  resolve: (flags: F, env: NodeJS.ProcessEnv, isTty: boolean) => C,
  load: () => Promise<(config: C, io: CommandIo & ResetIo) => Promise<number>>,
  signals: 'signals' | 'no signals',
): (argv: F) => Promise<number> {
  return async (argv) => {
    const config = resolve(argv, process.env, isTty());
    const command = await load();
    const io = {
      print,
      interactive: process.stdin.isTTY === true && process.stdout.isTTY === true,
      publishHooks: testHooks(process.env),
    };
    return signals === 'signals' ? withSignals((signal) => command(config, { ...io, signal })) : command(config, io);
  };
}

/**
 * Tests of a kill between a publish's catalog rename and its manifest ask the process, through its
 * environment, to stop there (that step is too short to hit by timing): read here, at the edge, and
 * handed to the publisher, which reads no environment.
 */
function testHooks(env: NodeJS.ProcessEnv): CommandIo['publishHooks'] {
  if (env.QSYNC_TEST_HOLD_AFTER_CATALOG !== '1') return undefined;
  return { afterCatalog: async (files) => (await import('../publish/publisher.js')).holdForKill(files) };
}

const COMMANDS: Readonly<Record<CommandName, CliCommand>> = {
  sync: {
    describe: 'incrementally sync the Query API into the warehouse',
    readsApi: true,
    run: runs(resolveSyncConfig, async () => (await import('./commands/sync.js')).syncCommand, 'signals'),
  },
  check: {
    describe:
      'one request per endpoint and project scope: is the key accepted, which endpoints take "*", what the records look like',
    readsApi: true,
    run: runs(resolveSyncConfig, async () => (await import('./commands/check.js')).checkCommand, 'no signals'),
  },
  backfill: {
    describe: 'load [--from, --to) in windows, resumable, without moving the sync marks',
    readsApi: true,
    run: runs(resolveBackfillConfig, async () => (await import('./commands/backfill.js')).backfillCommand, 'signals'),
  },
  plan: {
    describe: 'estimate requests and time of the next sync, or of a backfill with --from/--to (count requests only)',
    readsApi: true,
    run: runs(resolvePlanConfig, async () => (await import('./commands/plan.js')).planCommand, 'no signals'),
  },
  status: {
    describe:
      'marks, last runs, backfill ledger and gaps, table row counts (reads state without locking it); --check: exit 7 when behind --max-lag or --max-backlog-eta',
    readsApi: false,
    run: runs(resolveStatusConfig, async () => (await import('./commands/status.js')).statusCommand, 'no signals'),
  },
  verify: {
    describe: 'compare /v1/events/count with the warehouse per window and project; exit 5 on a mismatch',
    readsApi: true,
    run: runs(resolveVerifyConfig, async () => (await import('./commands/verify.js')).verifyCommand, 'signals'),
  },
  'dbt-sources': {
    describe: 'write a dbt sources.yml describing every table and column in the warehouse (reads it only)',
    readsApi: false,
    run: runs(
      resolveDbtSourcesConfig,
      async () => (await import('./commands/dbt-sources.js')).dbtSourcesCommand,
      'no signals',
    ),
  },
  reset: {
    describe:
      'forget the marks and checkpoints of --resources (optionally of one --project), so the next sync re-reads them from their start',
    readsApi: false,
    run: runs(resolveResetConfig, async () => (await import('./commands/reset.js')).resetCommand, 'no signals'),
  },
  sql: {
    describe: 'run SQL on the published read copy (--json, --csv); no query: an interactive shell (docs/analysts.md)',
    readsApi: false,
    usage: 'sql [query]',
    run: runs(resolveSqlConfig, async () => (await import('./commands/sql.js')).sqlCommand, 'no signals'),
  },
  publish: {
    describe:
      'publish the read copy (--duckdb-path) and its Parquet set now, from the working file (a sync does it at its end and every --publish-every)',
    readsApi: false,
    run: runs(resolvePublishConfig, async () => (await import('./commands/publish.js')).publishCommand, 'no signals'),
  },
  report: {
    describe: 'write the run history as one self-contained HTML page with charts (--html FILE; docs/report.md)',
    readsApi: false,
    run: runs(resolveReportConfig, async () => (await import('./commands/report.js')).reportCommand, 'no signals'),
  },
};

/** The emulator's own flags (not the option table's): its test server's knobs. */
const emulateOptions = <T>(y: Argv<T>) =>
  y
    .option('port', { type: 'number', default: 8787 })
    .option('seed', { type: 'number', default: 1 })
    .option('events-per-project', { type: 'number', default: 2000 })
    .option('faults', {
      type: 'number',
      default: 0,
      describe: 'fraction of requests that get a fault (5xx, HTML page, reset, slow, duplicate row, truncated body)',
    })
    .option('late-rate', {
      type: 'number',
      default: 0,
      describe: 'fraction of new events that become visible only after a delay',
    })
    .option('limits', {
      type: 'boolean',
      default: true,
      describe: 'enforce the documented rate limits (--no-limits to turn off)',
    })
    .option('flavor', {
      choices: ['spec', 'real'] as const,
      default: 'spec' as const,
      describe:
        'spec: the specification (X-Service-Project-Id, traces by time); real: the service the vendor SDK describes (X-Raindrop-Project-Id, traces by event_id, late enrichment)',
    })
    .option('latency', {
      type: 'string',
      default: '0ms',
      describe: 'answer every request after this long (±20 % jitter), e.g. 250ms',
    })
    .option('enrich-after', {
      type: 'string',
      describe:
        'events get signals/topics/tool_calls this long after they appear (default 60s on --flavor real, 0 on spec)',
    })
    .option('all-projects', {
      type: 'boolean',
      default: true,
      describe: "accept the all-projects scope '*' where the service does (--no-all-projects refuses it everywhere)",
    })
    .option('list-quirks', {
      type: 'string',
      describe:
        'list behaviours of other servers, comma-separated: conversations-by-started-at, ignore-order-by, page-cap=N, offset-cursors, ignore-project-ids, instant-texts (docs/list-semantics.md)',
    })
    .option('lacks', {
      type: 'string',
      describe:
        'optional capabilities this server lacks, answered 404: comma list of signal-groups, timeseries, facets, search',
    })
    .option('timeseries-intervals', {
      type: 'string',
      describe:
        'intervals the timeseries accepts (others: 400 naming interval), e.g. hour,day,week (default: all five)',
    })
    .option('timeseries-shape', {
      choices: ['sdk', 'rows'] as const,
      default: 'sdk' as const,
      describe: "rows: the timeseries answers {data: [{bucket, events}]} instead of the SDK's shape",
    })
    .option('hide-model', {
      type: 'boolean',
      default: false,
      describe: 'serve events with model: null (their spans stay): --traces traced then misses spans',
    })
    .option('span-lag', { type: 'string', describe: "an event's spans appear this long after the event, e.g. 30s" })
    .option('convo-enrich-after', {
      type: 'string',
      describe: 'conversations get signals this long after their last message, e.g. 10m',
    })
    .option('count-lag', {
      type: 'string',
      describe: 'counts and timeseries trail the list by this long (a rollup behind), e.g. 60s',
    })
    .option('retention', {
      type: 'string',
      describe: 'delete events older than this at the source, with their spans, as retention would, e.g. 2d',
    });

/** `emulate`: through the same shell as the other commands, its flags resolved to the emulator's. */
const EMULATE = {
  describe: 'serve a local emulator of the Query API (for the demo and tests)',
  options: emulateOptions,
  run: runs(
    (argv: EmulateArgv): EmulateFlags => ({
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
      listQuirks: argv['list-quirks'],
      lacks: argv.lacks,
      timeseriesIntervals: argv['timeseries-intervals'],
      timeseriesShape: argv['timeseries-shape'],
      hideModel: argv['hide-model'],
      spanLag: argv['span-lag'],
      convoEnrichAfter: argv['convo-enrich-after'],
      countLag: argv['count-lag'],
      retention: argv.retention,
    }),
    async () => (await import('./commands/emulate.js')).emulateCommand,
    'no signals',
  ),
};
type EmulateArgv = Awaited<ReturnType<typeof emulateOptions<object>>['argv']>;

/**
 * yargs parses and validates; the command runs after it returns (commands are declared without a
 * handler). Errors (a config error, a failed run) reach `main`'s caller as they did through yargs'
 * `fail`.
 */
async function main(): Promise<number> {
  let parser = yargs(hideBin(process.argv)).scriptName('query-sync').usage('$0 <command> [options]');
  for (const [name, command] of Object.entries(COMMANDS) as [CommandName, CliCommand][]) {
    parser = parser.command(command.usage ?? name, command.describe, (y) => withOptions(y, name));
  }
  skipEagerHelp(parser);
  const argv = await parser
    .command('emulate', EMULATE.describe, EMULATE.options)
    .demandCommand(
      1,
      'name a command: sync, check, backfill, plan, status, verify, reset, dbt-sources, sql, publish, report or emulate',
    )
    .strict()
    .help()
    .alias('help', 'h')
    // Its own version: yargs' `.version()` reads the package.json nearest the working folder, so
    // a run from another project's folder printed that project's version, and "unknown" elsewhere.
    .version(packageVersion())
    .fail((message, error) => {
      if (error) throw error;
      process.stderr.write(`query-sync: ${message}\nRun query-sync --help for usage.\n`);
      process.exit(EXIT_CODES.configuration);
    })
    .parseAsync();
  const name = String(argv._[0]);
  if (name === 'emulate') return EMULATE.run(argv as unknown as EmulateArgv);
  const command = COMMANDS[name as CommandName];
  const flags = argv as unknown as RunFlags;
  if (command.readsApi) refuseKeyFlag(flags);
  return command.run(flags);
}

/**
 * yargs renders a command's whole help text each time the command runs (yargs gives a handler-less
 * command an empty one), to serve a later `showHelp()` that nothing here calls: 0.14 s of CPU at
 * every start, a tenth of a short sync's, string-width and wrap-ansi measuring ~60 option lines.
 * Help is still rendered when asked for (`--help`, and a failure's `showHelp`, which renders it
 * afresh when none is cached). The hook is yargs' internal API (yargs 18): where it is missing, the
 * text is rendered as before.
 */
function skipEagerHelp(parser: Argv): void {
  type Internals = { getInternalMethods?: () => { getUsageInstance?: () => { cacheHelpMessage?: () => void } } };
  const usage = (parser as unknown as Internals).getInternalMethods?.().getUsageInstance?.();
  if (typeof usage?.cacheHelpMessage === 'function') usage.cacheHelpMessage = () => undefined;
}

setV8Flags(hideBin(process.argv), process.env);

let secrets: readonly string[] | undefined;
const secretsOfProcess = (): readonly string[] => (secrets ??= secretsGiven(hideBin(process.argv), process.env));

// A reader that goes away (`query-sync status | head`) closes stdout: what is left to print has no
// one to read it, so it is dropped, as a Unix tool does on SIGPIPE (which Node ignores), instead of
// an unhandled 'error' event's stack trace. The command itself goes on (a sync still finishes its
// writes and state) and its exit code stays its own. Any other write error is still thrown.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
});

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const message =
      error instanceof QuerySyncError ? `${error.name}: ${error.message}` : String((error as Error)?.stack ?? error);
    process.stderr.write(`query-sync: ${redact(message, secretsOfProcess())}\n`);
    process.exitCode = exitCodeFor(error);
  },
);
