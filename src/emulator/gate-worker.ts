import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import { startGate, type GateOptions } from './gate.js';

/** Worker side of the rate-limit gate (`gate.ts`), started by `thread.ts`. */
type Request = { readonly id: number; readonly op: 'stats' | 'resetStats' | 'close' | 'loopDelay' };

const port = parentPort;
if (port === null) throw new Error('emulator/gate-worker.js runs as a worker thread');
const gate = await startGate(workerData as GateOptions);
// How late this thread ran its callbacks: its arrival stamps are late by as much.
const loopDelay = monitorEventLoopDelay({ resolution: 10 });
loopDelay.enable();
port.postMessage({ url: gate.url });
port.on('message', (req: Request) => {
  void handle(req).then(
    (value) => port.postMessage({ id: req.id, value }),
    (error: unknown) => port.postMessage({ id: req.id, error: String((error as Error)?.message ?? error) }),
  );
});

async function handle(req: Request): Promise<unknown> {
  switch (req.op) {
    case 'stats':
      return gate.stats();
    case 'resetStats':
      gate.resetStats();
      loopDelay.reset();
      return null;
    case 'loopDelay':
      return { p50Ms: loopDelay.percentile(50) / 1e6, p99Ms: loopDelay.percentile(99) / 1e6, maxMs: loopDelay.max / 1e6 };
    case 'close':
      loopDelay.disable();
      await gate.close();
      return null;
  }
}
