import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { DuckDBInstance } from '@duckdb/node-api';
import type { PublishedConfig } from '../config.js';
import { layoutOf } from '../publish/layout.js';
import type { CommandIo } from '../app/io.js';
import { EXIT_CODES } from '../core/exit-codes.js';

/**
 * `query-sync sql "select …"`: SQL on the published read copy (never the sync's working file, so it
 * runs while a sync does and never makes one wait). With no query, a small shell: each statement
 * opens the newest published copy, so a long session sees each publish as it lands.
 */
export type SqlFormat = 'table' | 'json' | 'csv';

export async function sqlCommand(config: PublishedConfig & { readonly query?: string; readonly format: SqlFormat }, io: CommandIo & { readonly interactive?: boolean }): Promise<number> {
  const path = layoutOf(config.duckdbPath).published;
  if (!existsSync(path)) {
    io.print(`sql FAILED: there is no published copy at ${path} yet: run \`query-sync sync\` (it publishes at its end and every --publish-every), or \`query-sync publish\` after a run, or pass --duckdb-path`);
    return EXIT_CODES.configuration;
  }
  if (config.query !== undefined) {
    try {
      for (const line of render(await runOn(path, config.query), config.format)) io.print(line);
      return EXIT_CODES.ok;
    } catch (error) {
      io.print(`sql FAILED: ${(error as Error).message}`);
      return EXIT_CODES.failed;
    }
  }
  return shell(path, config.format, io);
}

interface Answer {
  readonly columns: readonly string[];
  readonly rows: readonly (readonly unknown[])[];
}

/** Open the copy read-only for one statement: a reader holds no lock the sync needs, and the next statement sees the next publish. */
async function runOn(path: string, sql: string): Promise<Answer> {
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
    return [JSON.stringify(answer.rows.map((row) => Object.fromEntries(answer.columns.map((c, i) => [c, row[i] ?? null]))))];
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
  const widths = answer.columns.map((c, i) => Math.min(60, Math.max(c.length, ...texts.map((r) => (r[i] ?? '').length))));
  const line = (values: readonly string[]): string => values.map((v, i) => (v.length > (widths[i] ?? 0) ? `${v.slice(0, (widths[i] ?? 1) - 1)}…` : v.padEnd(widths[i] ?? 0))).join(' │ ');
  return [line(answer.columns), widths.map((w) => '─'.repeat(w)).join('─┼─'), ...texts.map(line), `(${answer.rows.length} row${answer.rows.length === 1 ? '' : 's'})`];
}

/** A line-based shell: a statement ends with `;` (or at the end of a line when none is open); `.quit` leaves. */
async function shell(path: string, format: SqlFormat, io: CommandIo): Promise<number> {
  io.print(`query-sync sql on ${path} (the published copy; each statement reads the newest publish). End statements with ;  .quit to leave.`);
  const rl = createInterface({ input: process.stdin, output: process.stdout, prompt: 'sql> ', terminal: process.stdin.isTTY === true });
  let pending = '';
  rl.prompt();
  for await (const line of rl) {
    const text = line.trim();
    if (pending === '' && (text === '.quit' || text === '.exit' || text === '\\q')) break;
    pending = pending === '' ? text : `${pending}\n${text}`;
    if (pending !== '' && (pending.endsWith(';') || !process.stdin.isTTY)) {
      const sql = pending;
      pending = '';
      try {
        for (const out of render(await runOn(path, sql), format)) io.print(out);
      } catch (error) {
        io.print(`error: ${(error as Error).message}`);
      }
    }
    rl.setPrompt(pending === '' ? 'sql> ' : '...> ');
    rl.prompt();
  }
  rl.close();
  return EXIT_CODES.ok;
}
