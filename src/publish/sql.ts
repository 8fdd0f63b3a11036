import { DuckDBInstance } from '../load/duckdb/instance.js';

/**
 * `query-sync sql`'s reading and rendering: one statement on the published read copy (opened
 * read-only for that statement), its answer as a table, JSON or CSV lines.
 */

export type SqlFormat = 'table' | 'json' | 'csv';

export interface Answer {
  readonly columns: readonly string[];
  readonly rows: readonly (readonly unknown[])[];
}

/** Open the copy read-only for one statement: a reader holds no lock the sync needs, and the next statement sees the next publish. */
export async function runOn(path: string, sql: string): Promise<Answer> {
  const instance = await DuckDBInstance.create(path, { access_mode: 'READ_ONLY' });
  try {
    const connection = await instance.connect();
    try {
      await connection.run("SET TimeZone = 'UTC'");
      const reader = await connection.runAndReadAll(sql);
      return { columns: reader.columnNames(), rows: reader.getRowsJson() as unknown as unknown[][] };
    } finally {
      connection.closeSync();
    }
  } finally {
    instance.closeSync();
  }
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

export function render(answer: Answer, format: SqlFormat): string[] {
  if (format === 'json') {
    return [
      JSON.stringify(answer.rows.map((row) => Object.fromEntries(answer.columns.map((c, i) => [c, row[i] ?? null])))),
    ];
  }
  if (format === 'csv') {
    const quote = (v: unknown): string => {
      if (v === null || v === undefined) return '';
      const text = cell(v);
      return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
    };
    return [answer.columns.map(quote).join(','), ...answer.rows.map((row) => row.map(quote).join(','))];
  }
  const texts = answer.rows.map((row) => row.map(cell));
  const widths = answer.columns.map((c, i) =>
    Math.min(60, Math.max(c.length, ...texts.map((r) => (r[i] ?? '').length))),
  );
  const line = (values: readonly string[]): string =>
    values
      .map((v, i) => (v.length > (widths[i] ?? 0) ? `${v.slice(0, (widths[i] ?? 1) - 1)}…` : v.padEnd(widths[i] ?? 0)))
      .join(' │ ');
  return [
    line(answer.columns),
    widths.map((w) => '─'.repeat(w)).join('─┼─'),
    ...texts.map(line),
    `(${answer.rows.length} row${answer.rows.length === 1 ? '' : 's'})`,
  ];
}
