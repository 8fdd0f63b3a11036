/**
 * The emulator is the test oracle: it must share no code with what it tests. Every import of every
 * file under emulator/ stays inside emulator/ or is a Node built-in (`node:*`).
 */

import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const EMULATOR = resolve('emulator');

/** Module specifiers of a source text: static imports and re-exports, `import()`, `new URL(…, import.meta.url)`. */
function specifiers(fileName: string, text: string): string[] {
  const found = ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const visit = (node: ts.Node): void => {
    if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'URL') {
      const [first, second] = node.arguments ?? [];
      if (first && second && ts.isStringLiteral(first) && second.getText(source) === 'import.meta.url')
        found.push(first.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The imports of `file` (inside `root`) that leave `root`, as `file → specifier`. */
function escapes(root: string, file: string, text: string): string[] {
  return specifiers(file, text)
    .filter((spec) => {
      if (spec.startsWith('node:')) return false;
      if (!spec.startsWith('.')) return true; // a package: not ours to share with the product either
      const target = resolve(dirname(file), spec);
      return target !== root && !target.startsWith(root + sep);
    })
    .map((spec) => `${relative(process.cwd(), file)} → ${spec}`);
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    return entry.isDirectory() ? sourceFiles(path) : entry.name.endsWith('.ts') ? [path] : [];
  });
}

describe('emulator independence', () => {
  it('no file under emulator/ imports from outside it (only node: built-ins)', () => {
    const files = sourceFiles(EMULATOR);
    expect(files.length).toBeGreaterThan(10);
    const crossing = files.flatMap((file) => escapes(EMULATOR, file, readFileSync(file, 'utf8')));
    expect(crossing, 'the emulator must not share code with the product it tests').toEqual([]);
  });

  it('catches every kind of crossing import', () => {
    const file = join(EMULATOR, 'x.ts');
    const cases = [
      "import type { ApiRecord } from '../core/types.js';",
      "import { RESOURCES } from '../../connectors/index.js';",
      "export { x } from '../normalize/normalize.js';",
      "const m = await import('../http/client.js');",
      "new Worker(new URL('../cli.js', import.meta.url));",
      "import { z } from 'zod';",
    ];
    for (const text of cases) expect(escapes(EMULATOR, file, text), text).toHaveLength(1);
    const inside = [
      "import { Store } from './store.js';",
      "import { x } from './sub/../json.js';",
      "import { createServer } from 'node:http';",
      "new URL('./worker.js', import.meta.url);",
    ];
    for (const text of inside) expect(escapes(EMULATOR, file, text), text).toEqual([]);
  });
});
