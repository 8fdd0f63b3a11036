import { spawn, spawnSync } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { onCleanup } from './lifecycle.js';

/**
 * The real monitoring endpoints a run talks to, on loopback: Debian's Prometheus Pushgateway (a
 * child process on a free port, killed after the test) and an HTTP receiver that records what it is
 * sent (pings, webhooks) and answers 200, 500, or never. `.ci/run` installs the Pushgateway and
 * promtool (`prometheus-pushgateway`, `prometheus`) when they are missing.
 */

/** A free port on 127.0.0.1 (asked of the kernel, then released for the child to bind). */
async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export interface Pushgateway {
  readonly url: string;
  /** Its `/metrics` as Prometheus would scrape it. */
  metrics(): Promise<string>;
}

/** The real Pushgateway on 127.0.0.1 (never 0.0.0.0), ready once it says it listens. */
export async function startPushgateway(): Promise<Pushgateway> {
  const port = await freePort();
  const child = spawn('prometheus-pushgateway', [`--web.listen-address=127.0.0.1:${port}`], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  onCleanup(
    () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      }),
  );
  await new Promise<void>((resolve, reject) => {
    let said = '';
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`prometheus-pushgateway exited (${code}): ${said}`)));
    child.stderr.on('data', (b: Buffer) => {
      said += b.toString();
      if (/Listening on/.test(said)) resolve();
    });
  });
  const url = `http://127.0.0.1:${port}`;
  return { url, metrics: async () => (await fetch(`${url}/metrics`)).text() };
}

/** One sample's value in an exposition text: the line with `name` and every one of `labels`. */
export function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$/.exec(line);
    if (m === null || m[1] !== name) continue;
    const found = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(m[3]);
  }
  return undefined;
}

/** `promtool check metrics` on a text: its exit code and what it said. */
export function promtoolCheckMetrics(text: string): { readonly code: number | null; readonly output: string } {
  const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  return { code: r.status, output: `${r.stdout}${r.stderr}` };
}

export interface Received {
  readonly method: string;
  /** Path and query. */
  readonly url: string;
  readonly body: string;
}

export type Answer = 'ok' | '500' | 'never';

/** A local HTTP endpoint that records each request whole before it answers. */
export async function startReceiver(answer: Answer = 'ok'): Promise<{ url: string; received: Received[] }> {
  const received: Received[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (b: Buffer) => (body += b.toString()));
    req.on('end', () => {
      received.push({ method: req.method ?? '', url: req.url ?? '', body });
      if (answer === 'never') return;
      res.writeHead(answer === 'ok' ? 200 : 500, { 'content-type': 'text/plain' });
      res.end(answer === 'ok' ? 'OK' : 'down for maintenance');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
}

/** A URL nothing listens at (a port just released). */
export async function downUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`;
}
