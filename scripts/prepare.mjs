// `npm install` / `npm ci` run `prepare`. It builds dist/ with TypeScript and esbuild, dev
// dependencies: a production install (`npm ci --omit=dev`, the Docker image) has neither and ships
// dist/ built elsewhere (the image's build stage, or the published package), so it skips the build.
//
// In a checkout with the tests it compiles them too (tsconfig.test.json, which also type-checks
// them): `npm test` then starts from that build, and its own `tsc -b` finds it up to date in under
// a second, instead of checking every source file a second time (about 14 s of a CI run).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch {
  console.log('query-sync prepare: TypeScript is not installed (production install): not building dist/');
  process.exit(0);
}
const project = existsSync('tsconfig.test.json') && existsSync('test') ? 'tsconfig.test.json' : 'tsconfig.json';
const steps = [[tsc, '-b', project], ['scripts/bundle.mjs']];
for (const args of steps) {
  const result = spawnSync(process.execPath, args, { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
