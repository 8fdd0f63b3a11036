import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The layers docs/development.md and STYLE draw, as a test: an import that crosses them fails here,
 * naming the file, the chain of imports that reaches the forbidden module, and what the layer may
 * import. Every file of `src/`, `connectors/` and `emulator/` belongs to a layer (a new folder fails
 * until it is given its rule). Imports are followed transitively (a layer may not reach a forbidden
 * one through another) and include `import type`, re-exports and `import()`: a lazy `import()` still
 * ties the modules together. (The emulator's own rule, that it imports nothing of ours nor any
 * package, is `test/emulator/independence.test.ts`.)
 */

const ROOT = process.cwd();
const SCANNED = ['src', 'connectors', 'emulator'];

/**
 * The stages under the engine, and what every room above them sees. The leases are a layer of their
 * own inside `state/`: a destination that keeps its own lease (BigQuery) offers it through them.
 */
const STAGES = ['src/core', 'src/http', 'src/extract', 'src/normalize', 'src/load', 'src/state', 'src/state/leases'];
/** The configuration: flags, environment and config file → frozen values (`config/options.ts` the table). */
const CONFIG = ['src/config'];

/**
 * What each layer may import besides itself. A folder is one layer (a folder inside it with a rule
 * of its own is another); a top-level file of `src/` would be a layer of its own, named by its path.
 */
const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  'src/core': [],
  'src/http': ['src/core'],
  'src/normalize': ['src/core'],
  // A destination implements the lease protocol of `state/leases/` where it keeps its own lease.
  'src/load': ['src/core', 'src/state/leases'],
  'src/state': ['src/core', 'src/state/leases'],
  // Every lease and lock: the protocol, the one beside the state file, BigQuery's (SQL on the table it is given).
  'src/state/leases': ['src/core'],
  'src/extract': ['src/core', 'src/http'],
  // The engine: work units, walks, splits, streams, backfill, the per-event reads (traces).
  'src/sync': [...STAGES, 'connectors'],
  // Reconcile and verify: counts of the API against the warehouse, and the re-reads that repair.
  'src/reconcile': [...STAGES, 'src/sync', 'connectors'],
  connectors: ['src/core'],
  // The published read copy is made from the warehouse's own files: it sits on `load`, beside the engine.
  'src/publish': ['src/core', 'src/load', 'src/state/leases'],
  // The configuration turns flags into values for the stages (limits, timeouts, memory policy,
  // privacy, contract, resources); it never sees the engine, the run, the commands or the CLI.
  'src/config': [...STAGES, 'connectors'],
  // What analysts read besides the resources: searches, aggregates, views, run history, dbt sources.
  'src/analysts': [...STAGES, 'src/sync', 'src/publish', 'connectors', ...CONFIG],
  // The read models of plan, status and check, progress, and the text a person reads.
  'src/reports': [...STAGES, 'src/sync', 'src/reconcile', 'src/analysts', 'src/publish', 'connectors', ...CONFIG],
  // A run's monitoring (metrics, pings, notifications) reads what the run did: the stages' results,
  // the state, the published copy. It is given its settings as values, never the configuration.
  'src/monitor': [...STAGES, 'src/sync', 'src/reconcile', 'src/analysts', 'src/reports', 'src/publish', 'connectors'],
  // The run: its envelope round every writing path (sync, backfill, verify --repair, reset, publish).
  'src/run': [
    ...STAGES,
    'src/sync',
    'src/reconcile',
    'src/analysts',
    'src/reports',
    'src/publish',
    'src/monitor',
    'connectors',
    ...CONFIG,
  ],
  // The top: the entry, the demo and the command shells see everything (and `emulate` serves the emulator).
  'src/cli': [
    ...STAGES,
    'src/sync',
    'src/reconcile',
    'src/analysts',
    'src/reports',
    'src/publish',
    'src/monitor',
    'src/run',
    'connectors',
    ...CONFIG,
    'emulator',
  ],
  // The test oracle imports nothing of ours (independence.test.ts also refuses packages).
  emulator: [],
};

/** The configuration's files and its entry. */
const CONFIG_FILES = (): string[] => sourceFiles('src/config');
const CONFIG_ENTRY = 'src/config/index.ts';
/** What the configuration never loads, directly or not: the HTTP client, and these folders. */
const HTTP_CLIENT = 'src/http/client.ts';
const ABOVE_CONFIG = ['src/sync/', 'src/reconcile/', 'src/analysts/', 'src/reports/', 'src/run/', 'src/cli/'];
/** Edges the check must find, so that it is known to read real imports. */
const SEEN_EDGES = [
  'src/sync -> src/extract',
  'src/extract -> src/http',
  'src/http -> src/core',
  'connectors -> src/core',
  'src/cli -> src/run',
];

