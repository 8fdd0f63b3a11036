import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  DEFAULT_BATCH_ROWS,
  OPTIONS,
  resolveBackfillConfig,
  resolveStatusConfig,
  resolveSyncConfig,
} from '../../../src/config/index.js';
import { ConfigError } from '../../../src/core/errors.js';
import { DEFAULT_TIMEOUTS } from '../../../src/http/timeouts.js';
import { envName } from '../../../src/config/options.js';
import { CLI } from '../../fakes/cli.js';
import { tempDir } from '../../fakes/tmp.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});
function dir(): string {
  const d = tempDir();
  cleanups.push(d.cleanup);
  return d.dir;
}

const ENV = { QUERY_API_BASE_URL: 'https://query.example.com', QUERY_API_KEY: 'k' };

function refused(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error('expected a ConfigError');
}

describe('settings: flag > QUERY_SYNC_<FLAG> > config file > default', () => {
  it('every flag has an env name, a help group, and its default in help comes from the same constant config applies', () => {
    for (const o of OPTIONS) expect(envName(o.name)).toMatch(/^QUERY_SYNC_[A-Z0-9_]+$/);
    const c = resolveSyncConfig({}, ENV);
    expect(c.timeouts).toEqual(DEFAULT_TIMEOUTS);
    expect(c.batchRows).toBe(DEFAULT_BATCH_ROWS.duckdb);
    expect(OPTIONS.find((o) => o.name === 'body-timeout')?.defaultText).toBe(`${DEFAULT_TIMEOUTS.bodyMs / 60_000}m`);
  });

  it('reads each flag from its env name and from a YAML or JSON config file; a flag wins over env, env over the file', () => {
    const d = dir();
    const yaml = join(d, 'query-sync.yaml');
    writeFileSync(yaml, 'lookback: 30m\nmax-rpm: 100\nduckdb-path: data/w.duckdb\nresources: events,users\n');
    const fromFile = resolveSyncConfig({ config: yaml }, ENV);
    expect(fromFile.lookbackMs).toBe(30 * 60_000);
    expect(fromFile.limits.maxRpm).toBe(100);
    expect(fromFile.duckdbPath).toBe(join(d, 'data', 'w.duckdb')); // relative to the file
    expect(fromFile.resources.map((r) => r.name)).toEqual(['events', 'users']);
    const fromEnv = resolveSyncConfig(
      { config: yaml },
      { ...ENV, QUERY_SYNC_LOOKBACK: '1h', QUERY_SYNC_MAX_RPM: '200' },
    );
    expect(fromEnv.lookbackMs).toBe(3_600_000);
    expect(fromEnv.limits.maxRpm).toBe(200);
    const fromFlag = resolveSyncConfig({ config: yaml, lookback: '2h' }, { ...ENV, QUERY_SYNC_LOOKBACK: '1h' });
    expect(fromFlag.lookbackMs).toBe(7_200_000);
    const json = join(d, 'query-sync.json');
    writeFileSync(json, JSON.stringify({ quiet: true, 'batch-rows': 100 }));
    const c = resolveSyncConfig({}, { ...ENV, QUERY_SYNC_CONFIG: json });
    expect(c.quiet).toBe(true);
    expect(c.batchRows).toBe(100);
  });

  it('docs/configuration.md documents every option with its env name', () => {
    const readme = readFileSync(join(process.cwd(), 'docs', 'configuration.md'), 'utf8');
    for (const o of OPTIONS) {
      if (!o.secret) expect(readme, o.name).toContain(`| \`--${o.name}\` | \`${envName(o.name)}\``);
      else if (o.name === 'api-key')
        expect(readme, o.name).toContain(`| \`--api-key\` (warned: shows in \`ps\`) | \`${envName(o.name)}\``);
      else expect(readme, o.name).toContain(`| — | \`${envName(o.name)}\``);
    }
  });

  it('--bq-upsert and --bq-compact-every reach the BigQuery config; an unknown layout is refused', () => {
    const bq = { destination: 'bigquery', bqProject: 'p', bqDataset: 'd' };
    expect(resolveSyncConfig({ ...bq, bqUpsert: 'log', bqCompactEvery: '72h' }, ENV).bigquery).toMatchObject({
      upsert: 'log',
      compactEveryMs: 72 * 3_600_000,
    });
    expect(resolveSyncConfig(bq, { ...ENV, QUERY_SYNC_BQ_UPSERT: 'merge' }).bigquery?.upsert).toBe('merge');
    expect(resolveSyncConfig(bq, ENV).bigquery?.upsert).toBeUndefined();
    expect(refused(() => resolveSyncConfig({ ...bq, bqUpsert: 'sideways' }, ENV))).toMatch(
      /bq-upsert.*expected auto, log or merge, got "sideways"/,
    );
  });

  it('refuses a misspelt QUERY_SYNC_ variable instead of ignoring it', () => {
    expect(refused(() => resolveSyncConfig({}, { ...ENV, QUERY_SYNC_LOOKBAK: '1h' }))).toBe(
      'QUERY_SYNC_LOOKBAK is not a query-sync setting: did you mean QUERY_SYNC_LOOKBACK? (every setting: query-sync <command> --help)',
    );
    expect(
      resolveSyncConfig({}, { ...ENV, QUERY_SYNC_OPTIMIZE_FOR: 'speed', QUERY_SYNC_WINDOW: '1d' }).lookbackMs,
    ).toBe(15 * 60_000);
  });

  it('keeps the old env names as aliases; QUERY_SYNC_* wins over them', () => {
    expect(resolveSyncConfig({}, { ...ENV, QUERY_API_PROJECT: 'alpha' }).project).toBe('alpha');
    expect(resolveSyncConfig({}, { ...ENV, QUERY_API_PROJECT: 'alpha', QUERY_SYNC_PROJECT: 'beta' }).project).toBe(
      'beta',
    );
    expect(resolveSyncConfig({}, { QUERY_SYNC_BASE_URL: 'http://h', QUERY_SYNC_API_KEY: 'k2' }).apiKey).toBe('k2');
  });

  it('takes the key from --api-key-file, never from a config file', () => {
    const d = dir();
    writeFileSync(join(d, 'key'), 'qs_from_secret\n');
    expect(resolveSyncConfig({ apiKeyFile: join(d, 'key') }, { QUERY_API_BASE_URL: 'http://h' }).apiKey).toBe(
      'qs_from_secret',
    );
    writeFileSync(join(d, 'c.yaml'), 'api-key: qs_in_file\n');
    expect(refused(() => resolveSyncConfig({ config: join(d, 'c.yaml') }, { QUERY_API_BASE_URL: 'http://h' }))).toMatch(
      /holds "api-key", a secret: secrets are read only from the environment \(QUERY_SYNC_API_KEY\) or a file/,
    );
    writeFileSync(join(d, 'typo.yaml'), 'look-back: 15m\n');
    expect(refused(() => resolveSyncConfig({ config: join(d, 'typo.yaml') }, ENV))).toMatch(
      /unknown setting "look-back"/,
    );
  });
});

