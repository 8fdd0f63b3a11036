import { Worker } from 'node:worker_threads';
import type { ApiRecord } from './types.js';
import type { EmulatorOptions, EmulatorStats, Flavor } from './index.js';

/**
 * The emulator on its own thread, with its own event loop, so its rate windows see arrivals as a
 * separate server would — not the stalls of the syncing process's event loop (which, in one thread,
 * compress a burst of requests into the same instant). With `limits`, the limits are kept by a gate
 * on a third thread (`gate.ts`) that stamps arrivals while the emulator's thread is busy building
 * pages, as a real service's front door does. Used by the demo and the benchmarks.
 */
export interface EmulatorThread {
  readonly url: string;
  readonly apiKey: string;
  readonly writeKey: string;
  readonly flavor: Flavor;
  readonly projectHeader: string;
  addEvents(project: string, count: number): Promise<number>;
  /** Records of each resource whose cursor value is before `beforeMs`, per resource. */
  counts(beforeMs: number): Promise<Record<string, number>>;
  stats(): Promise<EmulatorStats>;
  /**
   * How late the event loops ran (ms, since the last `resetStats`): the gate's (its arrival stamps
   * are late by as much; absent without limits) and the emulator's (its answers are).
   */
  loopDelay(): Promise<{ readonly gate?: LoopDelay; readonly server: LoopDelay }>;
  resetStats(): Promise<void>;
  close(): Promise<void>;
}

export interface LoopDelay {
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export async function startEmulatorThread(options: EmulatorOptions): Promise<EmulatorThread> {
  const limits = options.limits;
  const gated = limits !== undefined && limits !== false;
  // With a gate, the gate listens on the port asked for and the emulator on an ephemeral one.
  const server = await startWorker<{
    url: string;
    apiKey: string;
    writeKey: string;
    flavor: Flavor;
    projectHeader: string;
  }>(new URL('./worker.js', import.meta.url), { ...options, limits: false, port: gated ? 0 : options.port });
  const gate = gated
    ? await startWorker<{ url: string }>(new URL('./gate-worker.js', import.meta.url), {
        target: server.ready.url,
        apiKey: server.ready.apiKey,
        limits,
        port: options.port,
      })
    : undefined;
  return {
    url: gate?.ready.url ?? server.ready.url,
    apiKey: server.ready.apiKey,
    writeKey: server.ready.writeKey,
    flavor: server.ready.flavor,
    projectHeader: server.ready.projectHeader,
    addEvents: (project, count) =>
      server.call<ApiRecord[]>('addEvents', { project, count }).then((added) => added.length),
    counts: (beforeMs) => server.call<Record<string, number>>('counts', { beforeMs }),
    stats: async () => {
      const served = await server.call<EmulatorStats>('stats');
      // Arrivals, 429s and the busiest windows are the gate's; faults are drawn by the emulator.
      return gate === undefined ? served : { ...(await gate.call<EmulatorStats>('stats')), faults: served.faults };
    },
    loopDelay: async () => ({
      gate: await gate?.call<LoopDelay>('loopDelay'),
      server: await server.call<LoopDelay>('loopDelay'),
    }),
    resetStats: async () => {
      await server.call<void>('resetStats');
      await gate?.call<void>('resetStats');
    },
    close: async () => {
      await gate?.close();
      await server.close();
    },
  };
}

interface StartedWorker<R> {
  readonly ready: R;
  call<T>(op: string, extra?: object): Promise<T>;
  close(): Promise<void>;
}

async function startWorker<R>(file: URL, workerData: unknown): Promise<StartedWorker<R>> {
  const worker = new Worker(file, { workerData });
  const ready = await new Promise<R>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  let next = 0;
  const call = <T>(op: string, extra: object = {}): Promise<T> => {
    next += 1;
    const id = next;
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
    ready,
    call,
    close: async () => {
      await call<void>('close');
      await worker.terminate();
    },
  };
}
