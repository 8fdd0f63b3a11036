import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The layers docs/development.md draws, as a test: an import that crosses them fails
 * here, naming the file and what it imports. (The emulator's own rule, that it imports nothing of
 * ours, is `test/emulator/independence.test.ts`.)
 */

const ROOT = process.cwd();

/** What each layer may import besides itself; `*` marks the top of the stack. */
const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  'src/core': [],
  'src/http': ['src/core'],
  'src/normalize': ['src/core'],
  'src/load': ['src/core'],
  'src/state': ['src/core'],
  'src/extract': ['src/core', 'src/http'],
  'src/pipeline': ['src/core', 'src/http', 'src/extract', 'src/normalize', 'src/load', 'src/state', 'connectors'],
  connectors: ['src/core'],
  // The application layer (run envelope, reports, output) sits under the command shells: it may use
  // every layer below and the configuration, never `commands/` or `cli.ts`.
  'src/app': ['src/core', 'src/http', 'src/extract', 'src/normalize', 'src/load', 'src/state', 'src/pipeline', 'src/publish', 'connectors', 'src/config.ts', 'src/options.ts', 'src/config-values.ts'],
};

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"](\.[^'"]+)['"]/g;

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Relative imports of one file, as paths from the repository root (`.js` → `.ts`). */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  return [...text.matchAll(IMPORT)].map((m) => relative(ROOT, resolve(ROOT, dirname(file), (m[1] as string).replace(/\.js$/, '.ts'))));
}

/** The layer a file belongs to: `src/<dir>`, `connectors`, or the file itself for `src/cli.ts` etc. */
function layerOf(file: string): string {
  const parts = file.split('/');
  if (parts[0] === 'connectors') return 'connectors';
  return parts.length > 2 ? `${parts[0]}/${parts[1]}` : file;
}

/**
 * A pure leaf (a module importing nothing of ours, such as `extract/windows.ts` or
 * `normalize/timestamp.ts`) carries no dependencies with it, so any layer may use it.
 */
function isLeaf(file: string): boolean {
  return importsOf(file).length === 0;
}

function violations(): string[] {
  const found: string[] = [];
  for (const file of [...sourceFiles('src'), ...sourceFiles('connectors')]) {
    const layer = layerOf(file);
    const allowed = ALLOWED[layer];
    if (allowed === undefined) continue; // cli, config, commands, emulator: the top, or checked elsewhere
    for (const target of importsOf(file)) {
      const to = layerOf(target);
      if (to === layer || allowed.includes(to) || isLeaf(target)) continue;
      found.push(`${file} imports ${target} (${layer} may import ${allowed.join(', ') || 'nothing of ours'})`);
    }
  }
  return found;
}

describe('layers', () => {
  it('no import crosses the layers docs/development.md draws', () => {
    expect(violations()).toEqual([]);
  });

  it('the configuration does not load the HTTP client, and no two modules import each other round a circle', () => {
    // config.ts re-exports the files under config/: none of them loads the client or the pipeline.
    const configFiles = ['src/config.ts', ...sourceFiles('src/config')];
    for (const file of configFiles) {
      expect(importsOf(file), file).not.toContain('src/http/client.ts');
      expect(importsOf(file).filter((target) => target.startsWith('src/pipeline/')), file).toEqual([]);
    }
    const files = [...sourceFiles('src'), ...sourceFiles('connectors')];
    const edges = new Map(files.map((f) => [f, importsOf(f)]));
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (file: string, path: string[]): void => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'open') {
        cycles.push([...path.slice(path.indexOf(file)), file].join(' -> '));
        return;
      }
      state.set(file, 'open');
      for (const next of edges.get(file) ?? []) visit(next, [...path, file]);
      state.set(file, 'done');
    };
    for (const file of files) visit(file, []);
    expect(cycles).toEqual([]);
  });

  it('the check sees real imports: each layer is found importing the layers below it', () => {
    const seen = new Set<string>();
    for (const file of [...sourceFiles('src'), ...sourceFiles('connectors')]) {
      for (const target of importsOf(file)) seen.add(`${layerOf(file)} -> ${layerOf(target)}`);
    }
    for (const edge of ['src/pipeline -> src/extract', 'src/extract -> src/http', 'src/http -> src/core', 'connectors -> src/core']) {
      expect(seen, edge).toContain(edge);
    }
  });
});
