import type { DuckDBConnection } from '@duckdb/node-api';
import type { ColumnDef } from '../../core/types.js';
import { logicalFromDuckdb } from './sql.js';

/**
 * The warehouse's tables and their columns, as the destination last read them: `describe` and every
 * write ask (a sync with nothing new asked 28 times, a small first sync 38), and each question was a
 * `duckdb_columns()` scan of every column of every table, 2–4 ms of DuckDB's CPU, about a tenth of
 * such a run. A miss now reads every table of `main` in that one scan, so the run's later
 * questions, about other tables or about tables that do not exist, are answered from here until
 * something changes the schema: the destination drops the whole cache (`clear`) or one table
 * (`forget`, after it creates or alters that table), and the next question reads them all again.
 */
export class DescribedTables {
  private readonly columns = new Map<string, readonly ColumnDef[]>();
  /** Whether `columns` holds every table of `main` (a table missing from it does not exist). */
  private complete = false;

  constructor(private readonly connection: () => DuckDBConnection) {}

  /** The table's columns in order, or `undefined` when it does not exist. */
  async get(table: string): Promise<readonly ColumnDef[] | undefined> {
    if (!this.complete) await this.readAll();
    return this.columns.get(table);
  }

  /** Everything may have changed (SQL the destination cannot see into, a failed write, a swap). */
  clear(): void {
    this.columns.clear();
    this.complete = false;
  }

  /** `table` is being created or altered: the next question reads the tables again. */
  forget(table: string): void {
    this.columns.delete(table);
    this.complete = false;
  }

  private async readAll(): Promise<void> {
    const reader = await this.connection().runAndReadAll(
      `SELECT table_name, column_name, data_type FROM duckdb_columns()
        WHERE database_name = current_database() AND schema_name = 'main'
        ORDER BY table_name, column_index`,
    );
    const found = new Map<string, ColumnDef[]>();
    for (const [table, name, type] of reader.getRows()) {
      const key = String(table);
      let list = found.get(key);
      if (list === undefined) {
        list = [];
        found.set(key, list);
      }
      list.push({ name: String(name), type: logicalFromDuckdb(String(type)) });
    }
    this.columns.clear();
    for (const [table, list] of found) this.columns.set(table, list);
    this.complete = true;
  }
}
