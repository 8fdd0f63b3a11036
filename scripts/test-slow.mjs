// `npm run test:slow`: the slow files (project `slow`) and the slow-tagged tests of the fast files,
// side by side instead of one after the other. They are two vitest runs because a tags filter is
// global to a run (`--tags-filter=slow` would leave out every untagged test of the slow files).
// Each run's output is printed whole when it ends, so the two never interleave; the exit code is
// the first failure's.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const vitest = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs');
// The fast files that hold a slow-tagged test, named to vitest: a tags filter alone makes it import
// every test file (and all they load) to read their tags, a minute of CPU for 89 files it then skips.
const root = fileURLToPath(new URL('..', import.meta.url));
const tagged = readdirSync(join(root, 'test'), { recursive: true })
  .map((f) => `test/${String(f).replaceAll('\\', '/')}`)
  .filter((f) => f.endsWith('.test.ts') && /tags: \['slow'\]/.test(readFileSync(join(root, f), 'utf8')))
  .sort();
const runs = [
  ['run', '--project', 'slow'],
  // One worker: the slow files take two, and the machine CI runs on has two cores.
  ['run', '--project', 'fast', '--project', 'fast-nock', '--tags-filter=slow', '--maxWorkers', '1', ...tagged],
];

const results = await Promise.all(
  runs.map(
    (args) =>
      new Promise((resolve) => {
        const child = spawn(process.execPath, [vitest, ...args], {
          stdio: ['ignore', 'pipe', 'pipe'],
          env: { ...process.env, FORCE_COLOR: process.stdout.isTTY ? '1' : '0' },
        });
        const out = [];
        child.stdout.on('data', (b) => out.push(b));
        child.stderr.on('data', (b) => out.push(b));
        child.on('close', (code, signal) => {
          process.stdout.write(`\n$ vitest ${args.join(' ')}\n`);
          process.stdout.write(Buffer.concat(out));
          resolve(code ?? (signal === null ? 1 : 128));
        });
      }),
  ),
);
process.exit(results.find((code) => code !== 0) ?? 0);
