import { RESOURCES } from '../../connectors/index.js';
import type { ResetConfig } from '../config/index.js';
import { partitionedTables } from '../publish/partitions.js';
import { systemClock } from '../core/clock.js';
import { silentLogger } from '../core/log.js';
import type { Destination } from '../load/destination.js';
import type { StateStore, StreamState } from '../state/store.js';
import type { RunStop } from './stop.js';
import type { RunOutcome } from './writing.js';
import { EXIT_CODES } from '../core/exit-codes.js';
import type { PublishesCopy } from '../load/destination-capabilities.js';
import { Publisher } from '../publish/publisher.js';
import { readStateDocument } from './state-home.js';
import { traceSectionName, owedMarkSectionName, type TraceSection, type OwedMarks } from '../state/books/traces.js';

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
 * `reset`'s step (`run.reset(keys)`, on the run `openRun('reset', config)` opened: the state under
 * the `sync` lease, the destination if there is a warehouse): forget the marks and checkpoints of
 * `keys` where the state lives (the warehouse, and the file, its copy), then publish the DuckDB
 * read copy. Returns the lines to print.
 */
export async function resetStep(
  run: {
    readonly config: ResetConfig;
    readonly state: StateStore;
    readonly destination: Destination | undefined;
    readonly stop: RunStop;
  },
  keys: readonly string[],
): Promise<RunOutcome> {
  const { config, state, destination, stop } = run;
  for (const key of keys) {
    // The lease lost (another run writes now): stop before forgetting more.
    if (stop.reason !== undefined) throw stop.reason;
    await state.updateStream(key, forget);
  }
  const forgotTraces = await forgetTraceReads(config, state, destination);
  const copy = destination?.can.publish;
  const published =
    copy !== undefined && !config.dryRun && config.duckdbPath !== ':memory:'
      ? [await publishAfterReset(config.duckdbPath, copy)]
      : [];
  return {
    code: EXIT_CODES.ok,
    output: [
      `reset: forgot the marks of ${keys.join(', ')}; the next sync re-reads them from their start (rows stay and are merged on their key)`,
      ...forgotTraces,
      ...published,
    ],
  };
}

/**
 * Publish the read copy at the reset's end, as a sync does at its end: readers' `_query_sync_published`
 * and the manifest follow the working file (its rows are unchanged, so only what a publish always
 * rewrites, or what an earlier failed publish left, is written). A publish that fails only warns: the reset itself is done.
 */
async function publishAfterReset(path: string, copy: PublishesCopy): Promise<string> {
  try {
    const result = await new Publisher(path, copy, systemClock, { partitioned: partitionedTables(RESOURCES) }).publish(
      true,
    );
    return `reset: published ${path} (publish ${result.publish}, ${result.rewritten} partition file(s) rewritten)`;
  } catch (error) {
    return `reset: warning: ${(error as Error).message}`;
  }
}

/**
 * Per-event traces named by `--resources` (traces read one event at a time): forget which
 * events had them read (the warehouse's trace book, and the state queue of older versions), so
 * every event in the table owes them again and the next sync reads them. Returns what it forgot.
 */
async function forgetTraceReads(
  config: ResetConfig,
  state: StateStore,
  destination: Destination | undefined,
): Promise<string[]> {
  const lines: string[] = [];
  for (const traces of config.resources.filter((r) => r.perParent !== undefined)) {
    const project = config.project === '*' ? undefined : config.project;
    await destination?.can.traceBook?.forgetTraces(traces.name, project);
    // The owed listings' marks go with the book: an emptied book partition leaves no trace in
    // INFORMATION_SCHEMA.PARTITIONS, so the next listing must read every day.
    const marks = owedMarkSectionName(traces);
    if (state.document.sections[marks] !== undefined)
      await state.updateSection<OwedMarks | undefined>(marks, (current) => {
        if (project === undefined || current === undefined) return undefined;
        const { [project]: _forgotten, ...rest } = current;
        return rest;
      });
    const section = traceSectionName(traces);
    const queued = state.document.sections[section] as TraceSection | undefined;
    if (queued !== undefined) {
      await state.updateSection<TraceSection | undefined>(section, (current) => {
        if (project === undefined || current === undefined) return undefined;
        const { [project]: _forgotten, ...rest } = current;
        return rest;
      });
    }
    lines.push(
      `reset: forgot which ${traces.perParent?.parent ?? 'parent'} records had their ${traces.name} read${project === undefined ? '' : ` in project ${project}`}; ` +
        `the next sync reads them again for every ${traces.perParent?.parent ?? 'parent'} record in the warehouse`,
    );
  }
  return lines;
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
