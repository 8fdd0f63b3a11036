import { describe, expect, it } from 'vitest';
import { ConfigError, LoadError } from '../../src/core/errors.js';
import type { TableSchema } from '../../src/core/types.js';
import { BigQueryDestination } from '../../src/load/bigquery/destination.js';
import { backoffMs, classifyBigQueryError, errorInfo } from '../../src/load/bigquery/errors.js';
import { dateOfTimestamp, encodeRows, timestampOfEpochNs } from '../../src/load/bigquery/rows.js';
import {
  assertColumnNames,
  createTableDdl,
  mergeSql,
  pruningPredicate,
  quoteIdent,
} from '../../src/load/bigquery/sql.js';
import { LAST_NS_OF_MAY_1, eventsTable, tracesTable, keyedTable } from '../fixtures/bigquery/tables.js';

const target = { projectId: 'proj', dataset: 'sync' };

describe('partition dates', () => {
  it('turns an ns epoch into a UTC TIMESTAMP exactly (microseconds, truncated), flooring before 1970', () => {
    expect(timestampOfEpochNs(LAST_NS_OF_MAY_1)).toBe('2024-05-01T23:59:59.999999Z');
    expect(timestampOfEpochNs(LAST_NS_OF_MAY_1 + 1n)).toBe('2024-05-02T00:00:00Z');
    expect(timestampOfEpochNs(0n)).toBe('1970-01-01T00:00:00Z');
    expect(timestampOfEpochNs(-1n)).toBe('1969-12-31T23:59:59.999999Z');
    expect(timestampOfEpochNs(-86_400_000_000_000n)).toBe('1969-12-31T00:00:00Z');
    expect(timestampOfEpochNs(1_714_557_600_123_456_789n)).toBe('2024-05-01T10:00:00.123456Z');
  });

  it('computes the UTC date of an ISO timestamp the way DATE(timestamp) does', () => {
    expect(dateOfTimestamp('2024-05-01T23:59:59.9999999Z')).toBe('2024-05-01');
    expect(dateOfTimestamp('2024-05-02T01:30:00+02:00')).toBe('2024-05-01');
    expect(dateOfTimestamp('2024-05-01T22:30:00-02:00')).toBe('2024-05-02');
    expect(dateOfTimestamp('2024-05-02T04:00+0530')).toBe('2024-05-01');
    expect(dateOfTimestamp('not a time')).toBeUndefined();
  });
});

describe('encodeRows', () => {
  it('collects the exact partition dates (not a range), including NULL partition values', () => {
    const { partitions } = encodeRows(eventsTable, [
      { project_id: 'a', id: '1', timestamp: '2024-05-03T00:00:00Z' },
      { project_id: 'a', id: '2', timestamp: null },
      { project_id: 'a', id: '3', timestamp: '2024-04-01T23:00:00Z' },
      { project_id: 'a', id: '4', timestamp: '2024-05-03T10:00:00Z' },
    ]);
    expect(partitions).toEqual({ dates: ['2024-04-01', '2024-05-03'], hasNull: true });
    // A table with no time partition column is partitioned on a hash bucket of its key.
    const keyed = encodeRows({ ...eventsTable, partitionColumn: undefined }, [
      { project_id: 'a', id: '1' },
      { project_id: 'a', id: '1' },
      { project_id: 'b', id: '1' },
    ]);
    expect(keyed.partitions?.dates).toHaveLength(2);
    expect(keyed.partitions?.dates.every((d) => Number(d) >= 0 && Number(d) < 4000)).toBe(true);
    expect(keyed.ndjson).toMatch(/"key_bucket":"\d+"/);
  });

  it('writes every timestamp in one canonical UTC form the JSON loader accepts', () => {
    const { ndjson } = encodeRows(eventsTable, [
      { project_id: 'a', id: '1', timestamp: '2024-05-01T00:00Z' },
      { project_id: 'a', id: '2', timestamp: '2024-05-01T05:30:00+0530' },
      { project_id: 'a', id: '3', timestamp: '2024-05-01T01:00:00.5+01' },
    ]);
    expect(
      ndjson
        .split('\n')
        .slice(0, 3)
        .map((l) => (JSON.parse(l) as { timestamp: string }).timestamp),
    ).toEqual(['2024-05-01T00:00:00Z', '2024-05-01T00:00:00Z', '2024-05-01T00:00:00.5Z']);
  });

  it('writes every declared column, cuts timestamps to microseconds, spells non-finite floats', () => {
    const { ndjson } = encodeRows(eventsTable, [
      {
        project_id: 'a',
        id: '1',
        timestamp: '2024-05-01T00:00:00.123456789Z',
        score: Number.NaN,
        duration_ns: 7,
        extra: 'x',
      },
      {
        project_id: 'a',
        id: '2',
        timestamp: '2024-05-01T00:00:00Z',
        score: Number.NEGATIVE_INFINITY,
        properties: '42',
      },
    ]);
    expect(ndjson).toBe(
      '{"project_id":"a","id":"1","timestamp":"2024-05-01T00:00:00.123456Z","event_name":null,"user_id":null,"properties":null,"duration_ns":"7","score":"NaN","is_test":null,"_synced_at":null}\n' +
        '{"project_id":"a","id":"2","timestamp":"2024-05-01T00:00:00Z","event_name":null,"user_id":null,"properties":42,"duration_ns":null,"score":"-Infinity","is_test":null,"_synced_at":null}\n',
    );
  });

  it('adds the derived start_time_ts TIMESTAMP for an ns partition column', () => {
    const { ndjson, partitions } = encodeRows(tracesTable, [
      { project_id: 'a', span_id: 's', start_time_ns: LAST_NS_OF_MAY_1 },
    ]);
    expect(ndjson).toContain(
      '"start_time_ns":"1714607999999999999","end_time_ns":null,"attributes":null,"_synced_at":null,"start_time_ts":"2024-05-01T23:59:59.999999Z"}',
    );
    expect(partitions).toEqual({ dates: ['2024-05-01'], hasNull: false });
  });

  it('refuses invalid JSON text and non-integers in INT64 columns', () => {
    expect(() => encodeRows(eventsTable, [{ project_id: 'a', id: '1', properties: '{"a":' }])).toThrow(LoadError);
    expect(() => encodeRows(eventsTable, [{ project_id: 'a', id: '1', duration_ns: 1.5 }])).toThrow(
      /expects an integer/,
    );
    expect(() => encodeRows(eventsTable, [{ project_id: 'a', id: '1', timestamp: 'yesterday' }])).toThrow(/ISO-8601/);
  });
});

