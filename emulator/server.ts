/**
 * The HTTP side: routing, method check, bearer auth, rate limits, fault injection, project scope,
 * and writing JSON. Order per request: route → method → auth → limits (all at arrival) → latency →
 * fault draw → scope → handler.
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { JsonValue } from './types.js';
import { DEFAULT_SLOW_MS, HTML_503, type FaultOptions, type FaultPicker } from './faults.js';
import type { Flavor, RequestContext } from './handler-context.js';
import { toJson } from './json.js';
import type { RateLimiter } from './limits.js';
import { ApiError, type ErrorDetails } from './params.js';
import type { Random } from './random.js';
import { withListQuirks, type ListQuirks } from './quirks.js';
import { matchRoute, type Route } from './routes.js';
import { resolveScope, type ScopeRules } from './scope.js';
import type { StatsRecorder } from './stats.js';
import type { ProjectData, Store } from './store.js';
import type { Direction } from './sorted-list.js';
import { capabilityOf, type ServerVariant } from './variants.js';

const JSON_TYPE = 'application/json; charset=utf-8';

/** What `configure()` may change at run time. */
export interface Settings {
  order: Direction;
  limiter: RateLimiter | undefined;
  faults: FaultOptions | undefined;
  /** Every answer waits this long (ms), ± `latencyJitterMs`, drawn per request. */
  latencyMs: number;
  latencyJitterMs: number;
  /** `false`: `*` is refused with 400 on every endpoint. */
  allProjects: boolean;
  /** Events in this window are counted but never listed (`EmulatorOptions.unlistedEvents`). */
  unlistedEvents?: { readonly fromMs: number; readonly toMs: number } | undefined;
  /** The key is revoked once this many requests have been admitted (`EmulatorOptions.revokeKeyAfter`). */
  revokeKeyAfter?: number | undefined;
}

/** What a request looked like, for tests that check what a client sends. */
export interface RequestInfo {
  readonly method: string;
  /** The path as sent, e.g. `/v1/events/abc`. */
  readonly path: string;
  /** The matched template, e.g. `/v1/events/{id}`; undefined for unknown paths. */
  readonly template: string | undefined;
  readonly query: URLSearchParams;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
}

export interface ServerContext {
  readonly store: Store;
  readonly stats: StatsRecorder;
  readonly faultPicker: FaultPicker;
  readonly settings: Settings;
  readonly apiKey: string;
  readonly writeKey: string;
  readonly scopeRules: ScopeRules;
  readonly flavor: Flavor;
  /** Draws the latency jitter. */
  readonly latencyRng: Random;
  readonly onRequest: ((info: RequestInfo) => void) | undefined;
  readonly now: () => number;
  /** Optional routes absent, timeseries intervals refused, another timeseries shape. */
  readonly variant: ServerVariant;
  /** Delays the `slow` fault; tracked so `close()` can cancel them. */
  readonly sleep: (ms: number) => Promise<void>;
  /** List behaviours of servers we have not met (`quirks.ts`); none by default. */
  readonly lists?: ListQuirks;
}

export function createListener(server: ServerContext): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    handle(server, req, res).catch((error: unknown) => {
      if (!res.headersSent) sendError(res, 500, 'internal_error', `Emulator error: ${(error as Error).message}`);
      else res.destroy();
    });
  };
}

async function handle(server: ServerContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const arrival = server.now();
  const url = new URL(req.url ?? '/', 'http://127.0.0.1');
  const match = matchRoute(url.pathname);
  server.stats.received(arrival, match?.route.template, req.url ?? '/');
  server.onRequest?.({
    method: req.method ?? 'GET',
    path: url.pathname,
    template: match?.route.template,
    query: url.searchParams,
    headers: req.headers,
  });
  // Refusals (route, method, key, rate limits) are decided at arrival, in arrival order, as a real
  // server's rate limiter counts a request when it arrives; only the answer waits for the latency.
  // (Deciding after the latency, with jitter, admitted requests out of arrival order: a window's log
  // then held a later arrival before an earlier one, and a request was counted in a second it was
  // not in, or one that was in it was already pruned: spurious or missed 429s at the boundary.)
  const refusal = refuse(server, req, url, match, arrival);
  const { latencyMs, latencyJitterMs } = server.settings;
  if (latencyMs > 0 || latencyJitterMs > 0) {
    const delay = Math.max(0, latencyMs + (server.latencyRng.next() * 2 - 1) * latencyJitterMs);
    await server.sleep(delay);
    if (res.destroyed) return;
  }
  if (refusal !== undefined) return refusal(res);
  if (!match) return;
  const { route } = match;

  const faults = server.settings.faults;
  const fault = server.faultPicker.draw(faults);
  switch (fault) {
    case 'http500':
      server.stats.fault(fault);
      return sendError(res, 500, 'internal_error', 'Internal server error');
    case 'http503_html':
      server.stats.fault(fault);
      return send(res, 503, HTML_503, 'text/html; charset=utf-8');
    case 'reset':
      server.stats.fault(fault);
      req.socket.destroy();
      return;
    case 'slow':
      server.stats.fault(fault);
      await server.sleep(faults?.slowMs ?? DEFAULT_SLOW_MS);
      if (res.destroyed) return;
      break;
    default:
      break;
  }

  let body: JsonValue;
  try {
    body = run(server, req, route, match.id, url.searchParams);
  } catch (error) {
    if (error instanceof ApiError) return sendError(res, error.status, error.code, error.message, {}, error.details);
    throw error;
  }
  if (fault === 'duplicate_row' && route.list) {
    const duplicated = duplicateRow(body);
    if (duplicated !== undefined) {
      server.stats.fault(fault);
      body = duplicated;
    }
  }
  const text = toJson(body);
  if (fault === 'truncated') {
    server.stats.fault(fault);
    return sendTruncated(res, text);
  }
  send(res, 200, text, JSON_TYPE);
}

