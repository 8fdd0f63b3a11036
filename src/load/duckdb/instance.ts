import { createRequire } from 'node:module';
import type * as DuckDbApi from '@duckdb/node-api';

/**
 * `DuckDBInstance`, loaded with `require`. @duckdb/node-api is CommonJS that re-exports dozens of
 * modules: an ESM `import` of it makes Node parse each of them for its export names
 * (cjs-module-lexer), 0.18 s of CPU at every start of the CLI, about half of what loading DuckDB
 * costs; `require` skips that. Types still come from `import type`.
 *
 * In the CLI's bundle (scripts/bundle.mjs) `require` is defined and esbuild sees the call: its ~180
 * files are bundled (all but the native binding), 0.1 s less at every start. Compiled by `tsc` alone
 * (dist/src/, tests), an ES module has no `require`, and one is made.
 */
const requireApi = (): typeof DuckDbApi =>
  (typeof require === 'function'
    ? require('@duckdb/node-api')
    : createRequire(import.meta.url)('@duckdb/node-api')) as typeof DuckDbApi;
export const DuckDBInstance: typeof DuckDbApi.DuckDBInstance = requireApi().DuckDBInstance;
export type DuckDBInstance = DuckDbApi.DuckDBInstance;
