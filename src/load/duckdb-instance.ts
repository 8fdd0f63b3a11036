import { createRequire } from 'node:module';
import type * as DuckDbApi from '@duckdb/node-api';

/**
 * `DuckDBInstance`, loaded with `require`. @duckdb/node-api is CommonJS that re-exports dozens of
 * modules: an ESM `import` of it makes Node parse each of them for its export names
 * (cjs-module-lexer), 0.18 s of CPU at every start of the CLI, about half of what loading DuckDB
 * costs; `require` skips that. Types still come from `import type`.
 */
export const DuckDBInstance: typeof DuckDbApi.DuckDBInstance = (createRequire(import.meta.url)('@duckdb/node-api') as typeof DuckDbApi).DuckDBInstance;
export type DuckDBInstance = DuckDbApi.DuckDBInstance;
