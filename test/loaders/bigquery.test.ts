import { isLosslessNumber, parse as losslessParse } from 'lossless-json';
import { afterEach, describe, expect, it } from 'vitest';
import { AuthError, ConfigError, LoadError, RetriesExhaustedError } from '../../src/core/errors.js';
import type { LogicalType, TableSchema } from '../../src/core/types.js';
import type { BigQueryDestination, BigQueryDestinationOptions } from '../../src/load/bigquery/destination.js';
import {
  capturedLogger,
  isolateNock,
  testBigQueryDestination,
  testBigQueryDryRun,
} from '../fixtures/bigquery/destination.js';
import {
  FakeBigQuery,
  errorReply,
  type RecordedRequest,
  type TableResource,
} from '../fixtures/bigquery/fake-bigquery.js';
import {
  BEYOND_2_53,
  LAST_NS_OF_MAY_1,
  eventRows,
  eventsTable,
  traceRows,
  tracesTable,
} from '../fixtures/bigquery/tables.js';

const NOW = Date.parse('2024-05-03T12:00:00Z');
const DAY_MS = 24 * 60 * 60 * 1000;
const STAGE = /^events__stage_[0-9a-f]{12}$/;
/** Type names as tables.get reports them for tables created earlier. */
const LEGACY_NAMES: Record<LogicalType, string> = {
  string: 'STRING',
  int64: 'INTEGER',
  float64: 'FLOAT',
  bool: 'BOOLEAN',
  timestamp: 'TIMESTAMP',
  json: 'JSON',
};
/** What writing the fixture events fails with (the test says what it must be). */
const writeError = (dest: BigQueryDestination): Promise<unknown> =>
  dest.write({ table: eventsTable, rows: eventRows }).catch((e: unknown) => e);
/** A table's columns as BigQuery fields with those names. */
const legacyFields = (table: TableSchema): { name: string; type: string }[] =>
  table.columns.map((c) => ({ name: c.name, type: LEGACY_NAMES[c.type] }));

interface Harness {
  readonly fake: FakeBigQuery;
  readonly dest: BigQueryDestination;
  readonly sleeps: number[];
  readonly logs: Record<string, unknown>[];
  readonly printed: string[];
}

let harness: Harness | undefined;

function setup(options: Partial<BigQueryDestinationOptions> = {}): Harness {
  const fake = new FakeBigQuery('proj');
  fake.install(options.apiEndpoint);
  const sleeps: number[] = [];
  const printed: string[] = [];
  const { logger, logs } = capturedLogger();
  const dest = testBigQueryDestination({
    logger,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    now: () => NOW,
    retryBaseMs: 100,
    ...options,
  });
  harness = { fake, dest, sleeps, logs, printed };
  return harness;
}

isolateNock();

afterEach(async () => {
  // Every request the client made was one the fake serves.
  const unhandled = harness?.fake.unhandled.map((r) => `${r.method} ${r.path}`) ?? [];
  await harness?.dest.close();
  harness = undefined;
  expect(unhandled).toEqual([]);
});

function body(request: RecordedRequest | undefined): Record<string, unknown> {
  expect(request).toBeDefined();
  return request?.body as Record<string, unknown>;
}

function ndjsonLines(ndjson: string): Record<string, unknown>[] {
  expect(ndjson.endsWith('\n')).toBe(true);
  return ndjson
    .slice(0, -1)
    .split('\n')
    .map((line) => losslessParse(line) as Record<string, unknown>);
}

function onlyQuery(fake: FakeBigQuery): string {
  expect(fake.queries).toHaveLength(1);
  return fake.queries[0]?.query ?? '';
}

