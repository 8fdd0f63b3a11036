import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { Emulator } from '../../emulator/index.js';

/** The built CLI as users run it, the package's `bin` (`npm run build` first; `npm test` does). */
export const CLI = join(process.cwd(), 'dist', 'bin', 'cli.js');

export interface ChildRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface CliOptions {
  /** Poll this every 50 ms while the child runs; SIGKILL the child once it returns true. */
  readonly killWhen?: () => boolean | Promise<boolean>;
  /**
   * SIGKILL after this long whatever happens: a net for a hung child, not a bound on a run (a run of
   * a few seconds on an idle machine can take a minute when other jobs share its two cores). @default 150_000
   */
  readonly timeoutMs?: number;
  /** Called with every stderr chunk as it arrives. */
  readonly onStderr?: (text: string) => void;
  /** Close the reading end of stdout at once, as `query-sync … | head` does once it has its lines. */
  readonly closeStdout?: boolean;
}

/** Run the real CLI in a child process against an emulator (stdout and stderr are pipes: no TTY). */
export function runCli(
  emu: Pick<Emulator, 'url' | 'apiKey'>,
  args: readonly string[],
  options: CliOptions = {},
): Promise<ChildRun> {
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { ...process.env, QUERY_API_BASE_URL: emu.url, QUERY_API_KEY: emu.apiKey },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  if (options.closeStdout === true) child.stdout.destroy();
  else child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
  child.stderr.on('data', (b: Buffer) => {
    stderr += b.toString();
    options.onStderr?.(b.toString());
  });
  let exited = false;
  const timeout = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 150_000);
  const killWhen = options.killWhen;
  const poll =
    killWhen === undefined
      ? undefined
      : setInterval(() => {
          void Promise.resolve(killWhen()).then((kill) => {
            if (kill && !exited) child.kill('SIGKILL');
          });
        }, 50);
  return new Promise((resolve) => {
    child.on('exit', () => {
      exited = true;
    });
    // `close`: the process exited and its pipes are drained.
    child.on('close', (code, signal) => {
      exited = true;
      clearTimeout(timeout);
      if (poll !== undefined) clearInterval(poll);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Parse the JSON log lines of a child's stderr (non-JSON lines are skipped). */
export function jsonLines(text: string): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // a line cut by a kill
    }
  }
  return out;
}
