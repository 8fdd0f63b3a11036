import { parentPort, workerData } from 'node:worker_threads';
import { RESOURCES } from '../../connectors/index.js';
import { cursorMillis } from '../normalize/normalize.js';
import { startEmulator, type EmulatorOptions } from './index.js';

/** Worker side of `thread.ts`: serves the emulator and answers its messages. */
type Request =
  | { readonly id: number; readonly op: 'stats' | 'resetStats' | 'close' }
  | { readonly id: number; readonly op: 'counts'; readonly beforeMs: number }
  | { readonly id: number; readonly op: 'addEvents'; readonly project: string; readonly count: number };

const port = parentPort;
if (port === null) throw new Error('emulator/worker.js runs as a worker thread');
const emu = await startEmulator(workerData as EmulatorOptions);
port.postMessage({ url: emu.url, apiKey: emu.apiKey });
port.on('message', (req: Request) => {
  void handle(req).then(
    (value) => port.postMessage({ id: req.id, value }),
    (error: unknown) => port.postMessage({ id: req.id, error: String((error as Error)?.message ?? error) }),
  );
});

async function handle(req: Request): Promise<unknown> {
  switch (req.op) {
    case 'stats':
      return emu.stats();
    case 'resetStats':
      emu.resetStats();
      return null;
    case 'addEvents':
      // Records carry bigints, which cross threads fine (structured clone).
      return emu.addEvents(req.project, req.count);
    case 'counts': {
      const counts: Record<string, number> = {};
      for (const r of RESOURCES) counts[r.name] = emu.snapshot(r.name).filter((rec) => (cursorMillis(r, rec) ?? 0) < req.beforeMs).length;
      return counts;
    }
    case 'close':
      await emu.close();
      return null;
  }
}
