// `npm run build` (and the first step of `npm test`, `npm run test:slow`, the benchmarks and
// `prepare`): `tsc -b` of the given project (default tsconfig.json), then the CLI bundle
// (scripts/bundle.mjs).
//
// The compiler is TypeScript 7 (the `typescript7` dev dependency, the native port): it emits the
// same JavaScript as TypeScript 5.9 did, file for file (compared over the whole of dist/), and builds
// everything with the tests in about 2 s instead of 12. `typescript` 5.9 stays for the tests and
// scripts that read our sources with its parser API, which TypeScript 7 does not offer. Build mode
// (`-b`) compares the sources with the last build before reading them: nothing changed, it returns
// at once.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
const project = process.argv[2] ?? 'tsconfig.json';
const steps = [
  // Its package exports no ./bin/tsc: found beside its package.json.
  [join(dirname(require.resolve('typescript7/package.json')), 'bin', 'tsc'), '-b', project],
  [new URL('./bundle.mjs', import.meta.url).pathname],
];
for (const args of steps) {
  const result = spawnSync(process.execPath, args, { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
