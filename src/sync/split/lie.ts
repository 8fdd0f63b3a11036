import { DataError, FatalApiError } from '../../core/errors.js';
import type { ProjectScope, SplitDeclaration } from '../../core/types.js';
import { countsOverTime } from '../../extract/count-ranges.js';
import {
  INTERVALS,
  IntervalRefused,
  recordsOverTime,
  type Interval,
  type RecordsOverTime,
} from '../../extract/timeseries.js';
import type { TimeWindow } from '../../extract/windows.js';
import type { ApiClient, CallContext } from '../../http/client.js';
import type { JsonReader } from '../../extract/memo.js';
import { absenceIn, routeCapability, valueCapability, type Capabilities } from '../capabilities.js';

/** Where records lie, and what said so: the timeseries (at the intervals this server serves) or counts over ranges. */
export type RecordsLie =
  | (RecordsOverTime & { readonly source: 'timeseries'; readonly allowed: readonly Interval[] })
  | (Omit<RecordsOverTime, 'interval'> & { readonly source: 'counts' });

/**
 * Where the records of `window` lie, for a split: the timeseries at the intervals this server is
 * known to serve (an interval refused is learned and the next coarser or finer one asked), else,
 * when the timeseries is absent, refused or answers in another shape, counts over time ranges
 * (`countsOverTime`) on the declaration's `countPath`. What is learned goes to `caps` (state).
 * `undefined` when neither can say (no count endpoint declared). Errors that prove nothing about
 * the server's capabilities (retries exhausted, an abort) are thrown. The timeseries is asked through
 * `timeseries` (the run's memo, where there is one); counts over ranges go to `client`.
 */
export async function whereRecordsLie(
  decl: SplitDeclaration,
  scope: ProjectScope,
  window: TimeWindow,
  parts: number,
  firstRangeMs: number | undefined,
  caps: Capabilities,
  client: ApiClient,
  ctx: CallContext,
  timeseries: JsonReader = client,
): Promise<RecordsLie | undefined> {
  const path = decl.timeseriesPath;
  const route = routeCapability(path);
  const interval = (i: Interval): string => valueCapability(path, 'interval', i);
  while (caps.usable(route)) {
    const allowed = INTERVALS.filter((i) => caps.usable(interval(i)));
    if (allowed.length === 0) break;
    try {
      const lie = await recordsOverTime(timeseries, decl, scope, window, ctx, 3, allowed);
      await caps.offered(route, `GET ${path} answered in the SDK's shape`);
      await caps.offered(interval(lie.interval), `GET ${path} answered interval=${lie.interval}`);
      return { ...lie, source: 'timeseries', allowed };
    } catch (error) {
      if (error instanceof IntervalRefused) {
        await caps.absent(interval(error.interval), absenceIn(error, 'interval')?.evidence ?? error.message);
        continue;
      }
      const absence = absenceIn(error, 'interval');
      if (absence !== undefined) {
        await caps.absent(route, absence.evidence);
        break;
      }
      // No proof either way (another 4xx): nothing is stored, this split uses the counts.
      if (error instanceof FatalApiError || error instanceof DataError) break;
      throw error;
    }
  }
  if (decl.countPath === undefined) return undefined;
  const counted = await countsOverTime(
    client,
    { path: decl.countPath, gte: decl.timeseriesGte, lt: decl.timeseriesLt },
    scope,
    window,
    parts,
    ctx,
    firstRangeMs,
  );
  return { ...counted, source: 'counts' };
}
