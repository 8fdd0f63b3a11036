// `npm install` / `npm ci` run `prepare`. It builds dist/ with TypeScript, a dev dependency: a
// production install (`npm ci --omit=dev`, the Docker image) has no TypeScript and ships dist/
// built elsewhere (the image's build stage, or the published package), so it skips the build.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch {
  console.log('query-sync prepare: TypeScript is not installed (production install): not building dist/');
  process.exit(0);
}
const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], { stdio: 'inherit' });
process.exit(result.status ?? 1);