describe('BigQueryDestination setup', () => {
  it('creates the dataset in its location, then the table with DAY partitioning and clustering', async () => {
    const { fake, dest } = setup({ location: 'EU' });
    await dest.write({ table: eventsTable, rows: eventRows });

    const order = fake.requests.map((r) => `${r.api} ${r.id ?? ''}`.trim());
    expect(order.slice(0, 4)).toEqual([
      'datasets.get sync',
      'datasets.insert sync',
      'tables.get events',
      'tables.insert events',
    ]);

    expect(body(fake.calls('datasets.insert')[0])).toMatchObject({
      datasetReference: { datasetId: 'sync' },
      location: 'EU',
    });
    const created = body(fake.calls('tables.insert')[0]) as unknown as TableResource;
    expect(created.tableReference).toEqual({ projectId: 'proj', datasetId: 'sync', tableId: 'events' });
    expect(created.timePartitioning).toEqual({ type: 'DAY', field: 'timestamp' });
    expect(created.clustering).toEqual({ fields: ['project_id', 'id'] });
    expect(created.schema?.fields.map((f) => `${f.name}:${f.type}`)).toEqual([
      'project_id:STRING',
      'id:STRING',
      'timestamp:TIMESTAMP',
      'event_name:STRING',
      'user_id:STRING',
      'properties:JSON',
      'duration_ns:INT64',
      'score:FLOAT64',
      'is_test:BOOL',
      '_synced_at:TIMESTAMP',
    ]);
    // Jobs run where the dataset is.
    expect(fake.queries[0]?.location).toBe('EU');
  });

  it('partitions traces on a real TIMESTAMP start_time_ts computed exactly from the ns bigint (never _PARTITION…)', async () => {
    const { fake, dest } = setup();
    await dest.write({ table: tracesTable, rows: traceRows });

    const created = body(fake.calls('tables.insert').find((r) => r.id === 'traces')) as unknown as TableResource;
    expect(created.timePartitioning).toEqual({ type: 'DAY', field: 'start_time_ts' });
    expect(created.clustering).toEqual({ fields: ['project_id', 'span_id'] });
    expect(created.schema?.fields.at(-1)).toMatchObject({ name: 'start_time_ts', type: 'TIMESTAMP' });

    const rows = ndjsonLines(fake.uploads[0]?.ndjson ?? '');
    // 23:59:59.999999999 on May 1st stays May 1st (a float64 would round it to May 2nd).
    expect(rows.map((r) => [r['span_id'], r['start_time_ns'], r['start_time_ts']])).toEqual([
      ['s1', LAST_NS_OF_MAY_1.toString(), '2024-05-01T23:59:59.999999Z'],
      ['s2', '1714780800000000000', '2024-05-04T00:00:00Z'],
    ]);
    const merge = onlyQuery(fake);
    // The exact dates, not the four days between them.
    expect(merge).toContain("DATE(T.`start_time_ts`) IN (DATE '2024-05-01', DATE '2024-05-04')");
    // The derived column is written on insert.
    expect(merge).toMatch(/INSERT \([^)]*`start_time_ts`\) VALUES \([^)]*S\.`start_time_ts`\)/);
    // And the rows are in the table, in the partitions of their start.
    expect(fake.rows('sync', 'traces').map((r) => r['start_time_ts'])).toEqual([
      '2024-05-01T23:59:59.999999Z',
      '2024-05-04T00:00:00Z',
    ]);
    // describe hides the derived column.
    expect((await dest.describe('traces'))?.map((c) => c.name)).toEqual(tracesTable.columns.map((c) => c.name));
  });

  it('sends everything, uploads included, to --bq-api-endpoint when given', async () => {
    const { fake, dest } = setup({ apiEndpoint: 'http://bigquery-emulator.test:9050' });
    await dest.write({ table: eventsTable, rows: eventRows });
    expect(fake.uploads).toHaveLength(1);
    expect(fake.queries).toHaveLength(1);
  });

  it('uses an existing dataset and table without creating them, and remembers the table', async () => {
    const { fake, dest } = setup();
    fake.addDataset('sync');
    // Types as tables.get reports them (legacy names) for a table query-sync created earlier.
    fake.addTable('sync', 'events', legacyFields(eventsTable));
    await dest.write({ table: eventsTable, rows: eventRows });
    await dest.write({ table: eventsTable, rows: eventRows });

    expect(fake.calls('datasets.insert')).toHaveLength(0);
    expect(fake.calls('tables.patch')).toHaveLength(0);
    expect(fake.calls('datasets.get')).toHaveLength(1);
    expect(fake.calls('tables.get')).toHaveLength(1);
    // Only staging tables were created: one per write.
    expect(fake.calls('tables.insert').map((r) => r.id)).toEqual([
      expect.stringMatching(STAGE),
      expect.stringMatching(STAGE),
    ]);
    expect(fake.uploads).toHaveLength(2);
    expect(fake.queries).toHaveLength(2);
  });
});

