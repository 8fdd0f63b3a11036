import { existsSync } from 'node:fs';
import type { ResetConfig } from '../config.js';
import { systemClock } from '../core/clock.js';
import { silentLogger } from '../core/log.js';
import type { Destination } from '../load/destination.js';
import { StateStore, type StreamState } from '../state/store.js';
import { openDestination } from './open-destination.js';
import { workingPathForReading } from '../publish/layout.js';
import { DuckDbDestination } from '../load/duckdb.js';
import { Publisher } from '../publish/publisher.js';
import { keepStateIn, readStateDocument } from './state-home.js';

/**
 * `query-sync reset`'s work, without its questions: which streams of the state match
 * `--resources`/`--project`, and forgetting their marks and checkpoints under the `sync` lease.
 */

/** The keys of the state's streams that `--resources` and `--project` name (state read without a lock). */
export async function streamsToReset(config: ResetConfig): Promise<string[]> {
  const doc = await readStateDocument(config, silentLogger(), {});
  return Object.keys(doc.streams).filter((key) => matches(key, config));
}

/**
 * Forget the marks and checkpoints of `keys`, where the state lives (the warehouse, and the file,
 * its copy), under the `sync` lease, then publish the DuckDB read copy: returns the publish's line.
 */
export async function resetStreams(config: ResetConfig, keys: readonly string[]): Promise<string | undefined> {
  // The state lives in the warehouse: forget there (and in the file, its copy), under the sync
  // lease (in the dataset for BigQuery, beside the state file otherwise: taken first there).
  const lease = { clock: systemClock, purpose: 'sync', lockWaitMs: config.lockWaitMs };
  let state: StateStore | undefined;
  let destination: Destination | undefined;
  let publishedLine: string | undefined;
  try {
    if (config.destination === 'bigquery') {
      destination = await openDestination(config, silentLogger(), () => undefined);
      const { leases } = destination.can;
      state = await StateStore.open(config.statePath, { ...lease, ...(leases === undefined ? {} : { leases }) });
    } else {
      state = await StateStore.open(config.statePath, lease);
      // No warehouse file yet: the state file is all there is (reset never creates a warehouse).
      if (existsSync(workingPathForReading(config.duckdbPath))) destination = await openDestination(config, silentLogger(), () => undefined);
    }
    if (destination !== undefined) await keepStateIn(state, destination);
    for (const key of keys) await state.updateStream(key, forget);
    if (destination instanceof DuckDbDestination && !config.dryRun && config.duckdbPath !== ':memory:') publishedLine = await publishAfterReset(config.duckdbPath, destination);
  } finally {
    await destination?.close().catch(() => undefined);
    await state?.close();
  }
  return publishedLine;
}

/**
 * Publish the read copy at the reset's end, as a sync does at its end: readers' `_query_sync_published`
 * and the manifest follow the working file (its rows are unchanged, so only what a publish always
 * rewrites, or what an earlier failed publish left, is written). A publish that fails only warns: the reset itself is done.
 */
async function publishAfterReset(path: string, destination: DuckDbDestination): Promise<string> {
  try {
    const result = await new Publisher(path, destination, systemClock).publish(true);
    return `reset: published ${path} (publish ${result.publish}, ${result.rewritten} partition file(s) rewritten)`;
  } catch (error) {
    return `reset: warning: ${(error as Error).message}`;
  }
}

/** Keep the record of the last run (for `status`); drop the mark and any checkpoint. */
function forget(s: StreamState): StreamState {
  return s.lastRun === undefined ? {} : { lastRun: s.lastRun };
}

/** Stream keys are `<resource>:<scope>`; `*` covers the narrowed `*[a,b]` scopes too. */
function matches(key: string, config: ResetConfig): boolean {
  const colon = key.indexOf(':');
  const resource = key.slice(0, colon);
  const scope = key.slice(colon + 1);
  if (!config.resources.some((r) => r.name === resource)) return false;
  if (config.project === undefined) return true;
  if (config.project === '*') return scope === '*' || scope.startsWith('*[');
  return scope === config.project;
}
