import { RESOURCES } from '../../connectors/index.js';
import { PIPELINE_DEFAULTS } from '../config/defaults.js';
import type { TraceSelection, ResourceDefinition } from '../core/types.js';
import type { Destination } from '../load/destination.js';
import { owedQuery } from '../sync/traces/queue.js';
import { readsByParent } from '../sync/traces/probe.js';
import type { StateDocument } from '../state/store.js';

/** Per resource read one event at a time (traces): events owed their traces, per project. */
export type OwedByResource = Readonly<Record<string, Readonly<Record<string, number>>>>;

/**
 * What `status` and `plan` say is owed: for each resource this server reads per event (traces), the events in
 * the warehouse whose traces were never read, read empty while young (and now due), or failed,
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
  for (const traces of resources) {
    if (traces.perParent === undefined || readsByParent(doc, traces) !== true) continue;
    const events = RESOURCES.find((r) => r.name === traces.perParent?.parent);
    if (events === undefined) continue;
    const query = owedQuery(
      traces,
      events,
      {
        selection: settings.selection ?? 'all',
        settleMs: settings.settleMs ?? PIPELINE_DEFAULTS.sync.settleMs,
        ...(settings.startMs === undefined ? {} : { startMs: settings.startMs }),
      },
      settings.nowMs,
    );
    out[traces.name] = await book.countOwedTraces(query);
  }
  return out;
}