describe('SQL text', () => {
  it('prunes with an IN list of the exact dates, and keeps the __NULL__ partition when the batch has NULL partition values', () => {
    const spec = { kind: 'timestamp', column: 'timestamp', field: 'timestamp' } as const;
    expect(pruningPredicate(spec, { dates: ['2024-04-01', '2024-05-02'], hasNull: false })).toBe(
      "DATE(T.`timestamp`) IN (DATE '2024-04-01', DATE '2024-05-02')",
    );
    expect(pruningPredicate(spec, { dates: ['2024-05-01'], hasNull: true })).toBe(
      "(DATE(T.`timestamp`) IN (DATE '2024-05-01') OR T.`timestamp` IS NULL)",
    );
    expect(
      pruningPredicate(
        { kind: 'epoch_ns', column: 'start_time_ns', field: 'start_time_ts' },
        { dates: [], hasNull: true },
      ),
    ).toBe('T.`start_time_ts` IS NULL');
  });

  it('skips unchanged rows of a full-refresh table (row hash) in the MERGE', () => {
    const signals: TableSchema = keyedTable('signals', [{ name: 'name', type: 'string' }], { fullRefresh: true });
    const sql = mergeSql({ target, table: signals, stage: 's' });
    expect(sql).toContain(
      'WHEN MATCHED AND (T.`row_hash` IS DISTINCT FROM S.`row_hash`) THEN\n  UPDATE SET `name` = S.`name`, `row_hash` = S.`row_hash`\n',
    );
  });

  it('builds a MERGE without version condition for a table that has none, pruned to its key buckets', () => {
    const keyOnly: TableSchema = keyedTable('users');
    expect(
      mergeSql({
        target,
        table: keyOnly,
        stage: 'users__stage_x',
        partitions: { dates: ['7', '3999'], hasNull: false },
      }),
    ).toBe(
      [
        'MERGE `proj`.`sync`.`users` AS T',
        'USING `proj`.`sync`.`users__stage_x` AS S',
        'ON T.`project_id` = S.`project_id` AND T.`id` = S.`id` AND T.`key_bucket` IN (7, 3999)',
        'WHEN NOT MATCHED THEN',
        '  INSERT (`project_id`, `id`, `key_bucket`) VALUES (S.`project_id`, S.`id`, S.`key_bucket`);',
      ].join('\n'),
    );
    expect(createTableDdl(target, keyOnly)).toContain(
      'PARTITION BY RANGE_BUCKET(`key_bucket`, GENERATE_ARRAY(0, 4000, 1))\nCLUSTER BY `project_id`, `id`',
    );
    const withName: TableSchema = { ...keyOnly, columns: [...keyOnly.columns, { name: 'name', type: 'string' }] };
    expect(mergeSql({ target, table: withName, stage: 's' })).toContain(
      'WHEN MATCHED THEN\n  UPDATE SET `name` = S.`name`\n',
    );
  });

  it('writes CREATE TABLE with PARTITION BY and CLUSTER BY', () => {
    expect(createTableDdl(target, tracesTable)).toBe(
      [
        'CREATE TABLE IF NOT EXISTS `proj`.`sync`.`traces` (',
        '  `project_id` STRING,',
        '  `span_id` STRING,',
        '  `start_time_ns` INT64,',
        '  `end_time_ns` INT64,',
        '  `attributes` JSON,',
        '  `_synced_at` TIMESTAMP,',
        '  `start_time_ts` TIMESTAMP',
        ')',
        'PARTITION BY DATE(`start_time_ts`)',
        'CLUSTER BY `project_id`, `span_id`',
        'OPTIONS (expiration_timestamp = NULL, partition_expiration_days = NULL, ' +
          "description = 'start_time_ts = start_time_ns (ns epoch) as a TIMESTAMP, computed by query-sync at load time');",
      ].join('\n'),
    );
  });

  it('refuses names BigQuery would not accept', () => {
    expect(quoteIdent('to')).toBe('`to`');
    expect(() => quoteIdent('user-agent')).toThrow(LoadError);
    expect(() => quoteIdent('a`b')).toThrow(LoadError);
    expect(() => quoteIdent('x'.repeat(301))).toThrow(LoadError);
    // Reserved prefixes, in any case (https://cloud.google.com/bigquery/docs/schemas#column_names).
    for (const name of [
      '_partition_date',
      '_PARTITIONTIME',
      '_table_suffix',
      '_File_name',
      '_row_timestamp',
      '__root__x',
      '_colidentifier1',
    ]) {
      expect(() => assertColumnNames('t', [{ name, type: 'STRING' }]), name).toThrow(/reserves/);
    }
    expect(() => assertColumnNames('t', [{ name: 'partition_date', type: 'DATE' }])).not.toThrow();
    // Column names are case-insensitive: two fields differing in case cannot both be columns.
    expect(() =>
      assertColumnNames('t', [
        { name: 'userId', type: 'STRING' },
        { name: 'userid', type: 'STRING' },
      ]),
    ).toThrow(/differ only in case/);
  });

  it('refuses bad options with ConfigError', () => {
    expect(() => new BigQueryDestination({ projectId: 'p', dataset: 'my-dataset' })).toThrow(ConfigError);
    expect(() => new BigQueryDestination({ projectId: 'p', dataset: 'd', location: "US'" })).toThrow(ConfigError);
  });
});

