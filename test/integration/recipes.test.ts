import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { startEmulator, type Emulator } from '../../emulator/index.js';
import { CLI } from '../fakes/cli.js';
import { tempDir } from '../fakes/tmp.js';

/**
 * The deployment recipes of docs/scheduling.md (with the config file of docs/configuration.md), run
 * for real as far as this machine allows (no Docker, no Kubernetes).
 */

const DOCS = ['scheduling.md', 'configuration.md']
  .map((f) => readFileSync(join(process.cwd(), 'docs', f), 'utf8'))
  .join('\n');
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function recipe(name: string): string {
  const m = new RegExp(`<!-- recipe: ${name} -->\\n\`\`\`\\w*\\n([\\s\\S]*?)\`\`\``).exec(DOCS);
  expect(m, `docs recipe ${name}`).not.toBeNull();
  return m?.[1] ?? '';
}

async function setup(): Promise<{ emu: Emulator; root: string; shim: string }> {
  const emu = await startEmulator({ seed: 51, eventsPerProject: 60, limits: false });
  cleanups.push(() => emu.close());
  const d = tempDir();
  cleanups.push(d.cleanup);
  // `query-sync` as installed: a command on a path, running the built CLI.
  const shim = join(d.dir, 'bin', 'query-sync');
  mkdirSync(join(d.dir, 'bin'));
  writeFileSync(shim, `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
  chmodSync(shim, 0o755);
  return { emu, root: d.dir, shim };
}

/** Run a command (async: the emulator answers from this process). */
function run(
  command: string,
  args: readonly string[],
  options: { cwd: string; env: Record<string, string> },
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    }),
  );
}

/** A bare environment, as cron and containers give (no QUERY_* from the test's own). */
const bareEnv = (extra: Record<string, string>): Record<string, string> => ({
  PATH: '/usr/bin:/bin',
  HOME: '/tmp',
  ...extra,
});

describe("the docs' recipes", () => {
  it('the crontab line, with the config file of the Configuration section, syncs into the absolute paths it names', async () => {
    const { emu, root, shim } = await setup();
    const sub = (text: string): string =>
      text
        .replaceAll('/usr/local/bin/query-sync', shim)
        .replaceAll('/etc/query-sync', join(root, 'etc'))
        .replaceAll('/var/lib/query-sync', join(root, 'var'))
        .replaceAll('/var/log/query-sync.log', join(root, 'query-sync.log'))
        .replaceAll('https://query.example.com', emu.url);
    mkdirSync(join(root, 'etc'));
    writeFileSync(join(root, 'etc', 'query-sync.yaml'), sub(recipe('config-file')));
    writeFileSync(join(root, 'etc', 'api-key'), `${emu.apiKey}\n`);
    const line = recipe('crontab')
      .split('\n')
      .find((l) => l.trim() !== '' && !l.startsWith('#'));
    const fields = (line ?? '').trim().split(/\s+/);
    expect(
      fields.slice(0, 5).every((f) => /^[\d*/,-]+$/.test(f)),
      'five schedule fields',
    ).toBe(true);
    const command = sub(fields.slice(5).join(' '));
    // cron runs the line with sh, from the user's home, with a bare environment.
    const result = await run('sh', ['-c', command], { cwd: '/tmp', env: bareEnv({}) });
    const log = readFileSync(join(root, 'query-sync.log'), 'utf8');
    expect(result.status, log).toBe(0);
    expect(log).toMatch(/sync ok in/);
    expect(existsSync(join(root, 'var', 'warehouse.duckdb'))).toBe(true);
    expect(existsSync(join(root, 'var', 'state', 'state.json'))).toBe(true);
    expect(log).not.toContain(emu.apiKey);
  });

  it('the Kubernetes CronJob: Forbid, a grace period over the stop bound, the key from a secret file, a volume at /data; its args sync', async () => {
    const { emu, root, shim } = await setup();
    const job = parseYaml(recipe('cronjob')) as CronJob;
    expect(job.kind).toBe('CronJob');
    expect(job.spec.concurrencyPolicy).toBe('Forbid');
    const pod = job.spec.jobTemplate.spec.template.spec;
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(10);
    const container = pod.containers[0] as Container;
    const env = Object.fromEntries(container.env.map((e) => [e.name, e.value]));
    const secretMount = container.volumeMounts.find(
      (m) => pod.volumes.find((v) => v.name === m.name)?.secret !== undefined,
    );
    expect(env.QUERY_SYNC_API_KEY_FILE?.startsWith(`${secretMount?.mountPath}/`)).toBe(true);
    expect(env.QUERY_SYNC_API_KEY).toBeUndefined();
    const dataMount = container.volumeMounts.find(
      (m) => pod.volumes.find((v) => v.name === m.name)?.persistentVolumeClaim !== undefined,
    );
    expect(dataMount?.mountPath).toBe('/data');

    // The image's own environment (Dockerfile ENV) puts the warehouse and state on /data.
    const imageEnv = Object.fromEntries(
      [...readFileSync(join(process.cwd(), 'Dockerfile'), 'utf8').matchAll(/(QUERY_SYNC_[A-Z_]+)=(\S+)/g)].map((m) => [
        m[1],
        m[2],
      ]),
    );
    expect(imageEnv).toMatchObject({
      QUERY_SYNC_DUCKDB_PATH: '/data/warehouse.duckdb',
      QUERY_SYNC_STATE: '/data/state/state.json',
    });
    const sub = (text: string): string =>
      text
        .replaceAll('/data', join(root, 'data'))
        .replaceAll(secretMount?.mountPath ?? '', join(root, 'secret'))
        .replaceAll('https://query.example.com', emu.url);
    mkdirSync(join(root, 'data'));
    mkdirSync(join(root, 'secret'));
    writeFileSync(sub(env.QUERY_SYNC_API_KEY_FILE ?? ''), emu.apiKey);
    const allEnv = Object.fromEntries(Object.entries({ ...imageEnv, ...env }).map(([k, v]) => [k, sub(String(v))]));
    const result = await run(shim, container.args, { cwd: join(root, 'data'), env: bareEnv(allEnv) });
    expect(result.status, result.stdout + result.stderr).toBe(0);
    expect(existsSync(join(root, 'data', 'warehouse.duckdb'))).toBe(true);
    expect(existsSync(join(root, 'data', 'state', 'state.json'))).toBe(true);
  });

  it('the GitHub Actions workflow: a schedule, one run at a time, the data restored and saved; its sync step syncs', async () => {
    const { emu, root } = await setup();
    const workflow = parseYaml(recipe('github-actions')) as Workflow;
    expect(workflow.on.schedule[0]?.cron.split(' ')).toHaveLength(5);
    expect(workflow.concurrency).toEqual({ group: 'query-sync', 'cancel-in-progress': false });
    const steps = workflow.jobs.sync.steps;
    const restore = steps.findIndex((s) => s.uses?.startsWith('actions/cache/restore@'));
    const sync = steps.findIndex((s) => s.name === 'sync');
    const save = steps.findIndex((s) => s.uses?.startsWith('actions/cache/save@'));
    expect(restore).toBeGreaterThan(-1);
    expect(sync).toBeGreaterThan(restore);
    expect(save).toBeGreaterThan(sync);
    expect(steps[save]?.if).toBe('always()');
    const step = steps[sync] as Step;
    const env = Object.fromEntries(
      Object.entries(step.env ?? {}).map(([k, v]) => [
        k,
        // biome-ignore lint/suspicious/noTemplateCurlyInString: GitHub Actions expressions, read from the workflow file
        v.replace('${{ vars.QUERY_API_BASE_URL }}', emu.url).replace('${{ secrets.QUERY_API_KEY }}', emu.apiKey),
      ]),
    );
    const command = (step.run ?? '').replace('node dist/bin/cli.js', `"${process.execPath}" "${CLI}"`);
    const result = await run('sh', ['-c', command], { cwd: root, env: bareEnv(env) });
    expect(result.status, result.stdout + result.stderr).toBe(0);
    expect(existsSync(join(root, 'data', 'warehouse.duckdb'))).toBe(true);
  });
});

interface Container {
  readonly args: string[];
  readonly env: { readonly name: string; readonly value: string }[];
  readonly volumeMounts: { readonly name: string; readonly mountPath: string }[];
}
interface CronJob {
  readonly kind: string;
  readonly spec: {
    readonly concurrencyPolicy: string;
    readonly jobTemplate: {
      readonly spec: {
        readonly template: {
          readonly spec: {
            readonly terminationGracePeriodSeconds: number;
            readonly containers: Container[];
            readonly volumes: {
              readonly name: string;
              readonly secret?: unknown;
              readonly persistentVolumeClaim?: unknown;
            }[];
          };
        };
      };
    };
  };
}
interface Step {
  readonly name?: string;
  readonly uses?: string;
  readonly run?: string;
  readonly if?: string;
  readonly env?: Record<string, string>;
}
interface Workflow {
  readonly on: { readonly schedule: { readonly cron: string }[] };
  readonly concurrency: unknown;
  readonly jobs: { readonly sync: { readonly steps: Step[] } };
}
