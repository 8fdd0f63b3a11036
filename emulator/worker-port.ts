import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parentPort } from 'node:worker_threads';

/** A request from `thread.ts` to one of the emulator's worker threads. */
type PortRequest = { readonly id: number; readonly op: string } & Record<string, unknown>;

/** What a worker serves: stats, their reset and close, and any ops of its own. */
export interface PortServer {
  stats(): unknown;
  resetStats(): void;
  close(): Promise<void>;
  /** Ops beyond the common ones (`undefined`: not one of them). */
  other?(req: PortRequest): Promise<unknown> | undefined;
}

/**
 * The worker side of a thread of the emulator: say `hello` (its address) to the parent, then answer
 * its requests by id. Every worker also reports how late its event loop ran its callbacks: a
 * request's arrival is stamped when its handler runs, so a stalled loop (a starved CPU) stamps
 * arrivals late and bunched, and its rate windows then count more in a second than was sent in one.
 */
export function serveOnPort(name: string, hello: unknown, server: PortServer): void {
  const port = parentPort;
  if (port === null) throw new Error(`emulator/${name} runs as a worker thread`);
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const handle = async (req: PortRequest): Promise<unknown> => {
    switch (req.op) {
      case 'stats':
        return server.stats();
      case 'resetStats':
        server.resetStats();
        loopDelay.reset();
        return null;
      case 'loopDelay':
        return {
          p50Ms: loopDelay.percentile(50) / 1e6,
          p99Ms: loopDelay.percentile(99) / 1e6,
          maxMs: loopDelay.max / 1e6,
        };
      case 'close':
        loopDelay.disable();
        await server.close();
        return null;
      default: {
        const answer = server.other?.(req);
        if (answer === undefined) throw new Error(`unknown request ${req.op}`);
        return answer;
      }
    }
  };
  port.postMessage(hello);
  port.on('message', (req: PortRequest) => {
    void handle(req).then(
      (value) => port.postMessage({ id: req.id, value }),
      (error: unknown) => port.postMessage({ id: req.id, error: String((error as Error)?.message ?? error) }),
    );
  });
}
