import { randomBytes } from 'node:crypto';
import type { TableField } from '@google-cloud/bigquery';
import type { Row, TableSchema } from '../../core/types.js';
import { PartitionDateSet, encodeRow, partitionSpec } from './rows.js';
import {
  STAGE_EXPIRATION_MS,
  bigQueryColumns,
  planLines,
  planWrite,
  type BigQueryColumn,
  type BigQueryTarget,
} from './sql.js';
import { tableResource, toField } from './fields.js';

/**
 * What the BigQuery destination sends that a dry run prints: the load job options and the staging
 * table resource are defined here once, used by the real writes and printed by `--dry-run`.
 */

/**
 * Every load job's options. The stage was created empty a moment ago: a second copy of the rows is
 * an error (WRITE_EMPTY), never a duplicate. No schema is sent (the stage has it), so no
 * schemaUpdateOptions either (BigQuery allows them only with WRITE_APPEND); no bad record is tolerated.
 */
export const LOAD_OPTIONS = {
  sourceFormat: 'NEWLINE_DELIMITED_JSON',
  writeDisposition: 'WRITE_EMPTY',
  createDisposition: 'CREATE_NEVER',
  ignoreUnknownValues: false,
  maxBadRecords: 0,
} as const;

export interface StageResource {
  schema: { fields: TableField[] };
  expirationTime: string;
  labels: Record<string, string>;
}

/** The tables.insert body of a staging table: the target's columns, expiring after a day. */
export function stageResource(columns: readonly BigQueryColumn[], nowMs: number): StageResource {
  return {
    schema: { fields: columns.map(toField) },
    expirationTime: String(nowMs + STAGE_EXPIRATION_MS),
    labels: { 'query-sync': 'stage' },
  };
}

/**
 * `--dry-run`: for each write, the DDL and MERGE text, then the exact REST requests the client
 * would send. Remembers the dataset and the columns already printed, so later writes print only
 * what changes.
 */
export class BigQueryDryRun {
  private schemaPrinted = false;
  private readonly columns = new Map<string, Set<string>>();

  constructor(
    private readonly target: BigQueryTarget,
    private readonly print: (line: string) => void,
    private readonly now: () => number,
  ) {}

  write(table: TableSchema, rows: readonly Row[], hashes: readonly string[] | undefined, location: string): void {
    const spec = partitionSpec(table);
    const dates = new PartitionDateSet();
    for (const [i, row] of rows.entries()) dates.add(encodeRow(table, row, spec, hashes?.[i]).date);
    const printed = this.columns.get(table.name);
    const columns = bigQueryColumns(table);
    const stage = `${table.name}__stage_${randomBytes(6).toString('hex')}`;
    const plan = planWrite({
      target: this.target,
      location,
      table,
      stage,
      rowCount: rows.length,
      partitions: dates.value(),
      createSchema: !this.schemaPrinted,
      createTable: printed === undefined,
      newColumns: printed === undefined ? [] : columns.filter((c) => !printed.has(c.name)),
    });
    this.schemaPrinted = true;
    this.columns.set(table.name, new Set([...(printed ?? []), ...columns.map((c) => c.name)]));
    this.print(`-- bigquery dry run: ${rows.length} row(s) for table ${table.name}; nothing is sent`);
    for (const statement of planLines(plan)) this.print(statement);
    // The REST requests themselves, as the client would send them.
    const { projectId, dataset } = this.target;
    const base = `/bigquery/v2/projects/${projectId}`;
    const request = (method: string, path: string, body?: unknown): void =>
      this.print(`-- request: ${method} ${path}${body === undefined ? '' : ` ${JSON.stringify(body)}`}`);
    if (plan.createSchema !== undefined) {
      request('GET', `${base}/datasets/${dataset}`);
      request('POST', `${base}/datasets`, { datasetReference: { projectId, datasetId: dataset }, location });
    }
    if (plan.createTable !== undefined) {
      request('POST', `${base}/datasets/${dataset}/tables`, {
        ...tableResource(table),
        tableReference: { projectId, datasetId: dataset, tableId: table.name },
      });
    }
    if (plan.alterTable !== undefined)
      request('PATCH', `${base}/datasets/${dataset}/tables/${table.name}`, {
        schema: { fields: columns.map(toField) },
        etag: '<as read>',
      });
    request('POST', `${base}/datasets/${dataset}/tables`, {
      tableReference: { projectId, datasetId: dataset, tableId: stage },
      ...stageResource(columns, this.now()),
    });
    const ndjsonBytes = rows.reduce(
      (n, row, i) => n + Buffer.byteLength(encodeRow(table, row, spec, hashes?.[i]).line),
      0,
    );
    request('POST', `/upload/bigquery/v2/projects/${projectId}/jobs?uploadType=multipart`, {
      configuration: { load: { ...LOAD_OPTIONS, destinationTable: { projectId, datasetId: dataset, tableId: stage } } },
      jobReference: { projectId, jobId: `qs_load_${stage}_0`, location },
    });
    this.print(`--   + ${rows.length} NDJSON row(s), ${ndjsonBytes} bytes`);
    request('POST', `${base}/jobs`, {
      configuration: { query: { query: plan.merge, useLegacySql: false } },
      jobReference: { projectId, jobId: `qs_merge_${stage}_0`, location },
    });
    request('DELETE', `${base}/datasets/${dataset}/tables/${stage}`);
  }
}