/** The refusal of a request at its arrival (sent after the latency), or undefined when it is admitted and counted. */
function refuse(
  server: ServerContext,
  req: IncomingMessage,
  url: URL,
  match: ReturnType<typeof matchRoute>,
  arrival: number,
): ((res: ServerResponse) => void) | undefined {
  if (!match) return (res) => sendError(res, 404, 'not_found', `No endpoint at ${url.pathname}`);
  const { route } = match;
  // A capability this server lacks: its routes are unknown paths, as on a server without them.
  const lacked = capabilityOf(route.template);
  if (lacked !== undefined && server.variant.lacks.has(lacked))
    return (res) => sendError(res, 404, 'not_found', `No endpoint at ${url.pathname}`);
  if (req.method !== 'GET') {
    const method = req.method ?? '?';
    return (res) =>
      sendError(res, 405, 'method_not_allowed', `${method} is not allowed; the Query API is read-only (GET)`, {
        allow: 'GET',
      });
  }
  const key = bearerToken(req.headers.authorization);
  if (key === undefined)
    return (res) => sendError(res, 401, 'missing_api_key', 'Send "Authorization: Bearer <Organization API Key>"');
  if (key === server.writeKey) {
    return (res) =>
      sendError(
        res,
        401,
        'invalid_api_key',
        'The write key is not accepted by the Query API; use the Organization API Key',
      );
  }
  if (key !== server.apiKey) return (res) => unauthorized(server, res, 'The API key is not valid');
  const revokeAfter = server.settings.revokeKeyAfter;
  if (revokeAfter !== undefined && server.stats.admitted() >= revokeAfter)
    return (res) => unauthorized(server, res, 'The API key has been revoked');
  const limiter = server.settings.limiter;
  if (limiter) {
    const decision = limiter.admit(key, route.template, arrival);
    if (!decision.allowed) {
      server.stats.rateLimited();
      return (res) =>
        sendError(res, 429, 'rate_limited', `Rate limit exceeded: ${decision.reason}`, {
          'retry-after': String(decision.retryAfterSeconds),
        });
    }
  }
  server.stats.accepted(arrival, route.template);
  return undefined;
}

/** A 401 for the key, counted when it is answered (`EmulatorStats.unauthorized`). */
function unauthorized(server: ServerContext, res: ServerResponse, message: string): void {
  sendError(res, 401, 'invalid_api_key', message);
  server.stats.unauthorized();
}

function run(
  server: ServerContext,
  req: IncomingMessage,
  route: Route,
  id: string | undefined,
  params: URLSearchParams,
): JsonValue {
  const rawHeader = req.headers[server.scopeRules.headerName.toLowerCase()];
  const header = Array.isArray(rawHeader) ? rawHeader.join(',') : rawHeader;
  const projectIds = server.lists?.ignoreProjectIds === true ? null : params.get('project_ids');
  const scope = resolveScope(header, projectIds, route.allProjects && server.settings.allProjects, server.scopeRules);
  const now = server.now();
  server.store.advance(now);
  const projects: ProjectData[] = [];
  for (const slug of scope.projects) {
    const project = server.store.project(slug);
    if (project) projects.push(project);
  }
  const context: RequestContext = {
    store: server.store,
    flavor: server.flavor,
    now,
    order: server.settings.order,
    projects,
    allProjects: scope.all,
    params,
    id,
    unlistedEvents: server.settings.unlistedEvents,
    variant: server.variant,
  };
  if (server.lists === undefined) return route.handler(context);
  return withListQuirks(server.lists, route.template, params, (quirked) =>
    route.handler({ ...context, params: quirked }),
  );
}

function bearerToken(header: string | undefined): string | undefined {
  const match = header === undefined ? null : /^\s*Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/**
 * The same body with one row of the page (the middle one) repeated right after itself, or undefined
 * when there is no row. No extra draw, so the fault sequence stays one draw per request.
 */
function duplicateRow(body: JsonValue): JsonValue | undefined {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return undefined;
  const envelope = body as { readonly [key: string]: JsonValue };
  const data = envelope['data'];
  if (!Array.isArray(data) || data.length === 0) return undefined;
  const rows = data as readonly JsonValue[];
  const index = Math.floor((rows.length - 1) / 2);
  const row = rows[index] ?? null;
  return { ...envelope, data: [...rows.slice(0, index + 1), row, ...rows.slice(index + 1)] };
}

function send(
  res: ServerResponse,
  status: number,
  text: string,
  contentType: string,
  headers: Record<string, string> = {},
): void {
  const buffer = Buffer.from(text, 'utf8');
  res.writeHead(status, { 'content-type': contentType, 'content-length': buffer.length, ...headers });
  res.end(buffer);
}

/** A 200 announcing the full length, carrying the first half, then a dropped connection. */
function sendTruncated(res: ServerResponse, text: string): void {
  const buffer = Buffer.from(text, 'utf8');
  res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': buffer.length });
  res.write(buffer.subarray(0, Math.floor(buffer.length / 2)), () => res.socket?.destroy());
}

/** `{"error":{"code","message","details"?:{"field"?,"allowed_fields"?}}}`: the vendor SDK's error schema. */
export function sendError(
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
  details?: ErrorDetails,
): void {
  const error: { [key: string]: JsonValue } = { code, message };
  if (details !== undefined) {
    const body: { [key: string]: JsonValue } = {};
    if (details.field !== undefined) body['field'] = details.field;
    if (details.allowed_fields !== undefined) body['allowed_fields'] = [...details.allowed_fields];
    error['details'] = body;
  }
  send(res, status, toJson({ error }), JSON_TYPE, headers);
}
