import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { statePathOf } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';
import { CLI } from '../fakes/cli.js';

describe('--destination bigquery --dry-run (the real CLI)', () => {
  it('prints the DDL, the exact requests and the MERGE for a small sample, sends nothing to BigQuery, and moves no state', async () => {
    const emu = await emulator({ seed: 12, eventsPerProject: 3000 });
    const d = dir();
    const child = spawn(
      process.execPath,
      [
        CLI,
        'sync',
        '--resources',
        'events,traces',
        '--destination',
        'bigquery',
        '--bq-project',
        'my-proj',
        '--bq-dataset',
        'qs',
        '--dry-run',
        '--dry-run-limit',
        '10',
        '--state',
        statePathOf(d),
        '--log-level',
        'warn',
        '--quiet',
      ],
      {
        // No credentials and an unroutable endpoint: any request to BigQuery would fail the run.
        env: {
          ...process.env,
          QUERY_API_BASE_URL: emu.url,
          QUERY_API_KEY: emu.apiKey,
          GOOGLE_APPLICATION_CREDENTIALS: '/nonexistent.json',
        },
      },
    );
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code, out).toBe(0);
    expect(out).toMatch(/CREATE SCHEMA IF NOT EXISTS `my-proj`\.`qs`/);
    expect(out).toMatch(
      /CREATE TABLE[^\n]*`my-proj`\.`qs`\.`events`[\s\S]*PARTITION BY DATE\(`?timestamp`?\)[\s\S]*CLUSTER BY `?project_id`?, `?id`?/,
    );
    expect(out).toMatch(/MERGE `my-proj`\.`qs`\.`events`/);
    expect(out).toMatch(/`my-proj`\.`qs`\.`traces`/);
    // The requests themselves, as the client would send them, in the dataset's location.
    expect(out).toMatch(
      /-- request: POST \/bigquery\/v2\/projects\/my-proj\/datasets\/qs\/tables \{"schema":\{"fields":\[\{"name":"project_id","type":"STRING","mode":"NULLABLE"\}/,
    );
    expect(out).toMatch(
      /-- request: POST \/upload\/bigquery\/v2\/projects\/my-proj\/jobs\?uploadType=multipart \{"configuration":\{"load":\{"sourceFormat":"NEWLINE_DELIMITED_JSON","writeDisposition":"WRITE_EMPTY"/,
    );
    expect(out).toMatch(
      /-- request: POST \/bigquery\/v2\/projects\/my-proj\/jobs \{"configuration":\{"query":\{"query":"MERGE `my-proj`\.`qs`\.`events` AS T\\nUSING/,
    );
    // A sample, not all history: one write per stream, from its first page (and one read ahead).
    const writes = out.match(/-- bigquery dry run: (\d+) row\(s\) for table events/g) ?? [];
    expect(writes).toHaveLength(1);
    expect(Number(/(\d+) row/.exec(writes[0] ?? '')?.[1])).toBeLessThanOrEqual(100);
    const eventPages = emu.stats().byEndpoint['/v1/events'] ?? 0;
    expect(eventPages).toBeLessThanOrEqual(4);
    const marks = existsSync(statePathOf(d))
      ? Object.values(
          (
            JSON.parse(readFileSync(statePathOf(d), 'utf8')) as {
              streams: Record<string, { mark?: string; pending?: unknown }>;
            }
          ).streams,
        )
      : [];
    expect(marks.filter((s) => s.mark !== undefined || s.pending !== undefined)).toEqual([]);
  });
});

describe('--dry-run-limit', () => {
  it('goes with --dry-run only, and must be a whole number', async () => {
    const emu = await emulator({ seed: 12, eventsPerProject: 10 });
    const run = async (args: string[]): Promise<{ code: number | null; out: string }> => {
      const child = spawn(
        process.execPath,
        [CLI, 'sync', '--destination', 'bigquery', '--bq-project', 'p', '--bq-dataset', 'd', ...args],
        {
          env: { ...process.env, QUERY_API_BASE_URL: emu.url, QUERY_API_KEY: emu.apiKey },
        },
      );
      let out = '';
      child.stdout.on('data', (b: Buffer) => (out += b.toString()));
      child.stderr.on('data', (b: Buffer) => (out += b.toString()));
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      return { code, out };
    };
    const alone = await run(['--dry-run-limit', '10']);
    expect(alone.code).toBe(2);
    expect(alone.out).toMatch(/--dry-run-limit .* use it with --dry-run/);
    const zero = await run(['--dry-run', '--dry-run-limit', '0']);
    expect(zero.code).toBe(2);
    expect(zero.out).toMatch(/--dry-run-limit: expected a whole number of rows ≥ 1/);
    expect(emu.stats().requests).toBe(0);
  });
});
