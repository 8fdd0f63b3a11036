import { Worker } from 'node:worker_threads';
import type { ApiRecord } from './types.js';
import type { EmulatorOptions, EmulatorStats } from './index.js';

/**
 * The emulator on its own thread, with its own event loop, so its rate windows see arrivals as a
 * separate server would — not the stalls of the syncing process's event loop (which, in one thread,
 * compress a burst of requests into the same instant). Used by the demo and the benchmarks.
 */
export interface EmulatorThread {
  readonly url: string;
  readonly apiKey: string;
  addEvents(project: string, count: number): Promise<number>;
  /** Records of each resource whose cursor value is before `beforeMs`, per resource. */
  counts(beforeMs: number): Promise<Record<string, number>>;
  stats(): Promise<EmulatorStats>;
  resetStats(): Promise<void>;
  close(): Promise<void>;
}

export async function startEmulatorThread(options: EmulatorOptions): Promise<EmulatorThread> {
  const worker = new Worker(new URL('./worker.js', import.meta.url), { workerData: options });
  const ready = await new Promise<{ url: string; apiKey: string }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  let next = 0;
  const call = <T>(op: string, extra: object = {}): Promise<T> => {
    const id = (next += 1);
    return new Promise<T>((resolve, reject) => {
      const onMessage = (msg: { id?: number; value?: T; error?: string }): void => {
        if (msg.id !== id) return;
        worker.off('message', onMessage);
        if (msg.error !== undefined) reject(new Error(msg.error));
        else resolve(msg.value as T);
      };
      worker.on('message', onMessage);
      worker.postMessage({ id, op, ...extra });
    });
  };
  return {
    url: ready.url,
    apiKey: ready.apiKey,
    addEvents: (project, count) => call<ApiRecord[]>('addEvents', { project, count }).then((added) => added.length),
    counts: (beforeMs) => call<Record<string, number>>('counts', { beforeMs }),
    stats: () => call<EmulatorStats>('stats'),
    resetStats: () => call<void>('resetStats'),
    close: async () => {
      await call<void>('close');
      await worker.terminate();
    },
  };
}
