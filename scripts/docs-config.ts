import { readFileSync, writeFileSync } from 'node:fs';
import { withTable } from './config-table.js';

/** `npm run docs:config`: rewrites the table of settings in docs/configuration.md from src/config/options.ts. */
const path = new URL('../../docs/configuration.md', import.meta.url);
const page = readFileSync(path, 'utf8');
const next = withTable(page);
if (next === page) process.stdout.write('docs/configuration.md is up to date\n');
else {
  writeFileSync(path, next);
  process.stdout.write('docs/configuration.md: the table of settings rewritten from src/config/options.ts\n');
}
