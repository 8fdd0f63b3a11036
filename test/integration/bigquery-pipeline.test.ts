import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { traces } from '../../connectors/traces.js';
import type { Emulator } from '../../emulator/index.js';
import type { BigQueryDestination } from '../../src/load/bigquery/destination.js';
import { isolateNock, testBigQueryDestination } from '../fixtures/bigquery/destination.js';
import { StateStore } from '../../src/state/store.js';
import { FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';
import { serviceAccountKeyFile } from '../fixtures/bigquery/service-account.js';
import { statusCommand } from '../../src/cli/commands/status.js';
import { verifyCounts } from '../../src/reconcile/verify.js';
import { statePathOf, syncOnce, withPipeline } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

/** The whole pipeline (emulator → normalize → BigQuery through the real client, HTTP answered by nock). */

isolateNock();

async function setup(): Promise<{ emu: Emulator; fake: FakeBigQuery; dir: string }> {
  const emu = await emulator({ seed: 31, eventsPerProject: 150 });
  const fake = new FakeBigQuery('proj');
  fake.install();
  return { emu, fake, dir: dir() };
}

const destination = (): (() => Promise<BigQueryDestination>) => async () => testBigQueryDestination();

const markOf = (dir: string, stream: string): string | undefined => {
  try {
    return (JSON.parse(readFileSync(statePathOf(dir), 'utf8')) as { streams: Record<string, { mark?: string }> })
      .streams[stream]?.mark;
  } catch {
    return undefined;
  }
};

describe('sync into BigQuery', () => {
  it('moves the mark only after the MERGE job is DONE, and uploads every row exactly once', async () => {
    const { emu, fake, dir } = await setup();
    fake.pollsBeforeDone = (job) => (job.type === 'query' ? 2 : 0);
    const marksSeenWhileMerging: Array<string | undefined> = [];
    fake.intercept = (request) => {
      if (request.api === 'jobs.get' && request.id?.startsWith('qs_merge_events'))
        marksSeenWhileMerging.push(markOf(dir, 'events:default'));
      return undefined;
    };
    const summary = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir,
      resources: [events, traces],
      destination: destination(),
    });
    expect(summary.ok, JSON.stringify(summary.streams.map((s) => s.error?.message))).toBe(true);
    expect(marksSeenWhileMerging.length).toBeGreaterThan(0);
    expect(marksSeenWhileMerging.every((m) => m === undefined)).toBe(true);
    expect(markOf(dir, 'events:default')).toBeDefined();

    // Every event of the API was uploaded through a load job (never insertAll), once per key.
    expect(fake.calls('tabledata.insertAll')).toHaveLength(0);
    const uploaded = fake.uploads
      .filter((u) => u.load.destinationTable.tableId.startsWith('events__stage_'))
      .flatMap((u) => u.ndjson.trim().split('\n'))
      .map((line) => JSON.parse(line) as { project_id: string; id: string });
    const keys = uploaded.map((r) => `${r.project_id}/${r.id}`);
    expect(new Set(keys).size).toBe(keys.length);
    expect(new Set(keys)).toEqual(new Set(emu.snapshot('events', 'default').map((r) => `default/${String(r.id)}`)));
    // Nanosecond integers travel as exact digits.
    const spanLine =
      fake.uploads.find((u) => u.load.destinationTable.tableId.startsWith('traces__stage_'))?.ndjson ?? '';
    const ns = /"start_time_ns":"(\d+)"/.exec(spanLine)?.[1];
    expect(ns && BigInt(ns) % 1_000_000n !== 0n).toBe(true);
    const merges = fake.queries.filter((q) => q.jobId.startsWith('qs_merge_events'));
    expect(merges.length).toBeGreaterThan(0);
    expect(merges[0]?.query).toMatch(
      /DATE\(T\.`timestamp`\) IN \(DATE '\d{4}-\d{2}-\d{2}'(, DATE '\d{4}-\d{2}-\d{2}')*\)/,
    );
  });

  it('a failed MERGE leaves the mark unmoved, reports the job errors, and fails the run', async () => {
    const { emu, fake, dir } = await setup();
    fake.outcome = (job) =>
      job.type === 'query' && job.jobId.startsWith('qs_merge_events')
        ? {
            errorResult: { reason: 'invalidQuery', message: 'Column timestamp cannot be matched' },
            errors: [{ reason: 'invalidQuery', message: 'Column timestamp cannot be matched' }],
          }
        : undefined;
    const summary = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir,
      resources: [events],
      destination: destination(),
    });
    expect(summary.ok).toBe(false);
    expect(summary.streams[0]?.error?.message).toMatch(/Column timestamp cannot be matched/);
    const doc = await StateStore.read(statePathOf(dir));
    expect(doc.streams['events:default']?.mark).toBeUndefined();
    expect(doc.streams['events:default']?.pending).toBeUndefined();
  });
});

