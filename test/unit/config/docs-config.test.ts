import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { configTable, withTable } from '../../../scripts/config-table.js';
import { OPTIONS } from '../../../src/config/index.js';

const PAGE = join(process.cwd(), 'docs', 'configuration.md');

describe('docs/configuration.md', () => {
  it('holds the table of settings as src/config/options.ts makes it (else: npm run docs:config)', () => {
    const page = readFileSync(PAGE, 'utf8');
    expect(page, 'docs/configuration.md is out of date: run npm run docs:config and commit it').toBe(withTable(page));
  });

  it('the table has a row for every option, with its environment name, and escapes the pipes of its text', () => {
    const table = configTable();
    const rows = table.split('\n').filter((l) => l.startsWith('| `--') || l.startsWith('| —'));
    expect(rows).toHaveLength(OPTIONS.length);
    for (const row of rows) expect(row.replaceAll('\\|', '').split('|')).toHaveLength(6); // 4 cells
    expect(table).toContain('mode=text\\|semantic\\|regex');
  });
});
