import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveSyncConfig, type SyncConfig, type SyncFlags } from '../../src/config/index.js';
import { syncCommand } from '../../src/cli/commands/sync.js';
import type { RunJson } from '../../src/reports/run-json.js';
import { RUNS_TABLE, SCHEMA_CHANGES_TABLE } from '../../src/analysts/run-history.js';
import { isolateNock } from '../fixtures/bigquery/destination.js';
import { serviceAccountKeyFile } from '../fixtures/bigquery/service-account.js';
import { billedBytes, FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';
import { statePathOf } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

/**
 * `sync` into BigQuery in-process, through the CLI's own wiring (config, openDestination with a
 * service-account key, the run envelope): the summary and `_query_sync_runs` say what the run's
 * queries were billed, as BigQuery reported it per job; and --bq-upsert reaches the destination.
 */

isolateNock();

/**
 * The CLI's config for these flags, its BigQuery jobs polled after 1 ms instead of 500 ms: the double
 * answers DONE at the first poll, and the run's jobs (about 90) would otherwise wait 45 s in all.
 */
function config(flags: SyncFlags): SyncConfig {
  const resolved = resolveSyncConfig(flags, {});
  if (resolved.bigquery === undefined) throw new Error('expected a BigQuery config');
  return { ...resolved, bigquery: { ...resolved.bigquery, pollMs: 1 } };
}

describe('bytes billed in the sync summary (BigQuery)', () => {
  it('--json carries bytesBilled (and per table); the text summary prints it; _query_sync_runs.bytes_billed holds the same figure', async () => {
    const emu = await emulator({ seed: 12, eventsPerProject: 30 });
    const d = dir();
    const fake = new FakeBigQuery('proj');
    fake.install();
    const sa = serviceAccountKeyFile(d);
    const flags = {
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      project: 'alpha',
      resources: 'events,users',
      destination: 'bigquery',
      bqProject: 'proj',
      bqDataset: 'sync',
      bqKeyFile: sa,
      state: statePathOf(d),
      traces: 'none',
    };

    const lines: string[] = [];
    const code = await syncCommand(config({ ...flags, json: true }), { print: (line) => void lines.push(line) });
    expect(code, lines.join('\n')).toBe(0);
    const json = JSON.parse(lines.join('\n')) as RunJson & {
      bytesBilled: number;
      bytesBilledByTable: Record<string, number>;
      runId: string;
    };

    // Each MERGE (events) is billed BigQuery's 10 MB minimum at least; the run's figure is the sum of its jobs'.
    expect(json.bytesBilledByTable['events']).toBeGreaterThanOrEqual(10 * 1024 * 1024);
    // users, a new table, has the change-log layout: appended by a load job and read through a view
    // (DDL), so the run is billed nothing for it.
    expect(json.bytesBilledByTable['users'] ?? 0).toBe(0);
    expect(json.bytesBilled).toBe(Object.values(json.bytesBilledByTable).reduce((n, b) => n + b, 0));
    const runsRow = fake.rows('sync', RUNS_TABLE).find((r) => r['run_id'] === json.runId);
    expect(Number(runsRow?.['bytes_billed'])).toBe(json.bytesBilled);
    // Every job but the run history's own writes (which come after the figure is read) is counted.
    const billedBefore = fake
      .calls('jobs.insert')
      .map((c) => c.id ?? '')
      .filter((id) => !id.includes(RUNS_TABLE) && !id.includes(SCHEMA_CHANGES_TABLE));
    expect(json.bytesBilled).toBe(billedBefore.reduce((n, id) => n + billedBytes(fake.processed.get(id) ?? 0), 0));

    // The text summary, of a first sync into another dataset (a second one into `sync` merges nothing).
    const text: string[] = [];
    expect(
      await syncCommand(config({ ...flags, bqDataset: 'other', state: join(d, 'other.json') }), {
        print: (line) => void text.push(line),
      }),
    ).toBe(0);
    expect(text.find((l) => l.startsWith('BigQuery: '))).toMatch(
      /^BigQuery: [\d.]+ MB billed by \d+ query job\(s\) \(.*(events|users) [\d.]+ MB/,
    );
    expect(text.at(-1)).toMatch(/^sync ok in /);
  });

  it('--bq-upsert reaches the destination: merge keeps a new users table in the merge layout, log then migrates it to the change log', async () => {
    const emu = await emulator({ seed: 13, eventsPerProject: 30 });
    const d = dir();
    const fake = new FakeBigQuery('proj');
    fake.install();
    const flags = {
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      project: 'alpha',
      resources: 'users',
      destination: 'bigquery',
      bqProject: 'proj',
      bqDataset: 'sync',
      bqKeyFile: serviceAccountKeyFile(d),
      state: statePathOf(d),
      traces: 'none',
    };
    const print = (): void => undefined;
    expect(await syncCommand(config({ ...flags, bqUpsert: 'merge' }), { print })).toBe(0);
    expect(fake.tables.get('sync.users')?.rangePartitioning?.field).toBe('key_bucket');
    const rows = fake.rows('sync', 'users').length;
    expect(rows).toBeGreaterThan(0);

    emu.addEvents('alpha', 5);
    expect(await syncCommand(config({ ...flags, bqUpsert: 'log' }), { print })).toBe(0);
    expect(fake.tables.get('sync.users')?.type).toBe('VIEW');
    expect(fake.rows('sync', 'users_merge_layout')).toHaveLength(rows);
    const ids = fake.rows('sync', 'users').map((r) => String(r['id']));
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(ids)).toEqual(new Set(emu.snapshot('users', 'alpha').map((r) => String(r['id']))));
  });
});
