/**
 * The one reader of process.env and config files: every setting of a run, validated and frozen.
 * Each flag is also read from `QUERY_SYNC_<FLAG>` and from `--config` (see `config/options.ts`).
 */
// By concern, under config/: the defaults and the flag table (defaults.ts), reading one command's
// values (reader.ts), what several commands read alike (parts.ts), a run's settings (run.ts) and
// the other commands' (commands.ts). Importers keep importing this file.
export * from './defaults.js';
export * from './run.js';
export * from './commands.js';
export type { BigQueryConfig } from './parts.js';
