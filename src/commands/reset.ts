import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline/promises';
import type { ResetConfig } from '../config.js';
import { systemClock } from '../core/clock.js';
import { ConfigError } from '../core/errors.js';
import { EXIT_CODES, exitCodeFor } from '../core/exit-codes.js';
import { silentLogger } from '../core/log.js';
import type { Destination } from '../load/destination.js';
import { StateStore, type StreamState } from '../state/store.js';
import { openDestination } from '../app/open-destination.js';
import { workingPathForReading } from '../publish/layout.js';
import { DuckDbDestination } from '../load/duckdb.js';
import { Publisher } from '../publish/publisher.js';
import { keepStateIn, readStateDocument } from '../app/state-home.js';

export interface ResetIo {
  readonly print: (line: string) => void;
  /** Whether a person can answer a question (stdin and stdout are a terminal). */
  readonly interactive: boolean;
  /** Ask and return the answer (a terminal prompt by default). */
  readonly ask?: (question: string) => Promise<string>;
}

/**
 * `query-sync reset --resources users [--project p] [--yes]`: forget the marks and checkpoints of
 * those streams, so the next sync re-reads them from their start (`--start`, else all history).
 * Rows stay: the re-read merges on the key. Holds the `sync` lease meanwhile, so no sync runs on a
 * half-reset state. Asks for confirmation on a terminal; elsewhere `--yes` is required.
 */
export async function resetCommand(config: ResetConfig, io: ResetIo): Promise<number> {
  try {
    if (!config.resourcesGiven) {
      throw new ConfigError(
        'reset: name the streams to forget with --resources (e.g. --resources users; every resource: --resources events,traces,signals,users,conversations)',
      );
    }
    if (!config.yes && !io.interactive) {
      throw new ConfigError('reset changes the state and cannot ask for confirmation here (not a terminal): pass --yes');
    }
    const doc = await readStateDocument(config, silentLogger(), {});
    const keys = Object.keys(doc.streams).filter((key) => matches(key, config));
    const names = config.resources.map((r) => r.name).join(',');
    const scope = config.project === undefined ? 'every project scope' : `project scope ${config.project}`;
    if (keys.length === 0) {
      io.print(`reset: nothing to forget: the state (the warehouse's, or ${config.statePath} without one) has no stream of ${names} in ${scope}`);
      return EXIT_CODES.ok;
    }
    if (!config.yes) {
      const question = `Forget the marks of ${keys.length} stream${keys.length === 1 ? '' : 's'} (${keys.join(', ')}) in ${config.statePath}? The next sync re-reads them from their start. [y/N] `;
      const answer = await (io.ask ?? askOnTerminal)(question);
      if (!/^y(es)?$/i.test(answer.trim())) {
        io.print('reset cancelled: nothing changed');
        return EXIT_CODES.failed;
      }
    }
    // The state lives in the warehouse: forget there (and in the file, its copy), under the sync
    // lease (in the dataset for BigQuery, beside the state file otherwise: taken first there).
    const lease = { clock: systemClock, purpose: 'sync', lockWaitMs: config.lockWaitMs };
    let state: StateStore | undefined;
    let destination: Destination | undefined;
    let publishedLine: string | undefined;
    try {
      if (config.destination === 'bigquery') {
        destination = await openDestination(config, silentLogger(), () => undefined);
        state = await StateStore.open(config.statePath, { ...lease, ...(destination.leases === undefined ? {} : { leases: destination.leases }) });
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
    io.print(`reset: forgot the marks of ${keys.join(', ')}; the next sync re-reads them from their start (rows stay and are merged on their key)`);
    if (publishedLine !== undefined) io.print(publishedLine);
    return EXIT_CODES.ok;
  } catch (error) {
    io.print(`reset FAILED: ${(error as Error).message}`);
    return exitCodeFor(error);
  }
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

async function askOnTerminal(question: string): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    return await rl.question(question);
  } finally {
    rl.close();
  }
}