describe('units and instants', () => {
  it('refuses a bare number for a duration or size, showing the right form and where the value came from', () => {
    expect(
      refused(() =>
        resolveBackfillConfig({ from: '2026-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z', window: '1' }, ENV),
      ),
    ).toBe('--window: "1" has no unit; write it with one, e.g. 1s, 1m, 1h or 1d (units: ms, s, m, h, d, w)');
    expect(refused(() => resolveSyncConfig({}, { ...ENV, QUERY_SYNC_LOOKBACK: '15' }))).toMatch(
      /^QUERY_SYNC_LOOKBACK: "15" has no unit/,
    );
    expect(refused(() => resolveSyncConfig({ duckdbMemoryLimit: '512' }, ENV))).toMatch(
      /--duckdb-memory-limit: "512" has no unit; write it with one, e.g. 512MB/,
    );
    expect(refused(() => resolveSyncConfig({ lookback: 'soon' }, ENV))).toMatch(
      /expected a duration with a unit such as 500ms, 30s, 15m/,
    );
    expect(resolveSyncConfig({ lockWait: '0' }, ENV).lockWaitMs).toBe(0); // zero needs no unit
    expect(resolveSyncConfig({ lookback: '1d' }, ENV).lookbackMs).toBe(86_400_000);
  });

  it('refuses impossible dates and times without an offset', () => {
    const range = (from: string): unknown => resolveBackfillConfig({ from, to: '2026-04-01T00:00:00Z' }, ENV);
    expect(refused(() => range('2026-02-30T00:00:00Z'))).toMatch(
      /--from: "2026-02-30T00:00:00Z" is not a real date and time/,
    );
    expect(refused(() => range('2026-03-01T24:30:00Z'))).toMatch(/not a real date and time/);
    expect(refused(() => range('2026-03-01T10:00:00'))).toMatch(
      /expected an ISO-8601 instant with its offset.*\(it has no offset: add Z for UTC, or \+hh:mm\)/,
    );
    expect(refused(() => range('2026-03-01'))).toMatch(/it has no offset/);
    expect(refused(() => resolveSyncConfig({ start: 'yesterday' }, ENV))).toMatch(
      /--start: expected an ISO-8601 instant/,
    );
    expect(
      resolveBackfillConfig({ from: '2026-03-01T09:00:00+09:00', to: '2026-04-01T00:00:00Z' }, ENV).range.fromMs,
    ).toBe(Date.parse('2026-03-01T00:00:00Z'));
  });

  it('status reads its settings through the same table', () => {
    expect(resolveStatusConfig({}, { QUERY_SYNC_STATE: '/data/s.json', QUERY_SYNC_JSON: 'true' })).toMatchObject({
      statePath: '/data/s.json',
      json: true,
    });
  });
});

