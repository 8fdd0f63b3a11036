import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parentPort, workerData } from 'node:worker_threads';
import { startEmulator, type EmulatorOptions } from './index.js';
import type { ApiRecord } from './types.js';

/** Worker side of `thread.ts`: serves the emulator and answers its messages. */
type Request =
  | { readonly id: number; readonly op: 'stats' | 'resetStats' | 'close' | 'loopDelay' }
  | { readonly id: number; readonly op: 'counts'; readonly beforeMs: number }
  | { readonly id: number; readonly op: 'addEvents'; readonly project: string; readonly count: number };

/**
 * The time each resource's records are counted by in `counts` (ms), from the emulator's own record
 * shapes; resources without one (signals, signal groups) are always counted.
 */
const COUNTED_BY: Readonly<Record<string, (record: ApiRecord) => number | undefined>> = {
  events: (r) => Date.parse(String(r['timestamp'])),
  traces: (r) => (typeof r['start_time_ns'] === 'bigint' ? Number(r['start_time_ns'] / 1_000_000n) : undefined),
  signals: () => undefined,
  signal_groups: () => undefined,
  users: (r) => Date.parse(String(r['last_seen'])),
  conversations: (r) => Date.parse(String(r['last_message_at'])),
};

const port = parentPort;
if (port === null) throw new Error('emulator/worker.js runs as a worker thread');
const emu = await startEmulator(workerData as EmulatorOptions);
// How late this thread's event loop ran its callbacks: a request's arrival is stamped when its
// handler runs, so a stalled loop (a starved CPU) stamps arrivals late, bunched, and its rate
// windows then count more in a second than the client sent in one.
const loopDelay = monitorEventLoopDelay({ resolution: 10 });
loopDelay.enable();
port.postMessage({ url: emu.url, apiKey: emu.apiKey, writeKey: emu.writeKey, flavor: emu.flavor, projectHeader: emu.projectHeader });
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
      loopDelay.reset();
      return null;
    case 'loopDelay':
      return { p50Ms: loopDelay.percentile(50) / 1e6, p99Ms: loopDelay.percentile(99) / 1e6, maxMs: loopDelay.max / 1e6 };
    case 'addEvents':
      // Records carry bigints, which cross threads fine (structured clone).
      return emu.addEvents(req.project, req.count);
    case 'counts': {
      const counts: Record<string, number> = {};
      for (const [name, timeOf] of Object.entries(COUNTED_BY)) {
        counts[name] = emu.snapshot(name).filter((rec) => (timeOf(rec) ?? 0) < req.beforeMs).length;
      }
      return counts;
    }
    case 'close':
      loopDelay.disable();
      await emu.close();
      return null;
  }
}
