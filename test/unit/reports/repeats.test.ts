import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { RepeatedLogs, summaryLines, withoutContext } from '../../../src/reports/repeats.js';
import { AuthError, DataError } from '../../../src/core/errors.js';
import { createLogger } from '../../../src/core/log.js';
import { newCallStats } from '../../../src/http/client.js';
import type { StreamResult } from '../../../src/sync/frame.js';

function capture(): { lines: () => Record<string, unknown>[]; stream: Writable } {
  const out: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _e, cb): void {
      out.push(chunk.toString());
      cb();
    },
  });
  return {
    stream,
    lines: () =>
      out
        .join('')
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('RepeatedLogs', () => {
  it('logs a warning or error once, counts its repeats (whatever stream they name) and reports them in one line', () => {
    const { stream, lines } = capture();
    const repeats = new RepeatedLogs();
    const logger = createLogger({ destination: stream, admit: repeats.admit });
    for (const project of ['alpha', 'beta', 'gamma']) {
      logger.error(
        { resource: 'traces', project },
        `[resource traces, project ${project}] the API key was rejected (401)`,
      );
      logger.info({ resource: 'traces', project }, 'stream done');
    }
    logger.warn('slow'); // a different message: its own line
    logger.error(
      { resource: 'events', project: '*[a,b]' },
      '[resource events, project *[a,b]] the API key was rejected (401)',
    );
    repeats.flush(logger);
    expect(lines().map((l) => l.msg)).toEqual([
      '[resource traces, project alpha] the API key was rejected (401)',
      'stream done',
      'stream done',
      'stream done',
      'slow',
      'the same error came 3 more times (traces beta, traces gamma, events *[a,b]): the API key was rejected (401)',
    ]);
    expect(lines().at(-1)).toMatchObject({
      level: 50,
      repeated: 3,
      streams: ['traces beta', 'traces gamma', 'events *[a,b]'],
    });
    // Flushed: a new run of repeats starts over.
    repeats.flush(logger);
    expect(lines()).toHaveLength(6);
  });

  it('strips only the context prefix, whatever brackets the scope holds', () => {
    expect(withoutContext('[resource events, project *[a,b]] boom [x]')).toBe('boom [x]');
    expect(withoutContext('[project beta] no')).toBe('no');
    expect(withoutContext('[not a prefix] kept')).toBe('[not a prefix] kept');
  });
});

describe('summaryLines', () => {
  const stream = (resource: string, scope: string, error?: Error): StreamResult => ({
    resource,
    scope,
    outcome: error === undefined ? 'ok' : 'failed',
    rows: 0,
    pages: 0,
    windows: 0,
    stats: newCallStats(),
    seconds: 0,
    error,
  });
  it('a failure shared by several streams is one note; a failure of one stream stays on its line', () => {
    const auth = (project: string): AuthError =>
      new AuthError('the API key was rejected (401)', 401, { context: { resource: 'traces', project } });
    const lines = summaryLines(
      [
        stream('events', '*'),
        stream('traces', 'alpha', auth('alpha')),
        stream('traces', 'beta', auth('beta')),
        stream('users', '*', new DataError('bad body', { context: { resource: 'users', project: '*' } })),
      ],
      'sync FAILED in 1.0 s',
    );
    expect(lines[0]).toMatch(/^events .* ok$/);
    expect(lines[1]).toMatch(/^traces +alpha .* FAILED: \[E1\] \(below\)$/);
    expect(lines[2]).toMatch(/^traces +beta .* FAILED: \[E1\] \(below\)$/);
    expect(lines[3]).toMatch(/FAILED: \[resource users, project \*\] bad body$/);
    expect(lines.slice(4)).toEqual([
      '[E1] AuthError in 2 streams: the API key was rejected (401)',
      'sync FAILED in 1.0 s',
    ]);
  });

  it('the rows= column lines up whatever the longest resource and scope (a search is "name@project")', () => {
    const lines = summaryLines(
      [stream('events', '*[alpha,default]'), stream('search_results', 'refunds@default'), stream('users', '*')],
      'sync ok in 1.0 s',
    );
    const at = lines.slice(0, 3).map((l) => l.indexOf('rows='));
    expect(new Set(at).size).toBe(1);
    expect(lines[1]).toMatch(/^search_results refunds@default +rows=0 /);
    // Short names keep the usual widths.
    expect(summaryLines([stream('events', '*')], 'ok')[0]).toMatch(/^events {8}\* {12} ?rows=0/);
  });
});
