/**
 * The rate-limit gate in front of the emulator, on a thread of its own (`gate-worker.ts`, started by
 * `thread.ts`): it stamps each request's arrival, applies the limits (the same `RateLimiter` as the
 * in-process emulator), answers 429 itself, and passes the rest to the emulator's own server, which
 * then runs with no limits.
 *
 * Why a separate thread: the emulator's thread parses, filters and serializes pages (a page of 1,000
 * traces takes 50–150 ms on a busy 2-core machine), and a request that arrives meanwhile is stamped
 * when the thread gets to it. Requests sent 25 ms apart were stamped bunched behind such a stretch:
 * 52 arrivals in one second for 40 sent in it, 429s the client did not cause. A real service's rate
 * limiter stamps at its front door, whatever its workers are busy with; so does this gate, whose
 * thread does nothing but stamp, count and copy bytes.
 *
 * Its 429s are answered at once (the emulator's latency is for pages); requests it does not count
 * (unknown paths, other methods, a missing or wrong key) pass, and the emulator answers them as before.
 */

import { Agent, createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { RateLimiter, type RateLimitOptions } from './limits.js';
import { matchRoute, SEARCH_TEMPLATE } from './routes.js';
import { sendError } from './server.js';
import { StatsRecorder, type EmulatorStats } from './stats.js';

export interface GateOptions {
  /** The emulator's own server, e.g. `http://127.0.0.1:40123`. */
  readonly target: string;
  /** The key whose requests are counted (others pass: the emulator answers them 401). */
  readonly apiKey: string;
  readonly limits: RateLimitOptions;
  /** @default 0 (ephemeral). The host is always 127.0.0.1. */
  readonly port?: number;
  readonly now?: () => number;
}

export interface Gate {
  readonly url: string;
  stats(): EmulatorStats;
  resetStats(): void;
  close(): Promise<void>;
}

export async function startGate(options: GateOptions): Promise<Gate> {
  const now = options.now ?? Date.now;
  const limiter = new RateLimiter(options.limits, SEARCH_TEMPLATE);
  const stats = new StatsRecorder();
  const target = new URL(options.target);
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const server: Server = createServer((req, res) => {
    const arrival = now();
    const template = matchRoute(new URL(req.url ?? '/', 'http://127.0.0.1').pathname)?.route.template;
    stats.received(arrival, template, req.url ?? '/');
    const key = /^\s*Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
    if (template !== undefined && req.method === 'GET' && key === options.apiKey) {
      const decision = limiter.admit(key, template, arrival);
      if (!decision.allowed) {
        stats.rateLimited();
        sendError(res, 429, 'rate_limited', `Rate limit exceeded: ${decision.reason}`, {
          'retry-after': String(decision.retryAfterSeconds),
        });
        return;
      }
      stats.accepted(arrival, template);
    }
    forward(req, res, target, agent);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('Emulator gate: no TCP address');
  return {
    url: `http://127.0.0.1:${address.port}`,
    stats: () => stats.snapshot(),
    resetStats: () => stats.reset(),
    close: async () => {
      agent.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Pass the request to the emulator and its answer back byte for byte (a cut answer stays cut, a reset stays a reset). */
function forward(req: IncomingMessage, res: ServerResponse, target: URL, agent: Agent): void {
  const upstream = request(
    { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
      answer.on('aborted', () => res.destroy());
      answer.on('error', () => res.destroy());
    },
  );
  upstream.on('error', () => res.destroy());
  res.on('close', () => {
    if (!res.writableFinished) upstream.destroy();
  });
  req.pipe(upstream);
}