describe('verify and status on BigQuery', () => {
  it('verify counts each window in BigQuery (dataset location, not the configured one) and finds a missing row', async () => {
    const { emu, fake, dir } = await setup();
    fake.addDataset('sync', 'EU');
    const summary = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir,
      resources: [events],
      destination: destination(),
    });
    expect(summary.ok).toBe(true);
    const times = emu.snapshot('events', 'default').map((r) => Date.parse(String(r.timestamp)));
    const fromMs = Math.floor(Math.min(...times) / 86_400_000) * 86_400_000;
    const toMs = Math.ceil((Math.max(...times) + 1) / 86_400_000) * 86_400_000;
    const verify = (): Promise<Awaited<ReturnType<typeof verifyCounts>>> =>
      withPipeline({ baseUrl: emu.url, apiKey: emu.apiKey, dir, destination: destination() }, 'backfill', (deps) =>
        verifyCounts(
          { resources: [events], project: undefined, knownProjects: [], fromMs, toMs, windowMs: 86_400_000 },
          deps,
        ),
      );
    const clean = await verify();
    expect(clean.windows.length).toBeGreaterThan(1);
    expect(clean.mismatches).toBe(0);
    expect(clean.windows.reduce((n, w) => n + w.warehouse, 0)).toBe(emu.snapshot('events', 'default').length);
    expect(fake.queries.filter((q) => q.query.startsWith('SELECT')).every((q) => q.location === 'EU')).toBe(true);

    // A row lost from the warehouse is found in its window.
    const rows = fake.data.get('sync.events') ?? [];
    const victim = rows.pop();
    const found = await verify();
    expect(found.mismatches).toBe(1);
    const bad = found.windows.find((w) => !w.match);
    expect(bad?.api).toBe((bad?.warehouse ?? 0) + 1);
    expect(Date.parse(String(victim?.['timestamp']))).toBeGreaterThanOrEqual(Date.parse(bad?.from ?? ''));
  });

  it("status reads row counts per project from BigQuery in the dataset's location", async () => {
    const { emu, fake, dir } = await setup();
    fake.addDataset('sync', 'EU');
    const summary = await syncOnce({
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir,
      resources: [events],
      destination: destination(),
    });
    expect(summary.ok).toBe(true);
    // The CLI's own wiring (openDestination) with a service-account key; nock answers the token endpoint.
    const keyFile = serviceAccountKeyFile(dir);
    const lines: string[] = [];
    const code = await statusCommand(
      {
        statePath: statePathOf(dir),
        resources: [events, traces],
        destination: 'bigquery',
        duckdbPath: join(dir, 'unused.duckdb'),
        duckdbMemoryLimitBytes: 32_000_000,
        bigquery: { projectId: 'proj', dataset: 'sync', location: 'US', apiEndpoint: undefined, keyFile, pollMs: 1 },
        dryRun: false,
        lockWaitMs: 0,
        json: true,
        limits: { maxRpm: 400 },
      },
      { print: (line) => void lines.push(line) },
    );
    expect(code).toBe(0);
    const report = JSON.parse(lines.join('\n')) as {
      warehouse: {
        available: boolean;
        reason?: string;
        tables: Record<string, { rows: number; byProject?: Record<string, number> }>;
      };
    };
    expect(report.warehouse.available, report.warehouse.reason).toBe(true);
    const n = emu.snapshot('events', 'default').length;
    expect(report.warehouse.tables['events']).toEqual({ rows: n, byProject: { default: n } });
    expect(report.warehouse.tables['traces']).toEqual({ rows: 0, byProject: {} });
    expect(fake.queries.filter((q) => q.query.startsWith('SELECT')).every((q) => q.location === 'EU')).toBe(true);
  });
});