describe('BigQueryDestination write', () => {
  it('loads NDJSON into a fresh expiring staging table with one load job (bigints and unicode exact)', async () => {
    const { fake, dest } = setup();
    const result = await dest.write({ table: eventsTable, rows: eventRows });
    expect(result.rows).toBe(3);

    const stageCreate = fake.calls('tables.insert').find((r) => STAGE.test(r.id ?? ''));
    const stage = stageCreate?.id ?? '';
    const stageBody = body(stageCreate) as unknown as TableResource;
    expect(Number(stageBody.expirationTime)).toBe(NOW + DAY_MS);
    expect(stageBody.schema?.fields.map((f) => f.name)).toEqual(eventsTable.columns.map((c) => c.name));
    expect(stageBody.timePartitioning).toBeUndefined();

    // Exactly one batch load job; no streaming inserts anywhere.
    expect(fake.uploads).toHaveLength(1);
    expect(fake.requests.some((r) => r.path.endsWith('/insertAll'))).toBe(false);
    const upload = fake.uploads[0];
    expect(upload?.jobId).toBe(`qs_load_${stage}_0`);
    expect(upload?.load).toMatchObject({
      destinationTable: { projectId: 'proj', datasetId: 'sync', tableId: stage },
      sourceFormat: 'NEWLINE_DELIMITED_JSON',
      writeDisposition: 'WRITE_EMPTY',
      createDisposition: 'CREATE_NEVER',
    });

    const ndjson = upload?.ndjson ?? '';
    const rows = ndjsonLines(ndjson);
    // Deduped: evt_1 once (the newer copy), no "stale copy".
    expect(rows.map((r) => r['id'])).toEqual(['evt_1', 'evt_2', 'evt_3']);
    const [evt1, evt2, evt3] = rows;
    expect(evt1?.['event_name']).toBe('héllo — 日本語 🚀 "quoted" \\ back');
    expect(ndjson).toContain('héllo — 日本語 🚀'); // raw UTF-8, not \u escapes
    // INT64 as exact decimal strings (BigQuery's advice for values beyond 2^53).
    expect(evt1?.['duration_ns']).toBe(BEYOND_2_53.toString());
    expect(evt2?.['duration_ns']).toBe('-5');
    // JSON spliced as a raw JSON value (not a string), its big integers digit-for-digit.
    expect(ndjson).toContain('"properties":{"nested":{"big":9223372036854775807,"ns":1714607999999999999,');
    const props = evt1?.['properties'] as Record<string, Record<string, unknown>>;
    expect(String(props['nested']?.['ns'])).toBe('1714607999999999999');
    expect(isLosslessNumber(props['nested']?.['big'])).toBe(true);
    // Pretty-printed JSON is flattened so each row stays on one line.
    expect(ndjson.split('\n')).toHaveLength(4);
    expect(evt2?.['properties']).toEqual([{ k: 'v' }]);
    expect(evt1?.['timestamp']).toBe('2024-05-01T10:00:00.123456Z');
    // One canonical UTC form (the instant of 2024-05-02T01:30:00+02:00).
    expect(evt2?.['timestamp']).toBe('2024-05-01T23:30:00Z');
    expect(evt1?.['is_test']).toBe(false);
    expect(String(evt2?.['score'])).toBe('-2.5');
    // NULLs written explicitly.
    expect(evt3).toMatchObject({ event_name: null, properties: null, duration_ns: null, score: null, is_test: null });
  });

  it('MERGEs from the stage on the key with partition pruning and the version rule', async () => {
    const { fake, dest } = setup();
    await dest.write({ table: eventsTable, rows: eventRows });
    const stage = fake.uploads[0]?.load.destinationTable.tableId ?? '';
    const merge = onlyQuery(fake);
    expect(fake.queries[0]?.jobId).toBe(`qs_merge_${stage}_0`);
    expect(fake.queries[0]?.useLegacySql).toBe(false);

    expect(merge).toContain('MERGE `proj`.`sync`.`events` AS T');
    expect(merge).toContain(`USING \`proj\`.\`sync\`.\`${stage}\` AS S`);
    // evt_2's +02:00 timestamp is May 1st in UTC: the dates are May 1st and 2nd.
    expect(merge).toContain(
      "ON T.`project_id` = S.`project_id` AND T.`id` = S.`id` AND DATE(T.`timestamp`) IN (DATE '2024-05-01', DATE '2024-05-02')\n",
    );
    expect(merge).toContain('WHEN MATCHED AND (T.`_synced_at` IS NULL OR S.`_synced_at` >= T.`_synced_at`) THEN');
    expect(merge).toContain('UPDATE SET `timestamp` = S.`timestamp`, `event_name` = S.`event_name`');
    expect(merge).not.toMatch(/UPDATE SET[^\n]*`project_id` =/);
    expect(merge).toContain(
      'WHEN NOT MATCHED THEN\n  INSERT (`project_id`, `id`, `timestamp`, `event_name`, `user_id`, `properties`, `duration_ns`, `score`, `is_test`, `_synced_at`)',
    );
  });

  it('resolves only after the MERGE job is DONE, then drops the stage and reports bytes processed', async () => {
    const { fake, dest, logs, sleeps } = setup();
    fake.pollsBeforeDone = ({ type }) => (type === 'query' ? 2 : 1);
    fake.bytesProcessed = '123456789';
    let settled = false;
    fake.intercept = (request) => {
      if (request.api === 'jobs.get' && request.id?.startsWith('qs_merge_')) fake.timeline.push(`settled=${settled}`);
      return undefined;
    };
    const result = await dest.write({ table: eventsTable, rows: eventRows }).finally(() => {
      settled = true;
      fake.timeline.push('write resolved');
    });

    const stage = fake.uploads[0]?.load.destinationTable.tableId ?? '';
    const tail = fake.timeline.slice(fake.timeline.indexOf(`jobs.upload qs_load_${stage}_0 RUNNING`));
    expect(tail).toEqual([
      `jobs.upload qs_load_${stage}_0 RUNNING`,
      `jobs.get qs_load_${stage}_0 RUNNING`,
      `jobs.get qs_load_${stage}_0 DONE`,
      `jobs.insert qs_merge_${stage}_0 RUNNING`,
      'settled=false',
      `jobs.get qs_merge_${stage}_0 RUNNING`,
      'settled=false',
      `jobs.get qs_merge_${stage}_0 RUNNING`,
      'settled=false',
      `jobs.get qs_merge_${stage}_0 DONE`,
      `tables.delete ${stage}`,
      'write resolved',
    ]);
    // Polls waited through the injected sleep, growing: load (1 RUNNING poll), then MERGE (2).
    expect(sleeps).toEqual([500, 750, 500, 750, 1125]);
    expect(result).toEqual({ rows: 3, bytesProcessed: 123456789 });
    const info = logs.find((l) => l['msg'] === 'bigquery merge done');
    expect(info).toMatchObject({ level: 30, table: 'events', rows: 3, bytesProcessed: 123456789 });
    // Never a row at info.
    expect(JSON.stringify(logs)).not.toContain('evt_1');
  });

  it('writes nothing for an empty batch', async () => {
    const { fake, dest } = setup();
    expect(await dest.write({ table: eventsTable, rows: [] })).toEqual({ rows: 0 });
    expect(fake.requests).toHaveLength(0);
  });
});

