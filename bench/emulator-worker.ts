/**
 * The emulator on its own thread (own event loop), so in a benchmark the server's rate windows see
 * arrivals as a separate server would, not stalls of the client's event loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { RESOURCES } from '../connectors/index.js';
import { cursorMillis } from '../src/normalize/normalize.js';
import { startEmulator, type EmulatorOptions } from '../src/emulator/index.js';

export type WorkerRequest =
  | { readonly id: number; readonly op: 'stats' | 'resetStats' | 'close' }
  | { readonly id: number; readonly op: 'counts'; readonly beforeMs: number };

const emu = await startEmulator(workerData as EmulatorOptions);
const port = parentPort;
if (port === null) throw new Error('run as a worker');
port.postMessage({ ready: true, url: emu.url, apiKey: emu.apiKey });
port.on('message', async (req: WorkerRequest) => {
  switch (req.op) {
    case 'stats':
      return port.postMessage({ id: req.id, value: emu.stats() });
    case 'resetStats':
      emu.resetStats();
      return port.postMessage({ id: req.id, value: null });
    case 'counts': {
      const counts: Record<string, number> = {};
      for (const r of RESOURCES) counts[r.name] = emu.snapshot(r.name).filter((rec) => (cursorMillis(r, rec) ?? 0) < req.beforeMs).length;
      return port.postMessage({ id: req.id, value: counts });
    }
    case 'close':
      await emu.close();
      port.postMessage({ id: req.id, value: null });
      return port.close();
  }
});
