import { createRequire } from 'node:module';
import { pino, type Logger, type DestinationStream, type LogFn } from 'pino';

export type { Logger } from 'pino';

export type LogFormat = 'json' | 'pretty';

export interface LoggerOptions {
  /** pino level. @default 'info' */
  readonly level?: string;
  /** @default 'json' */
  readonly format?: LogFormat;
  /** Where lines go. @default stderr (stdout is kept for summaries and command output) */
  readonly destination?: DestinationStream;
  /** Literal secrets (the API key) to scrub from every line, wherever they appear. */
  readonly secrets?: readonly string[];
  /** Sees each log call first (arguments, level); returning false drops it (e.g. a repeated error). */
  readonly admit?: (args: readonly unknown[], level: number) => boolean;
}

/** Paths pino removes from every log object, so a key never reaches a log line. */
const REDACT_PATHS: readonly string[] = [
  'apiKey',
  '*.apiKey',
  'authorization',
  'headers.authorization',
  'headers.Authorization',
  '*.headers.authorization',
  '*.headers.Authorization',
  'credentials',
  '*.credentials',
];

/**
 * Replace every occurrence of each secret in `text`: as given, URL-encoded and JSON-escaped (a
 * server may echo the key in a query string or inside a JSON string). Run it before a text is
 * trimmed, so a cut cannot leave part of a key behind.
 */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length < 4) continue;
    for (const form of new Set([secret, encodeURIComponent(secret), JSON.stringify(secret).slice(1, -1)])) {
      // Most text holds no secret: a search is much cheaper than splitting (a long ledger's state row).
      if (out.includes(form)) out = out.split(form).join('[redacted]');
    }
  }
  return out;
}

/**
 * The error with every secret removed from its message and from its causes' messages (an error's
 * message is where a server's echo of the key lands). Returns the same object, changed in place, so
 * its class and `code` stay.
 */
export function redactError<E>(error: E, secrets: readonly string[]): E {
  let current: unknown = error;
  for (let depth = 0; current instanceof Error && depth < 8; depth += 1) {
    const clean = redact(current.message, secrets);
    if (clean !== current.message) current.message = clean;
    if (typeof current.stack === 'string') current.stack = redact(current.stack, secrets);
    current = current.cause;
  }
  return error;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const secrets = options.secrets ?? [];
  const format = options.format ?? 'json';
  const base = {
    level: options.level ?? 'info',
    redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
    base: undefined,
    hooks: {
      ...(secrets.length > 0 ? { streamWrite: (line: string): string => redact(line, secrets) } : {}),
      ...(options.admit === undefined ? {} : { logMethod: admitHook(options.admit) }),
    },
  };
  if (format === 'pretty') {
    // pino-pretty as a synchronous stream, so lines are in order with the summary on exit.
    return pino(base, prettyStream(options.destination));
  }
  return pino(base, options.destination ?? pino.destination({ fd: 2, sync: true }));
}

function prettyStream(destination: DestinationStream | undefined): DestinationStream {
  // Loaded lazily so JSON-only runs do not pay for it.
  const pretty = requirePretty();
  return pretty({
    colorize: process.stderr.isTTY === true,
    sync: true,
    destination: destination ?? 2,
    ignore: 'pid,hostname',
    translateTime: 'SYS:HH:MM:ss.l',
  });
}

type PrettyFactory = (options: Record<string, unknown>) => DestinationStream;
function requirePretty(): PrettyFactory {
  const require = createRequire(import.meta.url);
  return require('pino-pretty') as PrettyFactory;
}

function admitHook(admit: (args: readonly unknown[], level: number) => boolean) {
  return function logMethod(this: Logger, args: Parameters<LogFn>, method: LogFn, level: number): void {
    if (admit(args, level)) method.apply(this, args);
  };
}

/** A logger that drops everything: for tests and library use. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