describe('the CLI', () => {
  const cli = (args: string[], env: Record<string, string> = {}): { code: number | null; out: string } => {
    const r = spawnSync(process.execPath, [CLI, ...args], {
      env: { ...process.env, ...ENV, ...env },
      encoding: 'utf8',
    });
    return { code: r.status, out: r.stdout + r.stderr };
  };

  it('--version prints its own package.json version, whatever folder it runs from (not the nearest package.json)', () => {
    const own = (JSON.parse(readFileSync(join(process.cwd(), 'package.json'), 'utf8')) as { version: string }).version;
    const other = tempDir();
    cleanups.push(other.cleanup);
    writeFileSync(
      join(other.dir, 'package.json'),
      JSON.stringify({ name: 'some-analytics-project', version: '9.9.9' }),
    );
    const r = spawnSync(process.execPath, [CLI, '--version'], { cwd: other.dir, env: process.env, encoding: 'utf8' });
    expect({ code: r.status, out: r.stdout.trim() }).toEqual({ code: 0, out: own });
  });

  it('exits 2 on a bare duration or an impossible date, before any request', () => {
    expect(cli(['sync', '--lookback', '15', '--base-url', 'http://127.0.0.1:9'])).toMatchObject({
      code: 2,
      out: expect.stringMatching(/--lookback: "15" has no unit/),
    });
    expect(cli(['backfill', '--from', '2026-02-30T00:00:00Z', '--to', '2026-03-02T00:00:00Z'])).toMatchObject({
      code: 2,
      out: expect.stringMatching(/not a real date/),
    });
    expect(cli(['sync'], { QUERY_SYNC_WINDOW: '1', QUERY_SYNC_MAX_RUN_TIME: '90' })).toMatchObject({
      code: 2,
      out: expect.stringMatching(/QUERY_SYNC_MAX_RUN_TIME: "90" has no unit/),
    });
  });

  it('takes the key as a flag with a warning (it shows in the process list), refuses the salt as one, and groups --help', () => {
    // A bare --lookback stops the run before any request: only the warning and the error remain.
    const key = cli(['sync', '--api-key', 'qs_secret_on_argv', '--lookback', '15']);
    expect(key.code).toBe(2);
    expect(key.out).toMatch(/warning: --api-key shows in the process list.*QUERY_SYNC_API_KEY.*--api-key-file/);
    expect(key.out).not.toContain('qs_secret_on_argv');
    const salt = cli(['sync', '--hash-salt', 'pepper_on_argv_0123456789']);
    expect(salt.code).toBe(2);
    expect(salt.out).toMatch(/--hash-salt is not accepted on the command line/);
    expect(salt.out).not.toContain('pepper_on_argv');
    const help = cli(['sync', '--help']).out;
    for (const group of ['Connection:', 'Scope:', 'Destination:', 'State and run:', 'Pacing:', 'Logging and output:'])
      expect(help).toContain(group);
    expect(help).toMatch(/--lookback[\s\S]*QUERY_SYNC_LOOKBACK[\s\S]*default: 15m/);
  });
});
