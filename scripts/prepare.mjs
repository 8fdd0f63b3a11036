// `npm install` / `npm ci` run `prepare`. It builds dist/ (scripts/build.mjs: TypeScript, then the
// CLI bundle with esbuild), dev dependencies: a production install (`npm ci --omit=dev`, the Docker
// image) has neither and ships dist/ built elsewhere (the image's build stage, or the published
// package), so it skips the build.
//
// In a checkout with the tests it compiles them too (tsconfig.test.json, which also type-checks
// them): `npm test` then starts from that build, and its own `tsc -b` finds it up to date at once,
// instead of checking every source file a second time.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
try {
  require.resolve('typescript7/package.json');
  require.resolve('esbuild');
} catch {
  console.log('query-sync prepare: TypeScript or esbuild is not installed (production install): not building dist/');
  process.exit(0);
}
const project = existsSync('tsconfig.test.json') && existsSync('test') ? 'tsconfig.test.json' : 'tsconfig.json';
const result = spawnSync(process.execPath, [new URL('./build.mjs', import.meta.url).pathname, project], {
  stdio: 'inherit',
});
process.exit(result.status ?? 1);
