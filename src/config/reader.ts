import { parseInstant, parseNumber, parseSize, parseStrictDuration } from '../config-values.js';
import { ConfigError } from '../core/errors.js';
import { camel, collect, type CommandName, type RawValue } from '../options.js';
import { OPTIONS } from './defaults.js';

// ---- reading values: flag > QUERY_SYNC_<FLAG> > config file > default ----

/** Typed, validated access to one command's settings; every message names where a value came from. */
export interface Reader {
  label(flag: string): string;
  text(flag: string): string | undefined;
  bool(flag: string): boolean | undefined;
  number(flag: string): number | undefined;
  integer(flag: string): number | undefined;
  duration(flag: string): number | undefined;
  size(flag: string): string | undefined;
  instant(flag: string): number | undefined;
}

export function reader(command: CommandName, flags: object, env: NodeJS.ProcessEnv): Reader {
  const { values, sources } = collect(OPTIONS, command, flags as Readonly<Record<string, unknown>>, env);
  const raw = (flag: string): RawValue | undefined => values[camel(flag)];
  const label = (flag: string): string => sources[camel(flag)] ?? `--${flag}`;
  const text = (flag: string): string | undefined => {
    const v = raw(flag);
    return v === undefined ? undefined : String(v);
  };
  return {
    label,
    text,
    bool: (flag) => {
      const v = raw(flag);
      if (v === undefined || typeof v === 'boolean') return v;
      const t = String(v).trim().toLowerCase();
      if (['true', '1', 'yes', 'on'].includes(t)) return true;
      if (['false', '0', 'no', 'off', ''].includes(t)) return false;
      throw new ConfigError(`${label(flag)}: expected true or false, got "${String(v)}"`);
    },
    number: (flag) => {
      const t = text(flag);
      return t === undefined ? undefined : parseNumber(label(flag), t, false);
    },
    integer: (flag) => {
      const t = text(flag);
      return t === undefined ? undefined : parseNumber(label(flag), t, true);
    },
    duration: (flag) => {
      const t = text(flag);
      return t === undefined ? undefined : parseStrictDuration(label(flag), t);
    },
    size: (flag) => {
      const t = text(flag);
      return t === undefined ? undefined : parseSize(label(flag), t);
    },
    instant: (flag) => {
      const t = text(flag);
      return t === undefined ? undefined : parseInstant(label(flag), t);
    },
  };
}
