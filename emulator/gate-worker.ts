import { workerData } from 'node:worker_threads';
import { startGate, type GateOptions } from './gate.js';
import { serveOnPort } from './worker-port.js';

/** Worker side of the rate-limit gate (`gate.ts`), started by `thread.ts`. */
const gate = await startGate(workerData as GateOptions);
serveOnPort('gate-worker.js', { url: gate.url }, gate);
