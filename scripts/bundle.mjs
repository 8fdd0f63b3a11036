// `npm run build`'s second step: the CLI as one bundle, dist/bin/cli.js (the package's `bin`), built
// from the same sources as dist/src/ (run after `tsc`, which type-checks them and builds the rest).
//
// Why: a run's start is mostly Node loading modules. A sync through dist/src/cli/main.js loads about 530
// (DuckDB's API 181, ours 130, undici's 111, yargs', pino's...), each a stat, a read and a compile;
// through the bundle about 65 (31 of ours, pino's 30). A sync with nothing to do then takes 1.06
// CPU-seconds instead of 1.28 (a mean of 8 runs each), a sixth of each scheduled run's CPU.
//
// - Two files: the CLI as one CommonJS file, main-<content hash>.cjs, and its entry, cli.js (the
//   `bin`, src/cli/entry.ts), which sets V8's flags and runs the CLI from V8's code cache
//   (src/cli/code-cache.ts: a `vm.Script` takes a code cache, and Node 20 gives ES modules none; a
//   sync with nothing new 0.89 -> 0.73 CPU-s, docs/benchmarks.md, CLI start). The ES chunks per
//   command it replaces (`splitting`, which esbuild has only for ES modules) kept V8 from parsing
//   the commands not run; with a cache V8 parses nothing, and a command's cache holds what it ran.
// - Commands stay lazy: esbuild runs a module imported with `import()` when it is imported, so
//   `status` does not run `sync`'s modules (DuckDB's API, undici), and nobody loads the BigQuery
//   client who does not write to BigQuery.
// - Packages with native code, worker threads or files found by path at run time stay outside,
//   loaded from node_modules as before: DuckDB's native binding (its JavaScript API, ~180 small
//   CommonJS files, is bundled: src/load/duckdb/instance.ts), the BigQuery client, pino-pretty,
//   yaml. pino is bundled without its transports (worker threads), which query-sync does not use
//   (see \`pinoWithoutTransports\`).
// - undici is bundled through scripts/undici-lean.cjs: its Agent and `request`, not the 72 other files
//   of fetch, WebSocket, caches and mocks its index loads (65 ms of CPU less per start, 1.00 against
//   1.07 CPU-s for a sync with nothing to do, a mean of 24 runs alternating).
// - The emulator (`query-sync emulate`) starts its worker threads from files next to its own
//   modules, so it is not bundled either: the bundle requires its ES modules from dist/emulator/
//   (`require` of ES modules: Node 20.19 and later, as package.json's engines say).
// - The package's version is read from package.json found by walking up from the module
//   (src/http/conventions.ts), which dist/bin/ reaches as dist/src/ does.
import { chmodSync, existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outdir = join(root, 'dist', 'bin');

/** Imports of emulator/ stay imports, of its compiled files in dist/emulator/. */
const emulatorOutside = {
  name: 'emulator-outside',
  setup(b) {
    b.onResolve({ filter: /\/emulator\// }, (args) => {
      const file = resolve(args.resolveDir, args.path);
      if (!file.startsWith(`${join(root, 'emulator')}/`)) return undefined;
      const compiled = join(root, 'dist', relative(root, file));
      return { path: `./${relative(outdir, compiled)}`.replace(/^\.\/\.\.\//, '../'), external: true };
    });
  },
};

/** `undici` is the lean entry beside this script (see its comment), not undici's index. */
const undiciLean = {
  name: 'undici-lean',
  setup(b) {
    b.onResolve({ filter: /^undici$/ }, () => ({ path: join(root, 'scripts', 'undici-lean.cjs') }));
    // Its HTTP/2 client (and Node's http2 module, about 20 ms of CPU at every start) loads when a
    // connection first negotiates h2, which ours never do (no `allowH2`), instead of at start.
    b.onLoad({ filter: /[\\/]undici[\\/]lib[\\/]dispatcher[\\/]client\.js$/ }, (args) => {
      const eager = "const connectH2 = require('./client-h2.js')";
      const text = readFileSync(args.path, 'utf8');
      if (!text.includes(eager)) throw new Error(`${args.path} no longer holds "${eager}": see scripts/bundle.mjs`);
      const lazy = "let h2; const connectH2 = (...args) => (h2 ??= require('./client-h2.js'))(...args)";
      return { contents: text.replace(eager, lazy), loader: 'js' };
    });
  },
};

/**
 * `string-width` (yargs' cliui and wrap-ansi measure help text with it) builds two Intl.Segmenters
 * and five Unicode-property regular expressions (emoji, marks, ignorable code points) when its
 * module loads, which ICU makes about 40 ms of CPU at every start, and only help text uses them.
 * Each import of it gets a stand-in that requires the real module on the first call: esbuild wraps
 * a module reached only through `require` in an initializer that runs then. Printable ASCII text
 * (all of the help text but a few lines) is one column a character, as string-width counts it: the
 * stand-in answers that itself, without the real module's per-grapheme segmenting, the help's
 * layout cost (`sync --help` 0.53 -> 0.30 CPU-s, 10 runs alternating; every command's help the
 * same byte for byte).
 */
const lazyStringWidth = {
  name: 'lazy-string-width',
  setup(b) {
    b.onResolve({ filter: /^string-width$/ }, async (args) => {
      if (args.pluginData?.real === true) return undefined;
      const real = await b.resolve(args.path, {
        kind: args.kind,
        importer: args.importer,
        resolveDir: args.resolveDir,
        pluginData: { real: true },
      });
      if (real.errors.length > 0) return { errors: real.errors };
      return { path: real.path, namespace: 'lazy-string-width' };
    });
    b.onLoad({ filter: /.*/, namespace: 'lazy-string-width' }, (args) => ({
      contents: `let real;
export default function stringWidth(text, options) {
  if (typeof text === 'string' && /^[\\x20-\\x7e]*$/.test(text)) return text.length;
  real ??= require(${JSON.stringify(args.path)}).default;
  return real(text, options);
}`,
      loader: 'js',
      resolveDir: root,
    }));
  },
};

/**
 * DuckDB's native binding without `@duckdb/node-bindings`' loader: that loader asks detect-libc
 * whether Linux runs musl, which loads \`child_process\` and reads the node binary's interpreter
 * (about 15 ms of CPU at every start). On Linux the glibc build is loaded, and the musl build only
 * when that fails to load (where both were installed, on musl, the glibc one cannot load); other
 * platforms, and a Linux where neither loads, go through the package's own loader as before.
 */
const duckdbBinding = {
  name: 'duckdb-binding',
  setup(b) {
    b.onResolve({ filter: /^@duckdb\/node-bindings$/ }, () => ({ path: 'binding', namespace: 'duckdb-binding' }));
    b.onLoad({ filter: /.*/, namespace: 'duckdb-binding' }, () => ({
      contents: `function load() {
  const { platform, arch } = process;
  if (platform !== 'linux' || (arch !== 'x64' && arch !== 'arm64')) return require('@duckdb/node-bindings/duckdb.js');
  try {
    return require(\`@duckdb/node-bindings-linux-\${arch}/duckdb.node\`);
  } catch {
    try {
      return require(\`@duckdb/node-bindings-linux-\${arch}-musl/duckdb.node\`);
    } catch {
      return require('@duckdb/node-bindings/duckdb.js');
    }
  }
}
module.exports = load();`,
      loader: 'js',
      resolveDir: root,
    }));
  },
};

/**
 * pino is bundled (about 25 CommonJS files otherwise each resolved, read and wrapped at every start,
 * pino.js parsed a second time for its export names), but not its transports: `pino.transport()`
 * and the `transport` option run a worker thread from files found by path, which a bundle cannot
 * carry. query-sync writes its logs through a stream in the process (`core/log.ts`), so the module
 * that starts them (pino/lib/transport.js, which loads thread-stream and \`worker_threads\`) is
 * replaced by one that refuses, and is never called.
 */
const pinoWithoutTransports = {
  name: 'pino-without-transports',
  setup(b) {
    // pino.js requires './lib/transport', lib/tools.js './transport'.
    b.onResolve({ filter: /^\.\/(lib\/)?transport$/ }, (args) =>
      /[\\/]node_modules[\\/]pino[\\/]lib[\\/]transport$/.test(join(args.resolveDir, args.path))
        ? { path: 'transport', namespace: 'pino-without-transports' }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'pino-without-transports' }, () => ({
      contents: `module.exports = function transport() {
  throw new Error('pino transports are not part of the query-sync bundle (scripts/bundle.mjs)');
};`,
      loader: 'js',
    }));
  },
};

/**
 * The files the last bundle was built from and when that build started (dist/bin/inputs.json): a
 * bundle none of whose inputs changed since is kept as it is, as `tsc -b` keeps what is up to
 * date. So `npm test` and `npm run test:slow` can start side by side (.ci/run) without one
 * replacing the bundle under the other's running CLI processes.
 */
const stamp = join(outdir, 'inputs.json');
const self = [
  fileURLToPath(import.meta.url),
  join(root, 'scripts', 'undici-lean.cjs'),
  join(root, 'package-lock.json'),
];

function upToDate() {
  if (!existsSync(join(outdir, 'cli.js')) || !existsSync(stamp)) return false;
  try {
    const { startedMs, inputs } = JSON.parse(readFileSync(stamp, 'utf8'));
    return [...self, ...inputs.map((f) => join(root, f))].every((f) => statSync(f).mtimeMs < startedMs);
  } catch {
    return false;
  }
}

if (!upToDate()) {
  const startedMs = Date.now();
  rmSync(outdir, { recursive: true, force: true });
  // Imported only to build: loading esbuild starts its service process, and this process then
  // waited about 2 s for it to exit, an up-to-date check included (at the start of `npm test` and
  // `npm run test:slow`, both in CI's critical path).
  const { build } = await import('esbuild');
  const plugins = [emulatorOutside, undiciLean, lazyStringWidth, duckdbBinding, pinoWithoutTransports];
  // The CLI as one CommonJS file, main-<hash>.cjs: V8 takes a code cache for a script, and Node 20
  // none for ES modules (src/cli/code-cache.ts). `import.meta.url` is the file's URL as in a module.
  const main = await build({
    absWorkingDir: root,
    entryPoints: { main: join(root, 'src', 'cli', 'main.ts') },
    entryNames: '[name]-[hash]',
    outdir,
    outExtension: { '.js': '.cjs' },
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    sourcemap: true,
    metafile: true,
    external: ['@duckdb/node-bindings*', '@google-cloud/*', 'google-auth-library', 'pino-pretty', 'yaml'],
    define: { 'import.meta.url': '__querySyncUrl' },
    banner: { js: "var __querySyncUrl = require('node:url').pathToFileURL(__filename).href;" },
    // The emulator's ES modules, outside, are loaded with `require`, as Node loads ES modules from
    // 20.19 (package.json's engines): in a `vm.Script` compiled from a code cache Node 20 has no
    // loader for `import()` (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING).
    supported: { 'dynamic-import': false },
    plugins,
    logLevel: 'warning',
  });
  const bundle = Object.keys(main.metafile.outputs).find((f) => f.endsWith('.cjs'));
  // The entry (src/cli/entry.ts, the package's `bin`): V8's flags, the caches, then the bundle.
  const entry = await build({
    absWorkingDir: root,
    entryPoints: { cli: join(root, 'src', 'cli', 'entry.ts') },
    outdir,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: true,
    metafile: true,
    define: { QUERY_SYNC_BUNDLE: JSON.stringify(`./${relative(outdir, join(root, bundle))}`) },
    logLevel: 'warning',
  });
  const metafile = { inputs: { ...main.metafile.inputs, ...entry.metafile.inputs } };
  chmodSync(join(outdir, 'cli.js'), 0o755);
  // Relative to `absWorkingDir`, the root. Files only: the plugins' stand-ins are inputs named
  // `namespace:path`, which no file has (kept, they made every check find the bundle out of date, so
  // every `npm test` rebuilt it, and CI's two groups each replaced dist/bin/ as they started); what
  // they stand for is this script's code and the packages the lock file names.
  const inputs = Object.keys(metafile.inputs).filter((f) => existsSync(join(root, f)));
  writeFileSync(stamp, `${JSON.stringify({ startedMs, inputs })}\n`);
}
