// `npm run test:slow`: the slow files (project `slow`) and the slow-tagged tests of the fast files,
// side by side instead of one after the other. They are two vitest runs because a tags filter is
// global to a run (`--tags-filter=slow` would leave out every untagged test of the slow files).
// Each run's output is printed whole when it ends, so the two never interleave; the exit code is
// the first failure's.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const vitest = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs');
const runs = [
  ['run', '--project', 'slow'],
  // One worker: the slow files take two, and the machine CI runs on has two cores.
  ['run', '--project', 'fast', '--project', 'fast-nock', '--tags-filter=slow', '--maxWorkers', '1'],
];

const results = await Promise.all(
  runs.map(
    (args) =>
      new Promise((resolve) => {
        const child = spawn(process.execPath, [vitest, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FORCE_COLOR: process.stdout.isTTY ? '1' : '0' } });
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