describe('BigQueryDestination failures', () => {
  it('a load job that ends with errorResult throws LoadError listing errors[], and nothing is merged', async () => {
    const { fake, dest } = setup();
    fake.outcome = ({ type }) =>
      type === 'load'
        ? {
            errorResult: {
              reason: 'invalid',
              message: 'Error while reading data, error message: JSON table encountered too many errors',
            },
            errors: [
              {
                reason: 'invalid',
                message: 'Error while reading data, error message: JSON table encountered too many errors',
              },
              {
                reason: 'invalid',
                message:
                  'JSON parsing error in row starting at position 0: Could not convert value to integer. Field: duration_ns',
              },
            ],
          }
        : undefined;
    const error = await writeError(dest);
    expect(error).toBeInstanceOf(LoadError);
    const loadError = error as LoadError;
    expect(loadError.retriable).toBe(false);
    expect(loadError.message).toContain('JSON table encountered too many errors');
    expect(loadError.message).toContain('Could not convert value to integer. Field: duration_ns');
    expect(loadError.message).toMatch(/load job into events__stage_[0-9a-f]{12} \(job qs_load_/);
    expect(fake.queries).toHaveLength(0);
    expect(fake.calls('jobs.insert')).toHaveLength(0);
    // Not retried (invalid data will not load on a second try), and the stage is cleaned up.
    expect(fake.uploads).toHaveLength(1);
    expect(fake.calls('tables.delete')).toHaveLength(1);
  });

  it('retries a 503 backendError on jobs.insert with backoff and the same job id, then succeeds', async () => {
    const { fake, dest, sleeps } = setup();
    let failures = 0;
    fake.intercept = (request) => {
      if (request.api === 'jobs.insert' && failures === 0) {
        failures += 1;
        return errorReply(503, 'backendError', 'Backend error. Please try again.');
      }
      return undefined;
    };
    const result = await dest.write({ table: eventsTable, rows: eventRows });
    expect(result.rows).toBe(3);
    const inserts = fake.calls('jobs.insert');
    expect(inserts).toHaveLength(2);
    // The first insert may have created the job: the retry reuses its id (a 409 would adopt it).
    expect(inserts[0]?.id).toBe(inserts[1]?.id);
    expect(fake.queries).toHaveLength(1);
    // Load poll, then ONE backoff wait within [0, retryBaseMs], then the MERGE poll.
    expect(sleeps).toHaveLength(3);
    expect(sleeps[0]).toBe(500);
    expect(sleeps[1]).toBeGreaterThanOrEqual(0);
    expect(sleeps[1]).toBeLessThanOrEqual(100);
    expect(sleeps[2]).toBe(500);
  });

  it('re-runs a job that failed with a transient reason under a new job id', async () => {
    const { fake, dest } = setup();
    fake.outcome = ({ jobId, type }) =>
      type === 'load' && jobId.endsWith('_0')
        ? { errorResult: { reason: 'backendError', message: 'Transient backend error' } }
        : undefined;
    await dest.write({ table: eventsTable, rows: eventRows });
    expect(fake.uploads.map((u) => u.jobId.replace(/^.*_(\d+)$/, '$1'))).toEqual(['0', '1']);
    expect(fake.queries).toHaveLength(1);
  });

  it('adopts a job that a lost jobs.insert response did create (409) instead of running it twice', async () => {
    const { fake, dest } = setup();
    let lost = false;
    fake.intercept = (request) => {
      if (request.api === 'jobs.insert' && !lost) {
        lost = true;
        // Let the fake create the job, then pretend the answer never arrived.
        fake.jobs.set(request.id ?? '', {
          jobId: request.id ?? '',
          type: 'query',
          configuration: {},
          pollsLeft: 0,
          outcome: undefined,
        });
        return errorReply(502, 'backendError', 'Bad Gateway');
      }
      return undefined;
    };
    await dest.write({ table: eventsTable, rows: eventRows });
    const inserts = fake.calls('jobs.insert');
    expect(inserts).toHaveLength(2);
    expect(fake.timeline).toContain(`jobs.insert ${inserts[0]?.id ?? ''} -> 409`);
    expect(fake.calls('jobs.get').filter((r) => r.id === inserts[0]?.id).length).toBeGreaterThan(0);
    // One MERGE job in all, the adopted one.
    expect([...fake.jobs.keys()].filter((id) => id.startsWith('qs_merge_'))).toEqual([inserts[0]?.id]);
  });

  it('rateLimitExceeded comes as 403 and is retried (the reason decides, not the status)', async () => {
    const { fake, dest } = setup();
    let failures = 0;
    fake.intercept = (request) => {
      if (request.api === 'tables.get' && failures < 2) {
        failures += 1;
        return errorReply(403, 'rateLimitExceeded', 'Exceeded rate limits: too many table update operations');
      }
      return undefined;
    };
    await dest.write({ table: eventsTable, rows: eventRows });
    expect(fake.calls('tables.get').filter((r) => r.id === 'events')).toHaveLength(3);
  });

  it('gives up after maxAttempts with a retriable LoadError wrapping RetriesExhaustedError; the client does not retry on its own', async () => {
    const { fake, dest, sleeps } = setup({ maxAttempts: 3 });
    fake.failEvery('datasets.get', errorReply(503, 'backendError', 'Service unavailable'));
    const error = await writeError(dest);
    expect(error).toBeInstanceOf(LoadError);
    expect((error as LoadError).retriable).toBe(true);
    expect((error as LoadError).message).toContain('after 3 attempts');
    expect((error as LoadError).cause).toBeInstanceOf(RetriesExhaustedError);
    expect(((error as LoadError).cause as RetriesExhaustedError).attempts).toBe(3);
    // Exactly our 3 attempts went out: no hidden retries in the client.
    expect(fake.calls('datasets.get')).toHaveLength(3);
    expect(sleeps).toHaveLength(2);
    expect(sleeps[0]).toBeLessThanOrEqual(100);
    expect(sleeps[1]).toBeLessThanOrEqual(200);
  });

  it('accessDenied is a clear AuthError naming the roles and the dataset, never retried', async () => {
    const { fake, dest, sleeps } = setup();
    fake.failEvery(
      'datasets.get',
      errorReply(
        403,
        'accessDenied',
        'Access Denied: Dataset proj:sync: Permission bigquery.datasets.get denied on dataset proj:sync',
      ),
    );
    const error = await writeError(dest);
    expect(error).toBeInstanceOf(AuthError);
    const message = (error as AuthError).message;
    expect(message).toContain('proj:sync');
    expect(message).toContain('BigQuery Data Editor (roles/bigquery.dataEditor) on dataset proj:sync');
    expect(message).toContain('BigQuery Job User (roles/bigquery.jobUser) on project proj');
    expect(message).toContain('Permission bigquery.datasets.get denied');
    expect((error as AuthError).status).toBe(403);
    expect(fake.requests).toHaveLength(1);
    expect(sleeps).toHaveLength(0);
  });

  it('accessDenied on the MERGE job (no bigquery.jobs.create) is an AuthError too', async () => {
    const { fake, dest } = setup();
    fake.failEvery(
      'jobs.insert',
      errorReply(
        403,
        'accessDenied',
        'Access Denied: Project proj: User does not have bigquery.jobs.create permission in project proj.',
      ),
    );
    const error = await writeError(dest);
    expect(error).toBeInstanceOf(AuthError);
    expect(fake.calls('jobs.insert')).toHaveLength(1);
  });

  it('quotaExceeded is a non-retriable LoadError with a clear message', async () => {
    const { fake, dest } = setup();
    fake.failEvery(
      'jobs.upload',
      errorReply(
        403,
        'quotaExceeded',
        'Quota exceeded: Your table exceeded quota for imports or query appends per table',
      ),
    );
    const error = await writeError(dest);
    expect(error).toBeInstanceOf(LoadError);
    expect((error as LoadError).retriable).toBe(false);
    expect((error as LoadError).message).toContain('BigQuery quota exceeded');
    expect((error as LoadError).message).toContain('imports or query appends per table');
    expect(fake.calls('jobs.upload')).toHaveLength(1);
    expect(fake.queries).toHaveLength(0);
  });

  it('a project that does not exist is a ConfigError', async () => {
    const { fake, dest } = setup();
    fake.failEvery('datasets.get', errorReply(404, 'notFound', 'Not found: Project proj'));
    const error = await writeError(dest);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toContain('--bq-project');
    expect(fake.requests).toHaveLength(1);
  });

  it('rejects a cell of the wrong type before sending anything', async () => {
    const { fake, dest } = setup();
    const rows = [{ ...eventRows[0], duration_ns: 'not a number' }];
    await expect(dest.write({ table: eventsTable, rows })).rejects.toThrow(
      /column "duration_ns" of table events expects an integer/,
    );
    expect(fake.requests).toHaveLength(0);
  });
});

describe('BigQueryDestination schema evolution', () => {
  const withCountry: TableSchema = {
    ...eventsTable,
    columns: [...eventsTable.columns, { name: 'country', type: 'string' }, { name: 'retries', type: 'int64' }],
  };

  it('patches new columns onto the table BEFORE the load job', async () => {
    const { fake, dest } = setup();
    fake.addDataset('sync');
    fake.addTable(
      'sync',
      'events',
      legacyFields(eventsTable).map((f) => ({ ...f, mode: 'NULLABLE' })),
    );
    await dest.write({ table: withCountry, rows: eventRows.map((r) => ({ ...r, country: 'DE', retries: 2n })) });

    const patches = fake.calls('tables.patch');
    expect(patches).toHaveLength(1);
    const patched = body(patches[0]) as unknown as TableResource;
    const names = patched.schema?.fields.map((f) => f.name) ?? [];
    // Existing fields first and unchanged, then the new ones.
    expect(names).toEqual([...eventsTable.columns.map((c) => c.name), 'country', 'retries']);
    expect(patched.schema?.fields.slice(-2)).toEqual([
      { name: 'country', type: 'STRING', mode: 'NULLABLE' },
      { name: 'retries', type: 'INT64', mode: 'NULLABLE' },
    ]);
    const upload = fake.requests.find((r) => r.api === 'jobs.upload');
    expect(patches[0]?.seq).toBeLessThan(upload?.seq ?? 0);
    expect(fake.tables.get('sync.events')?.schema?.fields.map((f) => f.name)).toContain('retries');
    expect(onlyQuery(fake)).toContain('`country` = S.`country`');
    expect(ndjsonLines(fake.uploads[0]?.ndjson ?? '')[0]).toMatchObject({ country: 'DE', retries: '2' });
  });

  it('refuses to load when an existing column has another type', async () => {
    const { fake, dest } = setup();
    fake.addDataset('sync');
    fake.addTable('sync', 'events', [
      { name: 'project_id', type: 'STRING' },
      { name: 'id', type: 'STRING' },
      { name: 'duration_ns', type: 'STRING' },
    ]);
    await expect(dest.write({ table: eventsTable, rows: eventRows })).rejects.toThrow(
      /column "duration_ns" of table events is STRING in BigQuery but the batch writes "duration_ns" INT64/,
    );
    expect(fake.calls('tables.patch')).toHaveLength(0);
    expect(fake.uploads).toHaveLength(0);
  });
});

describe('BigQueryDestination describe and count', () => {
  it('describe maps BigQuery types (legacy names too) back to logical types, hiding the derived columns', async () => {
    const { fake, dest } = setup();
    fake.addDataset('sync');
    fake.addTable(
      'sync',
      'traces',
      [
        { name: 'project_id', type: 'STRING' },
        { name: 'span_id', type: 'STRING' },
        { name: 'start_time_ns', type: 'INTEGER' },
        { name: 'ratio', type: 'FLOAT' },
        { name: 'ok', type: 'BOOLEAN' },
        { name: 'at', type: 'TIMESTAMP' },
        { name: 'attributes', type: 'JSON' },
        { name: 'start_time_ts', type: 'TIMESTAMP' },
        { name: 'row_hash', type: 'STRING' },
      ],
      { timePartitioning: { type: 'DAY', field: 'start_time_ts' } },
    );
    expect(await dest.describe('traces')).toEqual([
      { name: 'project_id', type: 'string' },
      { name: 'span_id', type: 'string' },
      { name: 'start_time_ns', type: 'int64' },
      { name: 'ratio', type: 'float64' },
      { name: 'ok', type: 'bool' },
      { name: 'at', type: 'timestamp' },
      { name: 'attributes', type: 'json' },
    ]);
    expect(await dest.describe('missing')).toBeUndefined();
  });

  it('count runs SELECT COUNT(*) as a query job; 0 without a query when the table is missing', async () => {
    const { fake, dest } = setup();
    fake.addDataset('sync');
    fake.addTable('sync', 'events', [{ name: 'id', type: 'STRING' }]);
    fake.countResult = '42';
    fake.pollsBeforeDone = () => 1;
    expect(await dest.count('events')).toBe(42);
    expect(onlyQuery(fake)).toBe('SELECT COUNT(*) AS n FROM `proj`.`sync`.`events`');
    expect(fake.calls('jobs.getQueryResults')).toHaveLength(1);

    expect(await dest.count('missing')).toBe(0);
    expect(fake.queries).toHaveLength(1);
  });

  it('polls a job first after `pollMs`, then half as long again each time (500 ms when not given: see the MERGE test)', async () => {
    const { fake, dest, sleeps } = setup({ pollMs: 20 });
    fake.addDataset('sync');
    fake.addTable('sync', 'events', [{ name: 'id', type: 'STRING' }]);
    fake.countResult = '7';
    // jobs.insert answers RUNNING, then jobs.get twice more RUNNING, then DONE: three waits.
    fake.pollsBeforeDone = () => 2;
    expect(await dest.count('events')).toBe(7);
    expect(sleeps).toEqual([20, 30, 45]);
  });
});

describe('BigQueryDestination dry run', () => {
  it('prints the DDL, the load target and the MERGE, and sends no request', async () => {
    const { fake, printed } = setup();
    const dest = testBigQueryDryRun({ now: () => NOW, print: (line) => void printed.push(line) });
    const result = await dest.write({ table: eventsTable, rows: eventRows });
    const withNew: TableSchema = {
      ...eventsTable,
      columns: [...eventsTable.columns, { name: 'country', type: 'string' }],
    };
    await dest.write({ table: withNew, rows: eventRows });
    await dest.write({ table: tracesTable, rows: traceRows });
    expect(await dest.describe('events')).toBeUndefined();
    expect(await dest.count('events')).toBe(0);
    await dest.close();

    expect(fake.requests).toHaveLength(0);
    expect(result).toEqual({ rows: 3 });
    const text = printed.join('\n');
    expect(text.match(/CREATE SCHEMA IF NOT EXISTS `proj`\.`sync` OPTIONS \(location = 'US'\);/g)).toHaveLength(1);
    expect(text).toContain('CREATE TABLE IF NOT EXISTS `proj`.`sync`.`events` (\n  `project_id` STRING,');
    expect(text).toContain('`properties` JSON,\n  `duration_ns` INT64,');
    expect(text).toContain(
      'PARTITION BY DATE(`timestamp`)\nCLUSTER BY `project_id`, `id`\nOPTIONS (expiration_timestamp = NULL, partition_expiration_days = NULL);',
    );
    expect(text.match(/CREATE TABLE IF NOT EXISTS `proj`\.`sync`\.`events`/g)).toHaveLength(1);
    expect(text).toContain('ALTER TABLE `proj`.`sync`.`events`\n  ADD COLUMN IF NOT EXISTS `country` STRING;');
    expect(text).toMatch(
      /CREATE TABLE `proj`\.`sync`\.`events__stage_[0-9a-f]{12}` \([\s\S]*OPTIONS \(expiration_timestamp = /,
    );
    expect(text).toMatch(
      /-- load job: 3 row\(s\) as NEWLINE_DELIMITED_JSON into `proj`\.`sync`\.`events__stage_[0-9a-f]{12}`/,
    );
    expect(text).toContain("DATE(T.`timestamp`) IN (DATE '2024-05-01', DATE '2024-05-02')");
    expect(text).toContain(
      '`start_time_ts` TIMESTAMP\n)\nPARTITION BY DATE(`start_time_ts`)\nCLUSTER BY `project_id`, `span_id`',
    );
    expect(text).toMatch(/MERGE `proj`\.`sync`\.`traces` AS T/);
  });
});
