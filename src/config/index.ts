/**
 * The door to configuration: re-exports only. The flags, their environment names and the config file
 * are declared and merged in `options.ts` (`OPTIONS`, `collect`), parsed by kind in `reader.ts`, and
 * resolved into a run's frozen settings in `run.ts` (and `commands.ts` for the other commands).
 */
// By concern, under config/: the defaults and the flag table (defaults.ts), reading one command's
// values (reader.ts), what several commands read alike (parts.ts), a run's settings (run.ts) and
// the other commands' (commands.ts). Importers keep importing this file.
export * from './defaults.js';
export * from './run.js';
export * from './commands.js';
export type { BigQueryConfig } from './parts.js';
