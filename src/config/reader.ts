import { parseInstant, parseNumber, parseSize, parseStrictDuration } from './values.js';
import { ConfigError } from '../core/errors.js';
import { camel, collect, type CommandName, type OptionKind, type OptionSpec, type RawValue } from './options.js';
import { OPTIONS } from './defaults.js';

// ---- reading values: flag > QUERY_SYNC_<FLAG> > config file > default ----

/** Typed, validated access to one command's settings; every message names where a value came from. */
export interface Reader {
  label(flag: string): string;
  /** The value as given, whatever its kind (for checks of their own, such as `--dry-run-limit`'s). */
  text(flag: string): string | undefined;
  bool(flag: string): boolean | undefined;
  number(flag: string): number | undefined;
  integer(flag: string): number | undefined;
  duration(flag: string): number | undefined;
  /** A size in bytes. */
  size(flag: string): number | undefined;
  instant(flag: string): number | undefined;
  /** One of the option's `choices`, else its `default` (options.ts); undefined when it has none. */
  choice(flag: string): string | undefined;
}

/** What each kind of option parses to. */
interface Parsed {
  readonly string: string;
  readonly path: string;
  readonly boolean: boolean;
  readonly number: number;
  readonly integer: number;
  readonly duration: number;
  readonly size: number;
  readonly instant: number;
  readonly choice: string;
}

/**
 * One parser per kind of option (options.ts): an option is parsed by its kind and choices, not by
 * code of its own. Each message names where the value came from (`label`).
 */
const PARSERS: { readonly [K in OptionKind]: (label: string, value: RawValue, spec: OptionSpec) => Parsed[K] } = {
  string: (_label, value) => String(value),
  path: (_label, value) => String(value),
  boolean: (label, value) => {
    if (typeof value === 'boolean') return value;
    const t = String(value).trim().toLowerCase();
    if (['true', '1', 'yes', 'on'].includes(t)) return true;
    if (['false', '0', 'no', 'off', ''].includes(t)) return false;
    throw new ConfigError(`${label}: expected true or false, got "${String(value)}"`);
  },
  number: (label, value) => parseNumber(label, String(value), false),
  integer: (label, value) => parseNumber(label, String(value), true),
  duration: (label, value) => parseStrictDuration(label, String(value)),
  size: (label, value) => parseSize(label, String(value)),
  instant: (label, value) => parseInstant(label, String(value)),
  choice: (label, value, spec) => {
    const text = String(value);
    const choices = spec.choices ?? [];
    if (!choices.includes(text))
      throw new ConfigError(`${label}: expected ${spec.expected ?? listed(choices)}, got "${text}"`);
    return text;
  },
};

/** `a, b or c`. */
function listed(choices: readonly string[]): string {
  return choices.length < 2
    ? choices.join('')
    : `${choices.slice(0, -1).join(', ')} or ${choices[choices.length - 1] ?? ''}`;
}

const SPECS = new Map(OPTIONS.map((spec) => [spec.name, spec]));

export function reader(command: CommandName, flags: object, env: NodeJS.ProcessEnv): Reader {
  const { values, sources } = collect(OPTIONS, command, flags as Readonly<Record<string, unknown>>, env);
  const raw = (flag: string): RawValue | undefined => values[camel(flag)];
  const label = (flag: string): string => sources[camel(flag)] ?? `--${flag}`;
  /** The value of `flag` parsed by the parser of its kind; asking for another kind is a mistake in our code. */
  const parsed = <K extends OptionKind>(flag: string, kind: K): Parsed[K] | undefined => {
    const spec = SPECS.get(flag);
    if (spec?.kind !== kind)
      throw new Error(`config: --${flag} is read as ${kind}, but options.ts declares it ${spec?.kind ?? 'not at all'}`);
    const value = raw(flag);
    return value === undefined ? undefined : PARSERS[kind](label(flag), value, spec);
  };
  return {
    label,
    text: (flag) => {
      const v = raw(flag);
      return v === undefined ? undefined : String(v);
    },
    bool: (flag) => parsed(flag, 'boolean'),
    number: (flag) => parsed(flag, 'number'),
    integer: (flag) => parsed(flag, 'integer'),
    duration: (flag) => parsed(flag, 'duration'),
    size: (flag) => parsed(flag, 'size'),
    instant: (flag) => parsed(flag, 'instant'),
    choice: (flag) => parsed(flag, 'choice') ?? SPECS.get(flag)?.default,
  };
}
