import { workerData } from 'node:worker_threads';
import { startEmulator, type EmulatorOptions } from './index.js';
import type { ApiRecord } from './types.js';
import { serveOnPort } from './worker-port.js';

/** Worker side of `thread.ts`: serves the emulator and answers its messages (`worker-port.ts`). */

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

const emu = await startEmulator(workerData as EmulatorOptions);
serveOnPort(
  'worker.js',
  { url: emu.url, apiKey: emu.apiKey, writeKey: emu.writeKey, flavor: emu.flavor, projectHeader: emu.projectHeader },
  {
    stats: () => emu.stats(),
    resetStats: () => emu.resetStats(),
    close: () => emu.close(),
    other: (req) => {
      // Records carry bigints, which cross threads fine (structured clone).
      if (req.op === 'addEvents') return Promise.resolve(emu.addEvents(String(req.project), Number(req.count)));
      if (req.op !== 'counts') return undefined;
      const counts: Record<string, number> = {};
      for (const [name, timeOf] of Object.entries(COUNTED_BY)) {
        counts[name] = emu.snapshot(name).filter((rec) => (timeOf(rec) ?? 0) < Number(req.beforeMs)).length;
      }
      return Promise.resolve(counts);
    },
  },
);
