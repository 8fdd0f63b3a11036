import type { ProjectScope, ResourceDefinition } from '../core/types.js';
import { FACETS_PATH, readFacets } from '../extract/analytics.js';
import { INTERVALS, timeseries } from '../extract/timeseries.js';
import type { ApiClient, CallContext } from '../http/client.js';
import { absenceIn, routeCapability, valueCapability, type CapabilityFacts } from '../sync/capabilities.js';
import { SEARCH_PATH } from '../analysts/searches.js';

/**
 * `check`'s list of what this server offers of the optional parts of the API: one request each
 * (the timeseries at each interval over the last day, facets, search, and the optional resources,
 * whose first pages `check` reads anyway), beside what `sync` has recorded in state. Writes nothing.
 */

export interface OfferedCapability {
  readonly capability: string;
  /** `undefined`: the answer proved nothing (a 5xx, a timeout, a refused project). */
  readonly offered: boolean | undefined;
  readonly evidence: string;
  /** What sync recorded for it, when it did. */
  readonly recorded?: { readonly offered: boolean; readonly learnedAt: string };
}

export async function probeCapabilities(
  client: ApiClient,
  resources: readonly ResourceDefinition[],
  scope: ProjectScope,
  ctx: CallContext,
  nowMs: number,
  recorded: CapabilityFacts,
): Promise<OfferedCapability[]> {
  const window = { fromMs: nowMs - 86_400_000, toMs: nowMs };
  const out: OfferedCapability[] = [];
  const withRecord = (c: Omit<OfferedCapability, 'recorded'>): OfferedCapability => {
    const fact = recorded[c.capability];
    return { ...c, ...(fact === undefined ? {} : { recorded: { offered: fact.offered, learnedAt: fact.learnedAt } }) };
  };
  /** One request: offered, absent (with what: the route or the value of `param`), or no proof. */
  const answer = async (
    param: string | undefined,
    request: () => Promise<unknown>,
  ): Promise<{ offered: boolean | undefined; what?: 'route' | 'value'; evidence: string }> => {
    try {
      await request();
      return { offered: true, evidence: 'answered in the expected shape' };
    } catch (error) {
      const absence = absenceIn(error, param);
      if (absence === undefined) return { offered: undefined, evidence: (error as Error).message.split('\n')[0] ?? '' };
      return { offered: false, what: absence.what, evidence: absence.evidence };
    }
  };
  const ask = async (capability: string, request: () => Promise<unknown>): Promise<void> => {
    const { offered, evidence } = await answer(undefined, request);
    out.push(withRecord({ capability, offered, evidence }));
  };
  const decl = resources.find((r) => r.split !== undefined)?.split;
  if (decl !== undefined) {
    // One interval after the other: each answer is its own (a refused interval names itself).
    const intervals: (OfferedCapability & { what?: 'route' | 'value' })[] = [];
    for (const interval of INTERVALS) {
      const a = await answer('interval', () => timeseries(client, decl, scope, window, interval, ctx));
      intervals.push({
        ...withRecord({
          capability: valueCapability(decl.timeseriesPath, 'interval', interval),
          offered: a.offered,
          evidence: a.evidence,
        }),
        ...(a.what === undefined ? {} : { what: a.what }),
      });
    }
    const served = intervals.filter((c) => c.offered === true).map((c) => c.capability.split('=')[1] ?? '');
    const routeAbsent = intervals.every((c) => c.offered === false && c.what === 'route');
    out.push(
      withRecord({
        capability: routeCapability(decl.timeseriesPath),
        offered: served.length > 0 ? true : routeAbsent ? false : undefined,
        evidence: served.length > 0 ? `answered at ${served.join(', ')}` : (intervals[0]?.evidence ?? ''),
      }),
    );
    // The intervals only matter where the route is there.
    if (!routeAbsent) out.push(...intervals.map(({ what: _what, ...c }) => c));
  }
  await ask(routeCapability(FACETS_PATH), () => readFacets(client, scope, 'event_name', window, ctx));
  await ask(routeCapability(SEARCH_PATH), () =>
    client.getJson(
      {
        endpoint: SEARCH_PATH,
        path: SEARCH_PATH,
        query: { query: 'query-sync-check', 'timestamp[gte]': new Date(window.fromMs).toISOString(), limit: '1' },
        project: scope.header,
      },
      ctx,
    ),
  );
  return out;
}
