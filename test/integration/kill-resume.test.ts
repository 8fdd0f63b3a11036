import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { RESOURCES } from '../../connectors/index.js';
import { SPEC_RATE_LIMITS, startEmulator, type Emulator } from '../../emulator/index.js';
import { StateStore } from '../../src/state/store.js';
import type { StateDocument } from '../../src/state/document.js';
import { cursorMillis } from '../../src/normalize/normalize.js';
import type { ApiRecord, ResourceDefinition } from '../../src/core/types.js';
import { dbPathOf, expectTableMatches, readTable, statePathOf } from '../fakes/harness.js';
import { tempDir } from '../fakes/tmp.js';
import { CLI } from '../fakes/cli.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface ChildRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Whether a state file records progress: a checkpointed cursor (of a window or a sub-window) or a high-water mark. */
function hasProgress(doc: StateDocument): boolean {
  return Object.values(doc.streams).some(
    (s) =>
      s.pending?.cursor !== undefined ||
      s.mark !== undefined ||
      (s.split?.parts.some((p) => p.cursor !== undefined) ?? false),
  );
}

/**
 * When to SIGKILL the child: after a fixed time, or once it has written `checkpoints` new
 * checkpoints to the state file (plus `thenMs`), so the kill lands mid-walk however slow the
 * machine is at starting Node and DuckDB.
 */
type KillPolicy = { readonly afterMs: number } | { readonly checkpoints: number; readonly thenMs: number };

/** Run the real CLI in a child process; SIGKILL it as `kill` says, if given. */
function runCli(emu: Emulator, dir: string, kill?: KillPolicy): Promise<ChildRun> {
  const statePath = statePathOf(dir);
  const readState = (): string => (existsSync(statePath) ? readFileSync(statePath, 'utf8') : '');
  let lastState = readState();
  const child = spawn(
    process.execPath,
    // Runs to be killed write 200-row batches (checkpoints early and often); the final run, the default.
    [
      CLI,
      'sync',
      '--project',
      '*',
      '--duckdb-path',
      dbPathOf(dir),
      '--state',
      statePath,
      '--log-level',
      'warn',
      ...(kill === undefined ? [] : ['--batch-rows', '200']),
    ],
    {
      env: { ...process.env, QUERY_API_BASE_URL: emu.url, QUERY_API_KEY: emu.apiKey },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const timers: NodeJS.Timeout[] = [];
  const killNow = (): void => void child.kill('SIGKILL');
  if (kill && 'afterMs' in kill) timers.push(setTimeout(killNow, kill.afterMs));
  if (kill && 'checkpoints' in kill) {
    let seen = 0;
    const poll = setInterval(() => {
      const now = readState(); // the store renames a whole file into place, so a read is never torn
      if (now === lastState || now === '') return;
      lastState = now;
      if (!hasProgress(JSON.parse(now) as StateDocument)) return;
      seen += 1;
      if (seen < kill.checkpoints) return;
      clearInterval(poll);
      timers.push(setTimeout(killNow, kill.thenMs));
    }, 10);
    timers.push(poll);
  }
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      for (const t of timers) clearTimeout(t);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

describe('kill -9 and resume (the real CLI in a child process)', () => {
  it('five SIGKILLs mid-sync, then a final sync: every table equals the API, no row lost or duplicated', async () => {
    expect(existsSync(CLI), `build first (npm test runs tsc): ${CLI}`).toBe(true);
    // The documented limits make the first sync take several seconds, so the kills land mid-walk
    // (1,500 events a project: all five runs were killed, and the final run reads half as much).
    const emu = await startEmulator({ seed: 21, eventsPerProject: 1500, limits: { ...SPEC_RATE_LIMITS } });
    cleanups.push(() => emu.close());
    const d = tempDir();
    cleanups.push(d.cleanup);

    // One kill before anything is stored, then kills a few checkpoints in, at varied offsets.
    const kills: KillPolicy[] = [
      { afterMs: 300 },
      { checkpoints: 1, thenMs: 0 },
      { checkpoints: 3, thenMs: 150 },
      { checkpoints: 2, thenMs: 40 },
      { checkpoints: 4, thenMs: 90 },
    ];
    let killed = 0;
    let checkpointsSeen = 0;
    for (const kill of kills) {
      for (const p of ['default', 'alpha', 'beta']) emu.addEvents(p, 5);
      const run = await runCli(emu, d.dir, kill);
      if (run.signal === 'SIGKILL') killed += 1;
      if (existsSync(statePathOf(d.dir))) {
        if (hasProgress(await StateStore.read(statePathOf(d.dir)))) checkpointsSeen += 1;
      }
    }
    expect(killed).toBeGreaterThanOrEqual(3); // most runs were really killed mid-sync
    expect(checkpointsSeen).toBeGreaterThan(0); // and progress was kept between kills

    const finalStartedBefore = Date.now();
    const final = await runCli(emu, d.dir);
    expect(final.code, final.stdout + final.stderr).toBe(0);
    expect(final.stdout).toMatch(/events\s+\*\s+rows=\d+ pages=\d+ requests=\d+/);
    expect(final.stdout + final.stderr).not.toContain(emu.apiKey);
    // Compare up to an instant the final run certainly covered (a span may start after its event).
    const coveredByFinal = (resource: ResourceDefinition, r: Record<string, unknown>): boolean =>
      (cursorMillis(resource, r as ApiRecord) ?? 0) < finalStartedBefore;
    for (const resource of RESOURCES) {
      const rows = (await readTable(d.dir, resource.name)).filter((r) => coveredByFinal(resource, r));
      const expected = emu.snapshot(resource.name).filter((r) => coveredByFinal(resource, r));
      expectTableMatches(rows, expected, resource.key, resource.name);
    }
  });

  it('exits non-zero with a clear message for a bad key, without printing it', async () => {
    expect(existsSync(CLI)).toBe(true);
    const emu = await startEmulator({ seed: 2, eventsPerProject: 10 });
    cleanups.push(() => emu.close());
    const d = tempDir();
    cleanups.push(d.cleanup);
    const child = spawn(
      process.execPath,
      [CLI, 'sync', '--duckdb-path', dbPathOf(d.dir), '--state', statePathOf(d.dir), '--resources', 'events'],
      {
        env: { ...process.env, QUERY_API_BASE_URL: emu.url, QUERY_API_KEY: 'qs_secret_wrong_key_123' },
      },
    );
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(3);
    expect(out).toMatch(/API key was rejected \(401\)/);
    expect(out).not.toContain('qs_secret_wrong_key_123');
  });

  it('exits 2 with a clear message for a malformed slug, before any request', async () => {
    const child = spawn(process.execPath, [CLI, 'sync', '--base-url', 'http://127.0.0.1:9', '--project', 'Bad Slug!'], {
      env: { ...process.env, QUERY_API_KEY: 'k' },
    });
    let err = '';
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    child.stdout.on('data', (b: Buffer) => (err += b.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(2);
    expect(err).toMatch(/--project: expected a project slug.*got "Bad Slug!"/);
  });
});