/**
 * Imports that break the rules today, each with why it is left and who removes it. An edge listed
 * here is allowed, with the modules of the same layer it brings along (through it `config/index.ts` loads
 * most of `pipeline/`); what the chain reaches outside that layer is still checked. An edge that no
 * longer exists fails the test, so the list only shrinks.
 */
const EXCEPTIONS: readonly { readonly from: string; readonly to: string; readonly why: string }[] = [];

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/**
 * Relative module specifiers of a source text, in order: imports and re-exports (type-only too),
 * `typeof import('…')` in types, and `import()` calls (`dynamic`). TypeScript's own scanner
 * (`preProcessFile`) finds them, without parsing the file.
 */
function specifiers(text: string): { readonly spec: string; readonly dynamic: boolean }[] {
  return ts
    .preProcessFile(text, true, true)
    .importedFiles.filter((f) => f.fileName.startsWith('.'))
    .map((f) => {
      const before = text.slice(Math.max(0, f.pos - 40), f.pos); // up to the opening quote
      return {
        spec: f.fileName,
        dynamic: /\bimport\s*\(\s*$/.test(before) && !/\btypeof\s+import\s*\(\s*$/.test(before),
      };
    });
}

function resolved(file: string, spec: string): string {
  return relative(ROOT, resolve(ROOT, dirname(file), spec.replace(/\.js$/, '.ts')));
}

const parsed = new Map<string, ReturnType<typeof specifiers>>();

/** The specifiers of one file of ours, parsed once per run of this file. */
function specifiersOf(file: string): ReturnType<typeof specifiers> {
  let found = parsed.get(file);
  if (found === undefined) {
    found = specifiers(readFileSync(join(ROOT, file), 'utf8'));
    parsed.set(file, found);
  }
  return found;
}

/** Relative imports of one file, as paths from the repository root (`.js` → `.ts`). */
function importsOf(file: string): string[] {
  return specifiersOf(file).map((s) => resolved(file, s.spec));
}

/**
 * The layer a file belongs to: `src/<dir>` (or a folder under it with a rule of its own), `connectors`,
 * `emulator`, or the file itself for a file at the top of `src/`.
 */
function layerOf(file: string): string {
  const parts = file.split('/');
  if (parts[0] === 'connectors' || parts[0] === 'emulator') return parts[0];
  if (parts.length <= 2) return file;
  // A folder inside a layer that has a rule of its own is a layer of its own.
  for (let depth = parts.length - 1; depth > 2; depth--) {
    const folder = parts.slice(0, depth).join('/');
    if (ALLOWED[folder] !== undefined) return folder;
  }
  return `${parts[0]}/${parts[1]}`;
}

type Graph = ReadonlyMap<string, readonly string[]>;

function graph(): Graph {
  const files = SCANNED.flatMap(sourceFiles);
  return new Map(files.map((f) => [f, importsOf(f)]));
}

/**
 * A pure leaf (a module importing nothing of ours, such as `extract/windows.ts` or
 * `normalize/timestamp.ts`) carries no dependencies with it, so any layer may use it.
 */
function isLeaf(edges: Graph, file: string): boolean {
  return (edges.get(file) ?? []).length === 0;
}

function excepted(from: string, to: string): boolean {
  return EXCEPTIONS.some((e) => e.from === from && e.to === to);
}

/** `file` is of the layer a listed exception reaches, on a chain (`path`) that went through that exception. */
function brought(file: string, path: readonly string[]): boolean {
  return EXCEPTIONS.some((e) => layerOf(file) === layerOf(e.to) && path.includes(e.to));
}

/**
 * For each file of a layer, every module it reaches (breadth first, so the chain shown is a shortest
 * one) that its layer may not import: `file → a → b (layer may import …)`.
 */
function violations(edges: Graph): string[] {
  const found: string[] = [];
  for (const file of edges.keys()) {
    const layer = layerOf(file);
    const allowed = ALLOWED[layer];
    if (allowed === undefined) {
      found.push(`${file} belongs to no layer (${layer}): give it a rule in ALLOWED`);
      continue;
    }
    const ok = (to: string): boolean => layerOf(to) === layer || allowed.includes(layerOf(to)) || isLeaf(edges, to);
    const via = new Map<string, string>([[file, '']]);
    const queue = [file];
    while (queue.length > 0) {
      const at = queue.shift() as string;
      for (const next of edges.get(at) ?? []) {
        if (via.has(next)) continue;
        via.set(next, at);
        const chain = [next];
        for (let step = at; step !== ''; step = via.get(step) ?? '') chain.unshift(step);
        if (!ok(next) && !excepted(at, next) && !brought(next, chain)) {
          found.push(`${chain.join(' → ')} (${layer} may import ${allowed.join(', ') || 'nothing of ours'})`);
          continue; // one line per forbidden module reached; its own imports are its layer's business
        }
        queue.push(next);
      }
    }
  }
  return found;
}

/** Every module `file` loads, following imports (not through the listed exceptions). */
function closure(edges: Graph, file: string): Set<string> {
  const seen = new Set<string>();
  const visit = (at: string): void => {
    for (const next of edges.get(at) ?? []) {
      if (seen.has(next) || excepted(at, next)) continue;
      seen.add(next);
      visit(next);
    }
  };
  visit(file);
  return seen;
}

describe('layers', () => {
  it('no import crosses the layers docs/development.md draws', () => {
    expect(violations(graph())).toEqual([]);
  });

  it('each listed exception still exists and still breaks a rule (else remove it from EXCEPTIONS)', () => {
    const edges = graph();
    for (const e of EXCEPTIONS) {
      expect(edges.get(e.from) ?? [], `${e.from} → ${e.to}`).toContain(e.to);
      expect(ALLOWED[layerOf(e.from)] ?? [], `${e.from} → ${e.to}`).not.toContain(layerOf(e.to));
    }
  });

  it('the configuration does not load the HTTP client, and no two modules import each other round a circle', () => {
    // None of the configuration's files loads the client or what sits above the configuration.
    for (const file of CONFIG_FILES()) {
      expect(importsOf(file), file).not.toContain(HTTP_CLIENT);
      expect(
        importsOf(file).filter((target) => ABOVE_CONFIG.some((folder) => target.startsWith(folder))),
        file,
      ).toEqual([]);
    }
    const edges = graph();
    // Transitively too.
    expect([...closure(edges, CONFIG_ENTRY)]).not.toContain(HTTP_CLIENT);
    const files = [...sourceFiles('src'), ...sourceFiles('connectors')];
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
    for (const edge of SEEN_EDGES) expect(seen, edge).toContain(edge);
  });

  it('the check sees every kind of import: type-only, re-export, import() (some of ours load only that way)', () => {
    const text = [
      "import type { A } from './a.js';",
      "import { b } from './b.js';",
      "export { c } from './c.js';",
      "export * from './d.js';",
      "const e = await import('./e.js');",
      "type F = typeof import('./f.js');",
      "import { readFileSync } from 'node:fs';",
    ].join('\n');
    expect(specifiers(text)).toEqual([
      { spec: './a.js', dynamic: false },
      { spec: './b.js', dynamic: false },
      { spec: './c.js', dynamic: false },
      { spec: './d.js', dynamic: false },
      { spec: './e.js', dynamic: true },
      { spec: './f.js', dynamic: false },
    ]);
    const lazy = SCANNED.flatMap(sourceFiles).filter((f) => specifiersOf(f).some((s) => s.dynamic));
    expect(lazy.length, 'files that load a module with import()').toBeGreaterThan(0);
  });

  it('the check follows imports through other layers', () => {
    const edges: Graph = new Map([
      ['src/state/a.ts', ['src/state/b.ts']],
      ['src/state/b.ts', ['src/core/c.ts']],
      ['src/core/c.ts', ['src/core/d.ts']],
      ['src/core/d.ts', ['src/sync/e.ts']],
      ['src/sync/e.ts', ['src/core/leaf.ts']],
      ['src/core/leaf.ts', []],
    ]);
    expect(violations(edges)).toEqual([
      'src/state/a.ts → src/state/b.ts → src/core/c.ts → src/core/d.ts → src/sync/e.ts (src/state may import src/core, src/state/leases)',
      'src/state/b.ts → src/core/c.ts → src/core/d.ts → src/sync/e.ts (src/state may import src/core, src/state/leases)',
      'src/core/c.ts → src/core/d.ts → src/sync/e.ts (src/core may import nothing of ours)',
      'src/core/d.ts → src/sync/e.ts (src/core may import nothing of ours)',
    ]);
    expect(violations(new Map([['src/newthing/x.ts', []]]))).toEqual([
      'src/newthing/x.ts belongs to no layer (src/newthing): give it a rule in ALLOWED',
    ]);
  });
});
