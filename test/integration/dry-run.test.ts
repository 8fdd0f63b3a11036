import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator } from '../../src/emulator/index.js';
import { statePathOf } from '../fakes/harness.js';
import { tempDir } from '../fakes/tmp.js';

const CLI = join(process.cwd(), 'dist', 'src', 'cli.js');
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('--destination bigquery --dry-run (the real CLI)', () => {
  it('prints the DDL, the tables it would create and the MERGE, sends nothing to BigQuery, and moves no state', async () => {
    const emu = await startEmulator({ seed: 12, eventsPerProject: 40 });
    cleanups.push(() => emu.close());
    const d = tempDir();
    cleanups.push(d.cleanup);
    const child = spawn(
      process.execPath,
      [CLI, 'sync', '--resources', 'events,traces', '--destination', 'bigquery', '--bq-project', 'my-proj', '--bq-dataset', 'qs',
        '--dry-run', '--state', statePathOf(d.dir), '--log-level', 'warn'],
      {
        // No credentials and an unroutable endpoint: any request to BigQuery would fail the run.
        env: { ...process.env, QUERY_API_BASE_URL: emu.url, QUERY_API_KEY: emu.apiKey, GOOGLE_APPLICATION_CREDENTIALS: '/nonexistent.json' },
      },
    );
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code, out).toBe(0);
    expect(out).toMatch(/CREATE SCHEMA IF NOT EXISTS `my-proj`\.`qs`/);
    expect(out).toMatch(/CREATE TABLE[^\n]*`my-proj`\.`qs`\.`events`[\s\S]*PARTITION BY DATE\(`?timestamp`?\)[\s\S]*CLUSTER BY `?project_id`?, `?id`?/);
    expect(out).toMatch(/MERGE `my-proj`\.`qs`\.`events`/);
    expect(out).toMatch(/`my-proj`\.`qs`\.`traces`/);
    const marks = existsSync(statePathOf(d.dir))
      ? Object.values((JSON.parse(readFileSync(statePathOf(d.dir), 'utf8')) as { streams: Record<string, { mark?: string; pending?: unknown }> }).streams)
      : [];
    expect(marks.filter((s) => s.mark !== undefined || s.pending !== undefined)).toEqual([]);
  });
});
