import type { Query, TableField } from '@google-cloud/bigquery';
import { STATE_TABLE, type TraceRead, type StateRow } from '../../core/state-table.js';
import { traceReadsInsertSql, traceReadsParams } from './trace-book.js';
import { tablePath, type BigQueryTarget } from './sql.js';

/**
 * query-sync's state in BigQuery (`core/state-table.ts`): the `_query_sync_state` table and the
 * statements that read and write it. The rows go as a query parameter (an array of structs), not
 * as literals: a large traces backlog stays far from the 1 MB limit of a query's text.
 */

export const STATE_FIELDS: TableField[] = [
  { name: 'key', type: 'STRING', mode: 'REQUIRED' },
  { name: 'value', type: 'STRING', mode: 'NULLABLE' },
  { name: 'updated_at', type: 'TIMESTAMP', mode: 'NULLABLE' },
];

/** Name of the query parameter holding the state rows. */
const STATE_ROWS_PARAM = 'state_rows';

export function stateSelectSql(target: BigQueryTarget): string {
  return `SELECT \`key\` AS key, \`value\` AS value FROM ${tablePath(target, STATE_TABLE)} ORDER BY 1`;
}

/** Upsert the keys with a value, delete the keys whose value is NULL. One statement: atomic. */
export function stateMergeSql(target: BigQueryTarget): string {
  return [
    `MERGE ${tablePath(target, STATE_TABLE)} AS T`,
    `USING (SELECT * FROM UNNEST(@${STATE_ROWS_PARAM})) AS S`,
    'ON T.`key` = S.`key`',
    'WHEN MATCHED AND S.`value` IS NULL THEN',
    '  DELETE',
    'WHEN MATCHED THEN',
    '  UPDATE SET `value` = S.`value`, `updated_at` = CURRENT_TIMESTAMP()',
    'WHEN NOT MATCHED AND S.`value` IS NOT NULL THEN',
    '  INSERT (`key`, `value`, `updated_at`) VALUES (S.`key`, S.`value`, CURRENT_TIMESTAMP());',
  ].join('\n');
}

/**
 * The batch's MERGE and the state's, as one multi-statement transaction in one query job: BigQuery
 * commits both or neither, whatever happens to the client (a kill after the job was sent lets it
 * finish; before, neither ran).
 */
export function transactionSql(statements: readonly string[]): string {
  return ['BEGIN TRANSACTION;', ...statements.map((s) => (s.endsWith(';') ? s : `${s};`)), 'COMMIT TRANSACTION;'].join(
    '\n',
  );
}

/** The query parameters of `stateMergeSql`, for `createQueryJob`. */
function stateParams(rows: readonly StateRow[]): Pick<Query, 'params' | 'types'> {
  return {
    params: { [STATE_ROWS_PARAM]: rows.map((r) => ({ key: r.key, value: r.value })) },
    types: { [STATE_ROWS_PARAM]: [{ key: 'STRING', value: 'STRING' }] },
  };
}

/** Query parameters of a job, as `createQueryJob` takes them. */
export type QueryParams = Pick<Query, 'params' | 'types'>;

/**
 * The statements that write a commit (its state rows, `stateMergeSql`, and its reads of the
 * trace book, `traceReadsInsertSql`), with their query parameters: none when both are empty.
 */
export function commitWrites(
  target: BigQueryTarget,
  rows: readonly StateRow[],
  reads: readonly TraceRead[],
): { readonly statements: readonly string[]; readonly params: QueryParams } {
  const statements: string[] = [];
  const params: Record<string, unknown> = {};
  const types: Record<string, unknown> = {};
  if (rows.length > 0) {
    statements.push(stateMergeSql(target));
    const p = stateParams(rows);
    Object.assign(params, p.params);
    Object.assign(types, p.types);
  }
  if (reads.length > 0) {
    statements.push(traceReadsInsertSql(target));
    const p = traceReadsParams(reads);
    Object.assign(params, p.params);
    Object.assign(types, p.types);
  }
  return { statements, params: statements.length === 0 ? {} : ({ params, types } as QueryParams) };
}
