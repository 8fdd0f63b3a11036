import { DuckDBInstance } from '@duckdb/node-api';
import type { Emulator, EmulatorOptions } from '../../emulator/index.js';
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
  return { emu, dir: folder, path, layout: layoutOf(path), files: ['--duckdb-path', path, '--state', statePathOf(folder)] };
}

/** The published copy's publish number and its events count, read in a fresh read-only instance. */
export async function readPublished(path: string): Promise<{ readonly publish: number; readonly events: number }> {
  const instance = await DuckDBInstance.create(path, { access_mode: 'READ_ONLY' });
  try {
    const c = await instance.connect();
    const one = async (sql: string): Promise<number> => Number((await c.runAndReadAll(sql)).getRows()[0]?.[0]);
    const read = { publish: await one('SELECT publish FROM _query_sync_published'), events: await one('SELECT count(*) FROM events') };
    c.closeSync();
    return read;
  } finally {
    instance.closeSync();
  }
}
