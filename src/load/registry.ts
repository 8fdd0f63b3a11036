import { COLUMN_TYPES } from '../core/column-types.js';
import type { LogicalType } from '../core/types.js';

/**
 * The destinations query-sync writes to, by the name `--destination` takes. Each is a folder under
 * `load/` (its `Destination` and what it offers of `destination-capabilities.ts`) and one entry here;
 * the configuration's choices, the settings' types and dbt's column types read this list, and the
 * places that differ by destination (opening one: `run/open-destination.ts`) are records keyed by
 * `DestinationName`, so a new name is a compile error where a table is keyed by it (`OPEN`, dbt's
 * column types); the DuckDB-only paths (the working file, the published copy) still compare
 * `config.destination === 'duckdb'`: docs/development.md "Adding a destination" (step 5) lists the files.
 * See docs/development.md, "Adding a destination".
 */
export const DESTINATIONS = {
  duckdb: {
    describe: 'a DuckDB file (the published read copy at --duckdb-path, the working file beside it)',
    sqlType: (type: LogicalType): string => COLUMN_TYPES[type].duckdb,
  },
  bigquery: {
    describe: 'a BigQuery dataset (--bq-project, --bq-dataset)',
    sqlType: (type: LogicalType): string => COLUMN_TYPES[type].bigquery,
  },
} as const satisfies Readonly<Record<string, DestinationKind>>;

/** What the list says of each destination. */
export interface DestinationKind {
  /** One line for `--help`. */
  readonly describe: string;
  /** Its SQL type for a logical column type (`core/column-types.ts`), as dbt's `sources.yml` names it. */
  readonly sqlType: (type: LogicalType) => string;
}

/** A destination's name: `--destination`'s value. */
export type DestinationName = keyof typeof DESTINATIONS;

/** The names, in the order `--help` lists them (the first is the default). */
export const DESTINATION_NAMES = Object.keys(DESTINATIONS) as DestinationName[];
