import { ConfigError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Clock, ResourceDefinition, TableSchema } from '../core/types.js';
import type { Capabilities, Destination, LoadBatch } from '../load/destination.js';
import type { Refreshes } from '../load/destination-capabilities.js';
import { StateStore, type StateDocument } from '../state/store.js';

/**
 * `sync --full-refresh`: the resources are read from their start into shadow tables (their bridge
 * tables too), with their
 * marks kept in memory; at the end each resource whose every stream finished has its table
 * replaced by its shadow in one transaction, then its marks written to the state file. A refresh
 * that fails or is stopped leaves the table and the state as they were (its shadow is dropped), so
 * no reader ever sees a half-filled table and the state never describes rows only in a shadow.
 */

const SHADOW_PREFIX = '_query_sync_refresh_';

export function shadowTable(table: string): string {
  return `${SHADOW_PREFIX}${table}`;
}

/** How the destination swaps tables; refused early, before reading anything, when it cannot. */
export function assertCanRefresh(destination: Destination): Refreshes {
  const refresh = destination.can.refresh;
  if (refresh === undefined) {
    throw new ConfigError(
      `--full-refresh replaces tables atomically, which the ${destination.kind} destination cannot do (DuckDB and BigQuery can). ` +
        `Instead: query-sync reset --resources <names> --yes, then sync (the re-read merges on the key; rows deleted at the source stay).`,
    );
  }
  return refresh;
}

/** A table as its refresh writes it: into its shadow, and its bridges into theirs. */
function shadowSchema(table: TableSchema): TableSchema {
  const bridges = table.bridges?.map((b) => ({ ...b, table: { ...b.table, name: shadowTable(b.table.name) } }));
  return { ...table, name: shadowTable(table.name), ...(bridges === undefined ? {} : { bridges }) };
}

/** The tables a refresh of `resource` replaces: its own and its bridge tables (`event_signals`), swapped together. */
export function refreshedTables(resource: ResourceDefinition): { readonly table: string; readonly shadow: string }[] {
  return [resource.name, ...(resource.bridges ?? []).map((b) => b.table)].map((table) => ({
    table,
    shadow: shadowTable(table),
  }));
}

/** Writes of the refreshed resources go to their shadow tables (bridge tables included). */
export class ShadowDestination implements Destination {
  readonly kind: string;
  /** None: it takes a refresh's writes; the command uses the real destination for the rest. */
  readonly can: Capabilities = {};
  private readonly inner: Destination;

  constructor(inner: Destination) {
    this.inner = inner;
    this.kind = inner.kind;
  }

  describe(table: string): ReturnType<Destination['describe']> {
    return this.inner.describe(shadowTable(table));
  }

  write(batch: LoadBatch): ReturnType<Destination['write']> {
    return this.inner.write({ ...batch, table: shadowSchema(batch.table) });
  }

  count(table: string): Promise<number> {
    return this.inner.count(shadowTable(table));
  }

  close(): Promise<void> {
    return Promise.resolve(); // the command closes the real destination
  }
}

/** The state a refresh runs on: the file's projects and sections, no streams of its resources. */
function refreshState(real: StateDocument, clock: Clock): StateStore {
  return StateStore.memory({ ...real, streams: {} }, clock);
}

/**
 * What a refresh runs on: its state in memory (`refreshState`) and its writes into shadows, empty
 * ones (a killed refresh's are dropped first). Refused before anything is read where the
 * destination cannot swap tables.
 */
export async function beginRefresh(
  resources: readonly ResourceDefinition[],
  real: { readonly state: StateStore; readonly destination: Destination; readonly clock: Clock },
): Promise<{ readonly state: StateStore; readonly destination: Destination }> {
  const refresh = assertCanRefresh(real.destination);
  for (const r of resources) for (const { shadow } of refreshedTables(r)) await refresh.dropTable(shadow);
  return { state: refreshState(real.state.document, real.clock), destination: new ShadowDestination(real.destination) };
}

export interface RefreshOutcome {
  readonly replaced: readonly string[];
  readonly keptAsWas: readonly string[];
}

/**
 * After the run: swap in each resource whose streams all finished, then write its marks (and
 * forget marks of its other scopes, whose rows the swap removed). Drops the other shadows.
 */
export async function finishRefresh(
  resources: readonly ResourceDefinition[],
  finished: (resource: string) => boolean,
  deps: {
    readonly destination: Destination;
    readonly memory: StateStore;
    readonly state: StateStore;
    readonly logger: Logger;
  },
): Promise<RefreshOutcome> {
  const { memory, state, logger } = deps;
  const refresh = assertCanRefresh(deps.destination);
  const replaced: string[] = [];
  const keptAsWas: string[] = [];
  await state.addProjects(memory.document.projects);
  for (const resource of resources) {
    const swaps = refreshedTables(resource);
    if (!finished(resource.name)) {
      for (const { shadow } of swaps) await refresh.dropTable(shadow);
      keptAsWas.push(resource.name);
      continue;
    }
    await refresh.replaceTables(swaps);
    const prefix = `${resource.name}:`;
    const fresh = Object.entries(memory.document.streams).filter(([key]) => key.startsWith(prefix));
    const stale = Object.keys(state.document.streams).filter(
      (key) => key.startsWith(prefix) && !fresh.some(([k]) => k === key),
    );
    for (const [key, stream] of fresh) await state.updateStream(key, () => stream);
    for (const key of stale)
      await state.updateStream(key, (s) => (s.lastRun === undefined ? {} : { lastRun: s.lastRun }));
    logger.info(
      { resource: resource.name },
      `full refresh: table${swaps.length > 1 ? 's' : ''} ${swaps.map((t) => t.table).join(', ')} replaced`,
    );
    replaced.push(resource.name);
  }
  return { replaced, keptAsWas };
}
