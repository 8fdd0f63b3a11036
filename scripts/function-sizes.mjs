// The largest functions (by lines, first to last line) in the given .ts files, read with the
// TypeScript compiler API; for refactoring notes. `node scripts/function-sizes.mjs src/sync/*.ts`
// (TOP=20 for more rows). A nested function is counted on its own and inside its parent.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
const require = createRequire(import.meta.url);
const ts = require('typescript');
const out = [];
for (const file of process.argv.slice(2)) {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
  const visit = (node, owner) => {
    let name;
    if (
      ts.isFunctionDeclaration(node) ||
      ts.isMethodDeclaration(node) ||
      ts.isGetAccessor(node) ||
      ts.isSetAccessor(node)
    )
      name = node.name?.getText(sf) ?? '(anonymous)';
    else if (ts.isConstructorDeclaration(node)) name = 'constructor';
    else if ((ts.isArrowFunction(node) || ts.isFunctionExpression(node)) && ts.isVariableDeclaration(node.parent))
      name = node.parent.name.getText(sf);
    if (name !== undefined && node.body) {
      const a = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1;
      const b = sf.getLineAndCharacterOfPosition(node.end).line + 1;
      out.push({ file, name: owner ? `${owner}.${name}` : name, lines: b - a + 1, at: a });
    }
    const nextOwner = ts.isClassDeclaration(node) ? node.name?.getText(sf) : owner;
    ts.forEachChild(node, (c) => visit(c, nextOwner));
  };
  visit(sf, undefined);
}
out.sort((x, y) => y.lines - x.lines);
for (const f of out.slice(0, Number(process.env.TOP ?? 12)))
  console.log(`${String(f.lines).padStart(4)}  ${f.file}:${f.at}  ${f.name}`);