describe('error classification', () => {
  const http = (code: number, reason?: string, message = 'm') => ({
    code,
    message,
    errors: reason === undefined ? [] : [{ reason, message }],
  });

  it.each([
    [http(503, 'backendError'), 'retriable'],
    [http(500, 'internalError'), 'retriable'],
    [http(403, 'rateLimitExceeded'), 'retriable'],
    [http(502), 'retriable'],
    [http(403, 'quotaExceeded'), 'quota'],
    [http(403, 'accessDenied'), 'auth'],
    [http(401), 'auth'],
    [http(403, 'billingNotEnabled'), 'fatal'],
    [http(404, 'notFound', 'Not found: Project nope'), 'projectNotFound'],
    [http(404, 'notFound', 'Not found: Table p:d.t'), 'notFound'],
    [http(409, 'duplicate'), 'alreadyExists'],
    [http(400, 'invalidQuery'), 'fatal'],
    [
      http(400, 'invalidQuery', 'Could not serialize access to table proj:sync.events due to concurrent update'),
      'retriable',
    ],
    [
      {
        errorResult: {
          reason: 'invalidQuery',
          message: 'Could not serialize access to table proj:sync.events due to concurrent update',
        },
      },
      'retriable',
    ],
    [{ errorResult: { reason: 'jobBackendError', message: 'x' } }, 'retriable'],
    [{ errorResult: { reason: 'invalid', message: 'x' }, errors: [{ reason: 'backendError', message: 'y' }] }, 'fatal'],
    [Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }), 'retriable'],
    [Object.assign(new Error('Nock: Disallowed net connect'), { code: 'ENETUNREACH' }), 'fatal'],
  ])('%j → %s', (error, expected) => {
    expect(classifyBigQueryError(errorInfo(error))).toBe(expected);
  });

  it('backs off exponentially with full jitter, capped', () => {
    const policy = { maxAttempts: 5, maxConflictAttempts: 10, baseMs: 100, maxMs: 1_000 };
    expect([1, 2, 3, 4, 5].map((n) => backoffMs(policy, n, () => 1))).toEqual([100, 200, 400, 800, 1000]);
    expect(backoffMs(policy, 3, () => 0)).toBe(0);
    expect(backoffMs(policy, 3, () => 0.5)).toBe(200);
  });
});
