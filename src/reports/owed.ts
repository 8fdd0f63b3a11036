import { RESOURCES } from '../../connectors/index.js';
import { PIPELINE_DEFAULTS } from '../config/defaults.js';
import type { TraceSelection, ResourceDefinition } from '../core/types.js';
import type { Destination } from '../load/destination.js';
import { owedQuery } from '../sync/traces/queue.js';
import { readsByParent } from '../sync/traces/probe.js';
import type { StateDocument } from '../state/store.js';

/** Per per-event resource read one parent at a time: parents owed their children, per project. */
export type OwedByResource = Readonly<Record<string, Readonly<Record<string, number>>>>;

/**
 * What `status` and `plan` say is owed: for each child this server reads per parent, the parents in
 * the warehouse whose children were never read, read empty while young (and now due), or failed,
 * counted by the warehouse's trace book. Empty where the destination keeps no book.
 */
export async function owedTraces(
  destination: Destination,
  doc: StateDocument,
  resources: readonly ResourceDefinition[],
  settings: {
    readonly nowMs: number;
    readonly settleMs?: number;
    readonly startMs?: number;
    readonly selection?: TraceSelection;
  },
): Promise<OwedByResource> {
  const book = destination.can.traceBook;
  const out: Record<string, Readonly<Record<string, number>>> = {};
  if (book === undefined || settings.selection === 'none') return out;
  for (const child of resources) {
    if (child.perParent === undefined || readsByParent(doc, child) !== true) continue;
    const parent = RESOURCES.find((r) => r.name === child.perParent?.parent);
    if (parent === undefined) continue;
    const query = owedQuery(
      child,
      parent,
      {
        selection: settings.selection ?? 'all',
        settleMs: settings.settleMs ?? PIPELINE_DEFAULTS.sync.settleMs,
        ...(settings.startMs === undefined ? {} : { startMs: settings.startMs }),
      },
      settings.nowMs,
    );
    out[child.name] = await book.countOwedTraces(query);
  }
  return out;
}
