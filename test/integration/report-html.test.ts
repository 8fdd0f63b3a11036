import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runOn } from '../../src/publish/sql.js';
import { syncCommand } from '../../src/cli/commands/sync.js';
import { resolveSyncConfig } from '../../src/config/index.js';
import { EXIT_CODES } from '../../src/core/exit-codes.js';
import { runCli } from '../fakes/cli.js';
import { cliWarehouse } from '../fakes/cli-warehouse.js';
import { statePathOf } from '../fakes/harness.js';
import { onCleanup } from '../fakes/lifecycle.js';

/**
 * `report --html` (docs/report.md) rendered in a real headless browser: Debian's Chromium, which
 * `.ci/run` installs when it is missing. The page must draw, with one mark per figure of the run
 * history, counted in the DOM the browser laid out; a screenshot is kept in `.tmp/artifacts/`.
 */

const CHROMIUM = '/usr/bin/chromium';
const SCREENSHOT = join(process.cwd(), '.tmp', 'artifacts', 'report.png');

/** Chromium headless, isolated: no network of its own, a fresh profile removed after. */
function chromium(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const profile = mkdtempSync(join(tmpdir(), 'qs-chromium-'));
  onCleanup(() => rmSync(profile, { recursive: true, force: true }));
  const child = spawn(
    CHROMIUM,
    [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-dev-shm-usage',
      '--hide-scrollbars',
      `--user-data-dir=${profile}`,
      ...args,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, DBUS_SESSION_BUS_ADDRESS: 'disabled:' } },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const net = setTimeout(() => child.kill('SIGKILL'), 120_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(net);
      resolve({ code, stdout, stderr });
    }),
  );
}

async function sync(
  emu: { url: string; apiKey: string },
  apiKey: string,
  dir: string,
  path: string,
): Promise<{ code: number; out: string }> {
  const lines: string[] = [];
  const config = resolveSyncConfig(
    {
      baseUrl: emu.url,
      apiKey,
      project: '*',
      resources: 'events,traces,signals,users',
      quiet: true,
      duckdbPath: path,
      state: statePathOf(dir),
    },
    {},
  );
  const code = await syncCommand(config, { print: (line) => void lines.push(line) });
  return { code, out: lines.join('\n') };
}

describe('report --html', () => {
  it('draws the run history in headless Chromium: a mark per figure, counted against _query_sync_runs', async () => {
    expect(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install chromium (.ci/run does)`).toBe(true);
    const w = await cliWarehouse({ flavor: 'real', seed: 81, eventsPerProject: 15, projects: ['alpha', 'beta'] });
    // A history: a first sync, one that fails (a refused key), then one after new events.
    expect((await sync(w.emu, w.emu.apiKey, w.dir, w.path)).code).toBe(0);
    const refused = await sync(w.emu, 'qs_org_not_the_key', w.dir, w.path);
    expect(refused.code, refused.out).toBe(EXIT_CODES.authentication);
    w.emu.addEvents('alpha', 12);
    w.emu.addEvents('beta', 5);
    expect((await sync(w.emu, w.emu.apiKey, w.dir, w.path)).code).toBe(0);

    const html = join(w.dir, 'out', 'report.html');
    const run = await runCli(w.emu, ['report', '--html', html, '--duckdb-path', w.path]);
    expect(run.code, run.stdout + run.stderr).toBe(EXIT_CODES.ok);
    expect(run.stdout).toMatch(/^report: .*report\.html \(3 runs of 3, \d+ schema changes\)/);
    const page = readFileSync(html, 'utf8');
    // Self-contained: nothing fetched when viewed.
    expect(page).not.toMatch(/<script[^>]+src=|<link[^>]+href=|https?:\/\/(?!www\.w3\.org)/);

    // What each chart must show, from the run history itself.
    const history = await runOn(
      w.path,
      'SELECT outcome, streams, reconcile, backlog FROM _query_sync_runs ORDER BY started_at',
    );
    const runs = history.rows.map(([outcome, streams, reconcile, backlog]) => ({
      outcome: String(outcome),
      streams: JSON.parse(String(streams)) as { resource: string; outcome: string; rows: number }[],
      reconcile:
        reconcile === null ? undefined : (JSON.parse(String(reconcile)) as { checked: number; differed: number }),
      backlog: backlog === null ? [] : (JSON.parse(String(backlog)) as unknown[]),
    }));
    expect(runs.map((r) => r.outcome)).toEqual(['ok', 'failed', 'ok']);
    const resources = (r: (typeof runs)[number], f: (s: { rows: number; outcome: string }) => boolean): number =>
      new Set(r.streams.filter(f).map((s) => s.resource)).size;
    const expected = {
      // One bar per run and resource that wrote rows.
      rows: runs.reduce((n, r) => n + resources(r, (s) => s.rows > 0), 0),
      // One point per run and resource once a run has read it whole (the failed run's lag is drawn too).
      lag: runs.reduce((n, r) => n + resources(r, () => true), 0),
      backlog: runs.reduce((n, r) => n + r.backlog.length, 0),
      reconcile: runs.filter((r) => r.reconcile !== undefined && r.reconcile.checked - r.reconcile.differed > 0).length,
    };
    expect(expected.rows).toBeGreaterThanOrEqual(6);
    // Once the server is known to read traces one event at a time (kept in state by a run), each run records the backlog.
    expect(runs.at(-1)?.backlog).toHaveLength(1);

    const artifacts = join(process.cwd(), '.tmp', 'artifacts');
    mkdirSync(artifacts, { recursive: true });
    const url = pathToFileURL(html).href;
    const [dom, shot] = await Promise.all([
      chromium(['--dump-dom', url]),
      chromium(['--window-size=1200,3000', `--screenshot=${SCREENSHOT}`, url]),
    ]);
    expect(dom.code, dom.stderr.slice(-2000)).toBe(0);
    const rendered = /data-rendered="([^"]*)"/.exec(dom.stdout)?.[1];
    expect(rendered, 'the page ran its layout check').toBeDefined();
    const marks = JSON.parse((rendered ?? '{}').replaceAll('&quot;', '"')) as Record<string, number>;
    expect(marks).toMatchObject(expected);
    // The requests chart: a bar per run that sent requests and a tick of what the limit allowed.
    expect(marks.requests).toBe(2 * runs.length);
    expect(shot.code, shot.stderr.slice(-2000)).toBe(0);
    expect(statSync(SCREENSHOT).size).toBeGreaterThan(20_000);
  });
});
