import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  AuthError,
  ConfigError,
  DataError,
  FatalApiError,
  LoadError,
  RunStoppedError,
  StateError,
  WarehouseBusyError,
  type StopCause,
} from '../../../src/core/errors.js';
import {
  EXIT_CODES,
  exitCode,
  exitCodeFor,
  outcomeOf,
  runEndCode,
  runExitCode,
  stopExitCode,
  type ExitOutcome,
} from '../../../src/core/exit-codes.js';

/** The table as the README and `--help` promise it to schedulers: changing a code breaks their scripts. */
const PROMISED: Readonly<Record<ExitOutcome, number>> = {
  ok: 0,
  failed: 1,
  configuration: 2,
  authentication: 3,
  state: 4,
  mismatch: 5,
  maxRunTime: 6,
  stale: 7,
  SIGINT: 130,
  SIGTERM: 143,
};

describe('the exit-code table', () => {
  it('holds each promised outcome with its code, and no two outcomes share one', () => {
    expect({ ...EXIT_CODES }).toEqual(PROMISED);
    for (const [outcome, code] of Object.entries(PROMISED) as [ExitOutcome, number][])
      expect(exitCode(outcome)).toBe(code);
    expect(new Set(Object.values(EXIT_CODES)).size).toBe(Object.keys(EXIT_CODES).length);
    expect(Object.isFrozen(EXIT_CODES)).toBe(true);
  });

  it('maps each error group to its outcome; anything else is a failure', () => {
    const cases: [unknown, ExitOutcome][] = [
      [new ConfigError('--max-rpm: expected a number'), 'configuration'],
      [new AuthError('401 from /v1/events', 401), 'authentication'],
      [new AuthError('403 for project p1', 403), 'authentication'],
      [new StateError('state locked by another run'), 'state'],
      [new WarehouseBusyError('warehouse.duckdb is open in another process'), 'state'],
      [new FatalApiError('400 from /v1/events', 400), 'failed'],
      [new DataError('no id'), 'failed'],
      [new LoadError('refused', false), 'failed'],
      [new Error('plain'), 'failed'],
      ['a string thrown', 'failed'],
      [undefined, 'failed'],
    ];
    for (const [error, outcome] of cases) {
      expect(outcomeOf(error)).toBe(outcome);
      expect(exitCodeFor(error)).toBe(PROMISED[outcome]);
    }
  });

  it('a stopped run exits with its cause: 128 + the signal, 6 for --max-run-time, the state code for a lost lease', () => {
    const causes: [StopCause, number][] = [
      ['SIGINT', 130],
      ['SIGTERM', 143],
      ['max-run-time', 6],
      ['lease-lost', 4],
    ];
    for (const [cause, code] of causes) {
      expect(stopExitCode(cause)).toBe(code);
      expect(exitCodeFor(new RunStoppedError(`${cause} received`, cause))).toBe(code);
    }
  });

  it('a run that read streams: stopped over a failed stream over a difference left over ok; verify names the difference first', () => {
    const stop = new RunStoppedError('--max-run-time 1m reached', 'max-run-time');
    const failed = { error: new AuthError('401: the key was refused', 401) };
    expect(runExitCode({})).toBe(0);
    expect(runExitCode({ mismatch: true })).toBe(5);
    expect(runExitCode({ failed: {} })).toBe(1);
    expect(runExitCode({ failed, mismatch: true })).toBe(3);
    expect(runExitCode({ stop, failed, mismatch: true })).toBe(6);
    expect(runExitCode({ failed, mismatch: true }, 'mismatch-first')).toBe(5);
    expect(runExitCode({ failed }, 'mismatch-first')).toBe(3);
    expect(runExitCode({ stop, failed, mismatch: true }, 'mismatch-first')).toBe(6);
  });

  it("a run's history row names its end as its exit code does, on every path (1, 3, 4, 5, 6, 130, 143)", () => {
    const failed = (error: unknown): { error: unknown } => ({ error });
    const cases: [Parameters<typeof runEndCode>[0], number, string][] = [
      [{}, 0, 'ok'],
      [{ failed: failed(new Error('the destination refused the batch')) }, 1, 'failed'],
      [{ failed: failed(new AuthError('401: the key was refused', 401)) }, 3, 'failed'],
      [{ failed: failed(new StateError('state unreadable')) }, 4, 'failed'],
      [{ mismatch: true }, 5, 'mismatch'],
      [{ stop: new RunStoppedError('--max-run-time 1m reached', 'max-run-time'), mismatch: true }, 6, 'stopped'],
      [{ stop: new RunStoppedError('SIGINT received', 'SIGINT') }, 130, 'stopped'],
      [{ stop: new RunStoppedError('SIGTERM received', 'SIGTERM'), failed: failed(new Error('x')) }, 143, 'stopped'],
      [{ stop: new RunStoppedError('another run took the lease', 'lease-lost') }, 4, 'stopped'],
    ];
    for (const [end, code, outcome] of cases) {
      expect(runEndCode(end)).toEqual({ code, outcome });
      expect(runEndCode(end).code).toBe(runExitCode(end));
    }
    const both = { failed: failed(new AuthError('401: the key was refused', 401)), mismatch: true };
    expect(runEndCode(both, 'mismatch-first')).toEqual({ code: 5, outcome: 'mismatch' });
    expect(runEndCode(both)).toEqual({ code: 3, outcome: 'failed' });
  });
});

