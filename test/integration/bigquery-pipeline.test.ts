import { readFileSync } from 'node:fs';
import { PassThroughClient } from 'google-auth-library';
import nock from 'nock';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import { traces } from '../../connectors/traces.js';
import { startEmulator, type Emulator } from '../../src/emulator/index.js';
import { BigQueryDestination } from '../../src/load/bigquery.js';
import { StateStore } from '../../src/state/store.js';
import { FakeBigQuery } from '../fixtures/bigquery/fake-bigquery.js';
import { statePathOf, syncOnce } from '../fakes/harness.js';
import { tempDir } from '../fakes/tmp.js';

/** The whole pipeline (emulator → normalize → BigQuery through the real client, HTTP answered by nock). */

const cleanups: Array<() => unknown> = [];
beforeEach(() => {
  nock.cleanAll();
  nock.disableNetConnect();
  nock.enableNetConnect('127.0.0.1');
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  nock.cleanAll();
  nock.enableNetConnect();
});

async function setup(): Promise<{ emu: Emulator; fake: FakeBigQuery; dir: string }> {
  const emu = await startEmulator({ seed: 31, eventsPerProject: 150 });
  cleanups.push(() => emu.close());
  const d = tempDir();
  cleanups.push(d.cleanup);
  const fake = new FakeBigQuery('proj');
  fake.install();
  return { emu, fake, dir: d.dir };
}

function destination(): () => Promise<BigQueryDestination> {
  return async () =>
    new BigQueryDestination({
      projectId: 'proj',
      dataset: 'sync',
      authClient: new PassThroughClient(),
      sleep: async () => undefined,
      maxAttempts: 3,
      retryBaseMs: 1,
    });
}

const markOf = (dir: string, stream: string): string | undefined => {
  try {
    return (JSON.parse(readFileSync(statePathOf(dir), 'utf8')) as { streams: Record<string, { mark?: string }> }).streams[stream]?.mark;
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
      if (request.api === 'jobs.get' && request.id?.startsWith('qs_merge_events')) marksSeenWhileMerging.push(markOf(dir, 'events:default'));
      return undefined;
    };
    const summary = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir, resources: [events, traces], destination: destination() });
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
    const spanLine = fake.uploads.find((u) => u.load.destinationTable.tableId.startsWith('traces__stage_'))?.ndjson ?? '';
    const ns = /"start_time_ns":"(\d+)"/.exec(spanLine)?.[1];
    expect(ns && BigInt(ns) % 1_000_000n !== 0n).toBe(true);
    const merges = fake.queries.filter((q) => q.jobId.startsWith('qs_merge_events'));
    expect(merges.length).toBeGreaterThan(0);
    expect(merges[0]?.query).toMatch(/DATE\(T\.`timestamp`\) IN \(DATE '\d{4}-\d{2}-\d{2}'(, DATE '\d{4}-\d{2}-\d{2}')*\)/);
  });

  it('a failed MERGE leaves the mark unmoved, reports the job errors, and fails the run', async () => {
    const { emu, fake, dir } = await setup();
    fake.outcome = (job) =>
      job.type === 'query' && job.jobId.startsWith('qs_merge_events')
        ? { errorResult: { reason: 'invalidQuery', message: 'Column timestamp cannot be matched' }, errors: [{ reason: 'invalidQuery', message: 'Column timestamp cannot be matched' }] }
        : undefined;
    const summary = await syncOnce({ baseUrl: emu.url, apiKey: emu.apiKey, dir, resources: [events], destination: destination() });
    expect(summary.ok).toBe(false);
    expect(summary.streams[0]?.error?.message).toMatch(/Column timestamp cannot be matched/);
    const doc = await StateStore.read(statePathOf(dir));
    expect(doc.streams['events:default']?.mark).toBeUndefined();
    expect(doc.streams['events:default']?.pending).toBeUndefined();
  });
});
