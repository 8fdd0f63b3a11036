import { describe, expect, it } from 'vitest';
import { fitToTerminal } from '../../../src/cli/terminal-lines.js';

const TRACES =
  'traces        default      rows=273 pages=300 requests=302 retries=0 429s=2 waited=1934.1s backoff=0.0s seconds=131.1 ok';
const EVENTS =
  'events        *            rows=900 pages=9 requests=10 retries=0 429s=0 waited=0.2s backoff=0.0s seconds=0.9 ok';

describe('fitToTerminal', () => {
  it('leaves a line that fits, and every line when the width is unknown', () => {
    expect(fitToTerminal('sync ok in 1.0 s', 80)).toEqual(['sync ok in 1.0 s']);
    expect(fitToTerminal(TRACES, undefined)).toEqual([TRACES]);
    expect(fitToTerminal(TRACES, 200)).toEqual([TRACES]);
  });

  it('drops the zero (and sub-second wait) fields of a summary line that does not fit, keeping the others', () => {
    const [line, ...rest] = fitToTerminal(EVENTS, 80);
    expect(rest).toEqual([]);
    expect(line).toBe('events        *            rows=900 pages=9 requests=10 seconds=0.9 ok');
  });

  it('breaks at spaces, never inside a field, with the rest indented, each line within the width', () => {
    const lines = fitToTerminal(TRACES, 60);
    expect(lines.length).toBeGreaterThan(1);
    for (const l of lines) expect([...l].length).toBeLessThanOrEqual(59);
    for (const l of lines.slice(1)) expect(l.startsWith('  ')).toBe(true);
    const fields = lines
      .join(' ')
      .split(/\s+/)
      .filter((t) => t !== '');
    expect(fields).toEqual(TRACES.split(/\s+/).filter((t) => t !== '' && t !== 'retries=0' && t !== 'backoff=0.0s'));
  });

  it('keeps a JSON line whole (schedulers and people copy it)', () => {
    const json = JSON.stringify({
      command: 'sync',
      streams: Array.from({ length: 5 }, (_, i) => ({ resource: `r${i}`, rows: i })),
    });
    expect(fitToTerminal(json, 80)).toEqual([json]);
  });

  it('breaks a long sentence at words and a word longer than the width is left whole', () => {
    const sentence =
      'sync STOPPED (--max-run-time 15.0s reached) with 1825 rows stored by this run; the state records exactly what is stored';
    const lines = fitToTerminal(sentence, 40);
    expect(lines.join(' ').replace(/\s+/g, ' ')).toBe(sentence);
    const long = `x${'y'.repeat(100)}`;
    expect(fitToTerminal(`a ${long} b`, 40)).toEqual(['a', `  ${long}`, '  b']);
  });

  it('fits each line of a multi-line message', () => {
    expect(fitToTerminal(`${EVENTS}\nsync ok`, 80)).toEqual([
      'events        *            rows=900 pages=9 requests=10 seconds=0.9 ok',
      'sync ok',
    ]);
  });
});