/**
 * The table is the only place a code is chosen: a number written where an exit code is set or
 * returned anywhere else fails here, naming the file and line (use `EXIT_CODES` or `exitCodeFor`).
 */
const ROOT = process.cwd();
const TABLE = 'src/core/exit-codes.ts';

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Anywhere: `process.exit(2)`, `process.exitCode = 1`, `EXIT = 5`, `exitCode: 0`, `exitCode ?? 3`. */
const EXIT_LITERAL = /(?:\b|_)exit\w*\s*(?:=|:|\(|\?\?)\s*\d/i;
/** In a command, or a function named for an exit code (`checkExitCode`): `return 0;` or `return x ? 0 : …`. */
const COMMAND_RETURN = /\breturn\s+(?:\d+\s*;|[^;]*\?\s*\d+\s*:|[^;]*:\s*\d+\s*;)/;

/** The head of a top-level function whose name says it picks an exit code. */
const EXIT_FUNCTION = /^(?:export\s+)?(?:async\s+)?function\s+\w*exit\w*\s*\(/i;

/** A line without its comments and string literals (a message may say "exit 5"). */
function withoutTextAndComments(line: string): string {
  return line.replace(/\/\/.*$|^\s*\*.*$|^\s*\/\*\*.*$|'[^']*'|"[^"]*"|`[^`]*`/g, '');
}

function isCommand(file: string): boolean {
  return file.startsWith('src/cli/') || file.startsWith('src/run/');
}

function literalCodes(): string[] {
  const found: string[] = [];
  for (const file of [...sourceFiles('src'), ...sourceFiles('connectors')]) {
    if (file === TABLE) continue; // (the emulator, with its own statuses, is outside src/)
    let inExitFunction = false;
    readFileSync(join(ROOT, file), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        const code = withoutTextAndComments(line);
        if (EXIT_FUNCTION.test(code)) inExitFunction = true;
        if (EXIT_LITERAL.test(code) || ((isCommand(file) || inExitFunction) && COMMAND_RETURN.test(code)))
          found.push(`${file}:${i + 1}: ${line.trim()}`);
        if (line === '}') inExitFunction = false;
      });
  }
  return found;
}

describe('exit codes are chosen in one place', () => {
  it(`no literal exit code outside ${TABLE}`, () => {
    expect(literalCodes()).toEqual([]);
  });

  it('the guard sees the shapes it forbids', () => {
    for (const line of [
      'process.exit(2);',
      'process.exitCode = 1;',
      'export const VERIFY_MISMATCH_EXIT = 5;',
      'print(JSON.stringify({ exitCode: 0 }))',
    ])
      expect(EXIT_LITERAL.test(line)).toBe(true);
    for (const line of [
      'return 0;',
      '    return 2;',
      'return report.ok ? 0 : 1;',
      'return failed === undefined ? 0 : exitCodeFor(e);',
    ])
      expect(COMMAND_RETURN.test(line)).toBe(true);
    expect(EXIT_FUNCTION.test('export function checkExitCode(report: CheckReport): number {')).toBe(true);
    expect(withoutTextAndComments('print(`reconcile: 1 window still differs (exit 5)`); // exit 5')).not.toMatch(/5/);
    for (const line of ['return EXIT_CODES.ok;', 'return exitCodeFor(error);', 'process.exit(code);', 'return code;'])
      expect(EXIT_LITERAL.test(line) || COMMAND_RETURN.test(line)).toBe(false);
  });
});
