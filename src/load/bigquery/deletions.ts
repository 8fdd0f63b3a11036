import { DELETED_AT_COLUMN } from '../../core/deletions.js';
import { quoteIdent, stringLiteral, tablePath, timestampLiteral, type BigQueryTarget } from './sql.js';
import type { DeletionChange, WindowCount } from '../destination.js';

/**
 * BigQuery's side of reconcile's id comparison and deletion mark (`core/deletions.ts`): the keys of
 * a window, and one window's deletions as one multi-statement transaction of MERGEs (the parent,
 * its spans, its bridge rows). No statement scans a whole partitioned table: the parent is pruned
 * to the window's days, the spans to those days and one day either side (a span starts with its
 * event); a bridge table (partitioned by key bucket, so not prunable by its parent's id) is read
 * whole, as every batch's bridge rewrite already reads it.
 */

const DAY_MS = 86_400_000;
/** Spans start within a day of their event: a span further off is not marked (docs/reconcile.md). */
const FOLLOWER_MARGIN_MS = DAY_MS;

/** A table reference, as the statements need it: its partitioning field and whether it is a DAY partition of a TIMESTAMP. */
export interface DeletionTable {
  readonly table: string;
  /** The column the change matches ids on. */
  readonly column: string;
  /** The DAY-partitioned TIMESTAMP field, when the table has one; `undefined`: read whole. */
  readonly dayField?: string;
  /** Whether the table has `_synced_at`, `_run_id` (set on the rows a mark changes). */
  readonly meta: readonly string[];
}

/** The UTC days [fromMs − margin, toMs + margin) covers, as DATE literals. */
function days(fromMs: number, toMs: number, marginMs: number): string {
  const out: string[] = [];
  for (let ms = Math.floor((fromMs - marginMs) / DAY_MS) * DAY_MS; ms < toMs + marginMs; ms += DAY_MS)
    out.push(`DATE '${new Date(ms).toISOString().slice(0, 10)}'`);
  return out.join(', ');
}

/** Keys of one project's rows in the window, each with whether it is marked deleted. */
export function windowKeysSql(
  target: BigQueryTarget,
  table: string,
  window: WindowCount & { readonly key: string },
  marked: boolean,
): string {
  const c = quoteIdent(window.column);
  return (
    `SELECT CAST(${quoteIdent(window.key)} AS STRING) AS k, ${marked ? `${quoteIdent(DELETED_AT_COLUMN)} IS NOT NULL` : 'FALSE'} AS m ` +
    `FROM ${tablePath(target, table)} WHERE \`project_id\` = ${stringLiteral(window.projectId)} ` +
    `AND ${c} >= ${timestampLiteral(window.fromIso)} AND ${c} < ${timestampLiteral(window.toIso)}`
  );
}

/**
 * One MERGE per table, in one transaction: the ids come in as an array literal, the target is
 * pruned to its partitions, and `mark` sets `_deleted_at` only where unset (the first instant
 * stays), `unmark` clears it, `delete` removes the rows.
 */
export function deletionScript(
  target: BigQueryTarget,
  change: DeletionChange,
  tables: readonly (DeletionTable & { readonly parent: boolean })[],
): string {
  const ids = `[${change.ids.map(stringLiteral).join(', ')}]`;
  const fromMs = Date.parse(change.parent.fromIso);
  const toMs = Date.parse(change.parent.toIso);
  const deleted = quoteIdent(DELETED_AT_COLUMN);
  const at = timestampLiteral(change.atIso);
  const statements = tables.map((t) => {
    const prune =
      t.dayField === undefined
        ? ''
        : ` AND DATE(T.${quoteIdent(t.dayField)}) IN (${days(fromMs, toMs, t.parent ? 0 : FOLLOWER_MARGIN_MS)})`;
    const meta = t.meta.map((m) =>
      m === '_synced_at' ? `\`_synced_at\` = ${at}` : `\`_run_id\` = ${stringLiteral(change.runId)}`,
    );
    const action =
      change.action === 'delete'
        ? 'WHEN MATCHED THEN\n  DELETE'
        : change.action === 'mark'
          ? `WHEN MATCHED AND T.${deleted} IS NULL THEN\n  UPDATE SET ${[`${deleted} = ${at}`, ...meta].join(', ')}`
          : `WHEN MATCHED AND T.${deleted} IS NOT NULL THEN\n  UPDATE SET ${[`${deleted} = NULL`, ...meta].join(', ')}`;
    return [
      `MERGE ${tablePath(target, t.table)} AS T`,
      `USING (SELECT K FROM UNNEST(${ids}) AS K) AS S`,
      `ON T.\`project_id\` = ${stringLiteral(change.projectId)} AND CAST(T.${quoteIdent(t.column)} AS STRING) = S.K${prune}`,
      `${action};`,
    ].join('\n');
  });
  return ['BEGIN TRANSACTION;', ...statements, 'COMMIT TRANSACTION;'].join('\n');
}
