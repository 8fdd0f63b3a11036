import { DuckDBInstance } from '@duckdb/node-api';
import { RESOURCES } from '../../connectors/index.js';
import { partitionedTables } from '../../src/publish/partitions.js';
import type { Emulator, EmulatorOptions } from '../../emulator/index.js';
import { systemClock } from '../../src/core/clock.js';
import { silentLogger } from '../../src/core/log.js';
import type { Destination } from '../../src/load/destination.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { publishDuringRun } from '../../src/publish/during-run.js';
import { layoutOf, type WarehouseLayout } from '../../src/publish/layout.js';
import { dbPathOf, statePathOf } from './harness.js';
import { dir, emulator } from './lifecycle.js';

/**
 * The setup the tests that drive the real CLI against one warehouse share (publish, publish killed,
 * verify): an emulator and a temp folder, both released when the test finishes, the warehouse's
 * paths, and how to read the published copy as an analyst would.
 */

export const DAY = 86_400_000;

export const iso = (ms: number): string => new Date(ms).toISOString();

/** Midnight UTC `daysAgo` days before today. */
export function dayStart(daysAgo: number): number {
  const now = new Date();
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) - daysAgo * DAY;
}

export interface CliWarehouse {
  readonly emu: Emulator;
  /** The temp folder the warehouse and the state file are in. */
  readonly dir: string;
  /** `--duckdb-path`: the published read copy (its working file is `layout.work`). */
  readonly path: string;
  readonly layout: WarehouseLayout;
  /** `--duckdb-path` and `--state` for each CLI run. */
  readonly files: readonly string[];
}

/** An emulator with `options` and a fresh folder for the CLI's warehouse and state. */
export async function cliWarehouse(options: EmulatorOptions): Promise<CliWarehouse> {
  const emu = await emulator(options);
  const folder = dir();
  const path = dbPathOf(folder);
  return {
    emu,
    dir: folder,
    path,
    layout: layoutOf(path),
    files: ['--duckdb-path', path, '--state', statePathOf(folder)],
  };
}

/** The published copy's publish number and its events count, read in a fresh read-only instance. */
export async function readPublished(path: string): Promise<{ readonly publish: number; readonly events: number }> {
  const instance = await DuckDBInstance.create(path, { access_mode: 'READ_ONLY' });
  try {
    const c = await instance.connect();
    const one = async (sql: string): Promise<number> => Number((await c.runAndReadAll(sql)).getRows()[0]?.[0]);
    const read = {
      publish: await one('SELECT publish FROM _query_sync_published'),
      events: await one('SELECT count(*) FROM events'),
    };
    c.closeSync();
    return read;
  } finally {
    instance.closeSync();
  }
}

/**
 * A harness run's destination laid out as the CLI lays out `--duckdb-path dbPathOf(dir)`: rows and
 * state in the working file, and the published copy written when the run closes (as a CLI run
 * publishes at its end). For a step before the thing under test (seeding a warehouse that CLI runs
 * then read or write): in-process, it costs no CLI start-up, and the CLI then finds the layout it
 * wrote itself (no take-over of an old-layout file). The harness opens the state as the CLI does.
 */
export function asTheCliLaysItOut(folder: string): () => Promise<Destination> {
  return async () => {
    const path = dbPathOf(folder);
    const work = await DuckDbDestination.open(layoutOf(path).work);
    const publishing = publishDuringRun(work, {
      path,
      everyMs: 0,
      clock: systemClock,
      logger: silentLogger(),
      partitioned: partitionedTables(RESOURCES),
    });
    const close = async (): Promise<void> => {
      try {
        if ((await publishing.finish()) === undefined)
          throw new Error(
            `the harness run could not publish ${path}: expected the published copy a CLI run writes at its end`,
          );
      } finally {
        await work.close();
      }
    };
    // Everything but `close` is the tracked destination (it tells the publisher what each write touched).
    return new Proxy(publishing.destination, {
      get: (target, prop, receiver) => (prop === 'close' ? close : (Reflect.get(target, prop, receiver) as unknown)),
    });
  };
}
