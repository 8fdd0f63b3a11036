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
 * When to SIGKILL the child, on what it does (never after a time, so every kill lands mid-run however
 * slow the machine is at starting Node and DuckDB): once it holds its lease and has said so in its
 * owner record (before anything is stored), or on the `requests`-th request the API receives after its `checkpoints`-th checkpoint
 * reached the state file (0: at that checkpoint), so the kills land at varied points of a batch.
 */
type KillPolicy = { readonly lease: true } | { readonly checkpoints: number; readonly requests: number };

/** Requests the emulator receives, told to the run that waits for them (`runCli`). */
const requestListeners = new Set<() => void>();

/** Run the real CLI in a child process; SIGKILL it as `kill` says, if given. */
function runCli(emu: Emulator, dir: string, kill?: KillPolicy): Promise<ChildRun> {
  const statePath = statePathOf(dir);
  // The lease's owner record: written once the run holds its lease (a kill before it leaves a lease
  // only its expiry frees, 30 s later: `state/leases/file.ts`).
  const leaseOwner = `${statePath}.sync.lock.owner.json`;
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
  let onRequest: (() => void) | undefined;
  const killNow = (): void => void child.kill('SIGKILL');
  // The state file and the lease are watched by looking every 10 ms (a rename into place is not
  // always reported by fs.watch); what is waited for is what the run did, not a time.
  if (kill && 'lease' in kill) {
    const poll = setInterval(() => {
      if (!existsSync(leaseOwner)) return;
      clearInterval(poll);
      killNow();
    }, 10);
    timers.push(poll);
  }
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
      if (kill.requests === 0) return killNow();
      let requests = 0;
      onRequest = () => {
        requests += 1;
        if (requests === kill.requests) killNow();
      };
      requestListeners.add(onRequest);
    }, 10);
    timers.push(poll);
  }
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      for (const t of timers) clearTimeout(t);
      if (onRequest !== undefined) requestListeners.delete(onRequest);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

describe('kill -9 and resume (the real CLI in a child process)', () => {
  it('five SIGKILLs mid-sync, then a final sync: every table equals the API, no row lost or duplicated', async () => {
    expect(existsSync(CLI), `build first (npm test runs tsc): ${CLI}`).toBe(true);
    // The documented limits make the first sync take several seconds, so the kills land mid-walk
    // (1,500 events a project: all five runs were killed, and the final run reads half as much).
    const emu = await startEmulator({
      seed: 21,
      eventsPerProject: 1500,
      limits: { ...SPEC_RATE_LIMITS },
      onRequest: () => {
        for (const listener of requestListeners) listener();
      },
    });
    cleanups.push(() => emu.close());
    const d = tempDir();
    cleanups.push(d.cleanup);

    // One kill before anything is stored, then kills a few checkpoints in, at varied offsets.
    const kills: KillPolicy[] = [
      { lease: true },
      { checkpoints: 1, requests: 0 },
      { checkpoints: 3, requests: 2 },
      { checkpoints: 2, requests: 1 },
      { checkpoints: 4, requests: 3 },
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
    expect(killed).toBe(kills.length); // every run was really killed mid-sync
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
