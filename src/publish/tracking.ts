import type { Capabilities, Destination, LoadBatch, LoadResult, TableSwap } from '../load/destination.js';
import { partitionOfRow, partitionOfTable, WHOLE, type DayCut } from './partitions.js';
import type { Publisher } from './publisher.js';

/**
 * The run's destination, noting for the publisher which partitions each write touched, so a
 * publish rewrites those and no others. A mark is made after the write returns: a publish that
 * took its snapshot in between rewrites the partition then, or the next one does.
 */
export function trackWrites(destination: Destination, publisher: Publisher): Destination {
  const write = async (batch: LoadBatch): Promise<LoadResult> => {
    const result = await destination.write(batch);
    // A write that changed nothing (a re-read of the same content) leaves the published copy as it is.
    if (result.changed === 0) return result;
    const spec = partitionOfTable(batch.table);
    if (spec === undefined) publisher.mark(batch.table.name, [WHOLE]);
    else {
      const days = new Set<string>();
      let unknown = false;
      for (const row of batch.rows) {
        const day = partitionOfRow(spec, row);
        if (day === undefined) unknown = true;
        else days.add(day);
      }
      publisher.mark(batch.table.name, unknown ? undefined : days);
    }
    // A bridge table's rows come from the parent's batch (one file each: rewritten whole).
    for (const bridge of batch.table.bridges ?? []) publisher.mark(bridge.table.name, [WHOLE]);
    return result;
  };
  // Tables its capabilities replace or drop are marked too (rewritten whole); the rest of what it
  // offers is its own.
  const { refresh, drop, deletions } = destination.can;
  const marking =
    (dropTable: (table: string) => Promise<void>) =>
    async (table: string): Promise<void> => {
      await dropTable(table);
      publisher.mark(table, undefined);
    };
  const can: Capabilities = {
    ...destination.can,
    ...(drop === undefined ? {} : { drop: { dropTable: marking((table) => drop.dropTable(table)) } }),
    ...(deletions === undefined
      ? {}
      : {
          deletions: {
            keysInWindow: (table, window) => deletions.keysInWindow(table, window),
            // Reconcile's marks and deletions change rows too: the parent's days of the window, and the
            // tables that follow it whole (their rows' days are not known here).
            applyDeletions: async (change) => {
              const result = await deletions.applyDeletions(change);
              publisher.mark(
                change.parent.table,
                windowDays(publisher.partitioned[change.parent.table], change.parent),
              );
              for (const f of change.followers) if ((result.rows[f.table] ?? 0) > 0) publisher.mark(f.table, undefined);
              return result;
            },
          },
        }),
    ...(refresh === undefined
      ? {}
      : {
          refresh: {
            dropTable: marking((table) => refresh.dropTable(table)),
            replaceTables: async (swaps: readonly TableSwap[]): Promise<void> => {
              await refresh.replaceTables(swaps);
              for (const s of swaps) publisher.mark(s.table, undefined);
            },
          },
        }),
  };
  const overrides: Partial<Destination> = { write, can };
  // Everything else goes to the destination itself, bound to it (its queue and connection are its own).
  return new Proxy(destination, {
    get(target, prop, receiver) {
      if (Object.hasOwn(overrides, prop)) return (overrides as Record<string | symbol, unknown>)[prop];
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** The partitions of a table (cut as `spec` says) a window's rows lie in (`undefined`: the table is not cut by that column, rewrite it whole). */
function windowDays(
  spec: DayCut | undefined,
  window: { readonly column: string; readonly fromIso: string; readonly toIso: string },
): ReadonlySet<string> | undefined {
  if (spec === undefined) return new Set([WHOLE]);
  if (spec.column !== window.column || spec.kind !== 'timestamp') return undefined;
  const days = new Set<string>();
  const DAY_MS = 86_400_000;
  const toMs = Date.parse(window.toIso);
  for (let ms = Math.floor(Date.parse(window.fromIso) / DAY_MS) * DAY_MS; ms < toMs; ms += DAY_MS)
    days.add(partitionOfRow(spec, { [spec.column]: new Date(ms).toISOString() }) ?? '');
  return days;
}
