import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * Configuration flows: a setting's default lives once, in `src/config/index.ts` / `src/config/options.ts`, and
 * the pipeline receives the configured value. A pipeline module that imports a default from another
 * layer (`DEFAULT_RATE_LIMITS` made the split assume 400 a minute under `--max-rpm 200`) or declares
 * its own copy of a setting's default fails here, naming the file and line.
 */

const ROOT = process.cwd();
const LIBRARY = [
  'src/sync',
  'src/reconcile',
  'src/analysts',
  'src/reports',
  'src/extract',
  'src/state',
  'src/normalize',
];
/** Defaults of settings a user gives (`--batch-rows`, `--batch-bytes`, `--settle`, `--concurrency`, the limits). */
const SETTING_DEFAULT =
  /\bDEFAULT_(?:BATCH_ROWS|BATCH_BYTES|SETTLE\w*|SPLIT_CONCURRENCY|BACKFILL_CONCURRENCY|CONCURRENCY|RATE_LIMITS|LOOKBACK\w*|WINDOW\w*)\b/;
const IMPORT_OF_DEFAULT = /import\s*\{[^}]*\bDEFAULT_\w+[^}]*\}\s*from\s*'(\.\.\/[^']+)'/;

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

function restated(): string[] {
  const found: string[] = [];
  for (const file of LIBRARY.flatMap(sourceFiles)) {
    readFileSync(join(ROOT, file), 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (/^\s*(?:\*|\/\/|\/\*\*)/.test(line)) return;
        const imported = IMPORT_OF_DEFAULT.exec(line);
        if (imported !== null || SETTING_DEFAULT.test(line)) found.push(`${file}:${i + 1}: ${line.trim()}`);
      });
  }
  return found;
}

describe('configuration flows into the pipeline', () => {
  it("no library module imports a default from another layer or restates a setting's default", () => {
    expect(restated()).toEqual([]);
  });
});
