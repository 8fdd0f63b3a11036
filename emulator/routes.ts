/**
 * The 13 endpoints of the spec and the 3 signal-group endpoints of the vendor's SDK (16 in all),
 * keyed by path template, with whether each accepts the all-projects scope (`*`). Source for the
 * scope column: field notes, "All-projects scope" (signal groups: not listed there, so refused).
 */

import { countEvents, eventFacets, eventTimeseries, getEvent, listEvents, searchEvents } from './event-handlers.js';
import type { Handler } from './handler-context.js';
import {
  getConversation,
  getSignal,
  getSignalGroup,
  getUser,
  listConversations,
  listSignalGroups,
  listSignalGroupSignals,
  listSignals,
  listTraces,
  listUsers,
} from './resource-handlers.js';

export interface Route {
  /** Path template, e.g. `/v1/events/{id}`: the key of stats and rate limits. */
  readonly template: string;
  readonly allProjects: boolean;
  /** A paginated list: the `duplicate_row` fault applies. */
  readonly list: boolean;
  readonly handler: Handler;
}

export const SEARCH_TEMPLATE = '/v1/events/search';

const EXACT: ReadonlyMap<string, Route> = new Map(
  [
    { template: '/v1/events', allProjects: true, list: true, handler: listEvents },
    { template: SEARCH_TEMPLATE, allProjects: true, list: true, handler: searchEvents },
    { template: '/v1/events/count', allProjects: true, list: false, handler: countEvents },
    { template: '/v1/events/timeseries', allProjects: true, list: false, handler: eventTimeseries },
    { template: '/v1/events/facets', allProjects: true, list: false, handler: eventFacets },
    { template: '/v1/traces', allProjects: false, list: true, handler: listTraces },
    { template: '/v1/signals', allProjects: false, list: true, handler: listSignals },
    { template: '/v1/signal-groups', allProjects: false, list: true, handler: listSignalGroups },
    { template: '/v1/users', allProjects: true, list: true, handler: listUsers },
    { template: '/v1/conversations', allProjects: true, list: true, handler: listConversations },
  ].map((route) => [route.template, route]),
);

const BY_ID: ReadonlyMap<string, Route> = new Map(
  [
    { template: '/v1/events/{id}', allProjects: false, list: false, handler: getEvent },
    { template: '/v1/signals/{id}', allProjects: false, list: false, handler: getSignal },
    { template: '/v1/signal-groups/{id}', allProjects: false, list: false, handler: getSignalGroup },
    { template: '/v1/users/{id}', allProjects: false, list: false, handler: getUser },
    { template: '/v1/conversations/{id}', allProjects: false, list: false, handler: getConversation },
  ].map((route) => [route.template.split('/')[2] ?? '', route]),
);

const GROUP_SIGNALS: Route = {
  template: '/v1/signal-groups/{id}/signals',
  allProjects: false,
  list: true,
  handler: listSignalGroupSignals,
};

export interface RouteMatch {
  readonly route: Route;
  readonly id: string | undefined;
}

export function matchRoute(pathname: string): RouteMatch | undefined {
  const exact = EXACT.get(pathname);
  if (exact) return { route: exact, id: undefined };
  const segments = pathname.split('/');
  if (segments[0] !== '' || segments[1] !== 'v1') return undefined;
  let route: Route | undefined;
  if (segments.length === 4) route = BY_ID.get(segments[2] ?? '');
  else if (segments.length === 5 && segments[2] === 'signal-groups' && segments[4] === 'signals') route = GROUP_SIGNALS;
  const raw = segments[3] ?? '';
  if (!route || raw === '') return undefined;
  let id = raw;
  try {
    id = decodeURIComponent(raw);
  } catch {
    // A malformed escape cannot name a record: keep it raw, it answers 404.
  }
  return { route, id };
}
