import { Agent, request } from 'undici';
import { userAgent } from '../http/conventions.js';

/**
 * The one way monitoring talks HTTP (the Pushgateway, pings, webhooks), over undici: every call
 * bounded as a whole by the monitoring timeout, one retry inside it when the first attempt failed
 * fast (refused, reset, a 5xx or 429), never an exception. Only the origin of a URL is ever put in a
 * message: a healthchecks.io UUID, a Slack webhook's path, a Pushgateway's user:password are tokens.
 */

export interface Sent {
  readonly ok: boolean;
  /** The HTTP status, when one came. */
  readonly status?: number;
  /** Why it did not succeed, with no part of the URL but its origin. */
  readonly problem?: string;
  /** The answer's body, when it succeeded and the call asked for it. */
  readonly text?: string;
  /** Wall time the call took, retry included. */
  readonly ms: number;
}

export interface SendRequest {
  readonly method: 'GET' | 'POST' | 'PUT';
  readonly url: string;
  readonly body?: string;
  readonly contentType?: string;
  /** Keep the answer's body (a GET). */
  readonly readBody?: boolean;
  /** Less than the timeout, when part of it is spent already. @default the timeout */
  readonly budgetMs?: number;
}

/** A URL as it may be logged: its origin (scheme, host, port), never its user, path or query. */
export function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '(an unparsable URL)';
  }
}

export class MonitorHttp {
  private readonly agent: Agent;

  constructor(private readonly timeoutMs: number) {
    // Idle timeouts bounded by the same figure; the deadline below bounds the whole call.
    this.agent = new Agent({ connectTimeout: timeoutMs, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  }

  /** Send, within the timeout: a second attempt only when the first failed and time is left. */
  async send(req: SendRequest): Promise<Sent> {
    const started = Date.now();
    const budgetMs = Math.min(this.timeoutMs, req.budgetMs ?? this.timeoutMs);
    if (budgetMs <= 0) return { ok: false, problem: `${originOf(req.url)}: no time left to send`, ms: 0 };
    const deadline = started + budgetMs;
    let last = await this.attempt(req, budgetMs);
    if (!last.ok && last.retriable && deadline - Date.now() > 50) last = await this.attempt(req, deadline - Date.now());
    const { retriable: _, ...sent } = last;
    return { ...sent, ms: Date.now() - started };
  }

  /** Drop the connections (a run's monitoring ends with it). */
  async close(): Promise<void> {
    await this.agent.destroy().catch(() => undefined);
  }

  private async attempt(req: SendRequest, budgetMs: number): Promise<Omit<Sent, 'ms'> & { retriable: boolean }> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), budgetMs);
    try {
      const res = await request(req.url, {
        method: req.method,
        dispatcher: this.agent,
        signal: controller.signal,
        headers: {
          'user-agent': userAgent(),
          ...(req.contentType === undefined ? {} : { 'content-type': req.contentType }),
        },
        ...(req.body === undefined ? {} : { body: req.body }),
      });
      const text = await res.body.text();
      if (res.statusCode >= 200 && res.statusCode < 300)
        return { ok: true, status: res.statusCode, retriable: false, ...(req.readBody === true ? { text } : {}) };
      return {
        ok: false,
        status: res.statusCode,
        retriable: res.statusCode >= 500 || res.statusCode === 429,
        problem: `${originOf(req.url)} answered HTTP ${res.statusCode}`,
      };
    } catch (error) {
      const timedOut = controller.signal.aborted;
      return {
        ok: false,
        retriable: !timedOut,
        problem: timedOut
          ? `${originOf(req.url)} did not answer within ${budgetMs} ms`
          : `${originOf(req.url)}: ${clean((error as Error).message, req.url)}`,
      };
    } finally {
      clearTimeout(timer);
    }
  }
}

/** An error's message without the URL's path or query (undici's messages name the address only, but a proxy's may say more). */
function clean(message: string, url: string): string {
  let out = message;
  try {
    const u = new URL(url);
    for (const part of [url, `${u.pathname}${u.search}`, u.pathname, u.username, u.password])
      if (part.length > 1) out = out.split(part).join('…');
  } catch {
    // Not a URL: nothing of it to take out.
  }
  return out.slice(0, 200);
}
