/**
 * Servers the emulator can play besides its two flavors, each a difference the spec or the vendor
 * SDK allows: optional routes absent, a timeseries that refuses some intervals, or one that answers
 * in another shape. A client must degrade on each (skip, or fall back), never fail its run.
 */

/** Optional capabilities a server may lack; each is answered 404 `not_found` as an unknown path. */
export const LACKS = ['signal-groups', 'timeseries', 'facets', 'search'] as const;
export type Lack = (typeof LACKS)[number];

/** Shapes a timeseries may answer in: the SDK's, or rows `{"data": [{"bucket", "events"}]}` (the spec names none). */
export const TIMESERIES_SHAPES = ['sdk', 'rows'] as const;
export type TimeseriesShape = (typeof TIMESERIES_SHAPES)[number];

export interface ServerVariant {
  readonly lacks: ReadonlySet<Lack>;
  /** Intervals the timeseries accepts (others: 400 naming `interval`); undefined: all. */
  readonly timeseriesIntervals: ReadonlySet<string> | undefined;
  readonly timeseriesShape: TimeseriesShape;
}

export function serverVariant(options: {
  lacks?: readonly string[];
  timeseriesIntervals?: readonly string[];
  timeseriesShape?: string;
}): ServerVariant {
  const lacks = new Set<Lack>();
  for (const lack of options.lacks ?? []) {
    if (!(LACKS as readonly string[]).includes(lack))
      throw new Error(`Emulator: lacks must name ${LACKS.join(', ')}; got "${lack}"`);
    lacks.add(lack as Lack);
  }
  const shape = options.timeseriesShape ?? 'sdk';
  if (!(TIMESERIES_SHAPES as readonly string[]).includes(shape))
    throw new Error(`Emulator: timeseriesShape must be ${TIMESERIES_SHAPES.join(' or ')}; got "${shape}"`);
  return {
    lacks,
    timeseriesIntervals: options.timeseriesIntervals === undefined ? undefined : new Set(options.timeseriesIntervals),
    timeseriesShape: shape as TimeseriesShape,
  };
}

/** The capability a route belongs to, when it is optional. */
export function capabilityOf(template: string): Lack | undefined {
  if (template.startsWith('/v1/signal-groups')) return 'signal-groups';
  if (template === '/v1/events/timeseries') return 'timeseries';
  if (template === '/v1/events/facets') return 'facets';
  if (template === '/v1/events/search') return 'search';
  return undefined;
}
