import { DataError, FatalApiError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Clock } from '../core/types.js';

/**
 * What this server offers of the optional parts of the API (signal groups, facets, search, the
 * timeseries and each of its intervals): learned where first needed, from the answers themselves,
 * kept in state (`sections.capabilities`), logged once, and re-checked once a day when absent (a
 * server may add a route; one request a day finds out). A run never fails for a capability the
 * server lacks: the caller skips it or falls back (split planning: counts instead of the timeseries).
 *
 * Only proof is stored: "absent" from a 404 or 405 on the route, a 400 in the SDK's error shape, or
 * an answer in another shape; "offered" from an answer in the expected shape. A timeout, a 5xx or a
 * 429 says nothing and changes nothing. An answer that contradicts what was stored (a capability
 * that disappears or appears) is logged once with what changed, and the new answer is stored.
 */

const CAPABILITIES_SECTION = 'capabilities';

/** An absent capability is asked again after this long (one request a day at most). */
const CAPABILITY_RECHECK_MS = 86_400_000;

export interface CapabilityFact {
  readonly offered: boolean;
  /** When this was last observed (ISO instant). */
  readonly learnedAt: string;
  /** The answer that proved it, in words (status, body trimmed). */
  readonly evidence: string;
}

export type CapabilityFacts = Readonly<Record<string, CapabilityFact>>;

/** The name of a route's capability, e.g. `GET /v1/signal-groups`. */
export function routeCapability(path: string): string {
  return `GET ${path}`;
}

/** The name of a value's capability, e.g. `GET /v1/events/timeseries interval=month`. */
export function valueCapability(path: string, param: string, value: string): string {
  return `GET ${path} ${param}=${value}`;
}

/**
 * What `error` proves absent: `route` (404/405, a 400 not naming `param`, or an answer in another
 * shape), `value` (a 400 naming `param`), or `undefined` (no proof: a 5xx, a timeout, a refused
 * key or project, an abort: the caller's own error handling applies).
 */
export function absenceIn(
  error: unknown,
  param?: string,
): { readonly what: 'route' | 'value'; readonly evidence: string } | undefined {
  if (error instanceof FatalApiError) {
    if (error.status === 404 || error.status === 405)
      return { what: 'route', evidence: `HTTP ${error.status}: ${firstLine(error.message)}` };
    if (error.status === 400) {
      const namesParam = param !== undefined && error.field === param;
      return { what: namesParam ? 'value' : 'route', evidence: `HTTP 400: ${firstLine(error.message)}` };
    }
    return undefined;
  }
  if (error instanceof DataError)
    return { what: 'route', evidence: `an answer in another shape: ${firstLine(error.message)}` };
  return undefined;
}

function firstLine(message: string): string {
  return message.split('\n')[0]?.slice(0, 240) ?? '';
}

/** The part of the state store the book uses (a `StateStore`, or `memoryBook()` where nothing is kept). */
export interface CapabilityState {
  readonly document: { readonly sections: Readonly<Record<string, unknown>> };
  updateSection<T>(name: string, change: (current: T | undefined) => T): Promise<void>;
}

/** A state of sections kept in memory only: for a caller with no state store (a plan, a test of one part). */
export function memoryBook(): CapabilityState {
  let sections: Record<string, unknown> = {};
  return {
    get document() {
      return { sections };
    },
    updateSection<T>(name: string, change: (current: T | undefined) => T): Promise<void> {
      sections = { ...sections, [name]: change(sections[name] as T | undefined) };
      return Promise.resolve();
    },
  };
}

export interface CapabilityDeps {
  readonly state: CapabilityState;
  readonly clock: Clock;
  readonly logger: Logger;
}

/** The capabilities book of one run (over the state section; one instance shared by the run's streams). */
export class Capabilities {
  private readonly deps: CapabilityDeps;
  private readonly recheckMs: number;
  /** Learned in this run but not yet stored, or contradicted in this run: what the run acts on. */
  private readonly seen = new Map<string, CapabilityFact>();
  /** One write (and one log line) per capability and outcome per run. */
  private readonly told = new Set<string>();

  constructor(deps: CapabilityDeps, recheckMs = CAPABILITY_RECHECK_MS) {
    this.deps = deps;
    this.recheckMs = recheckMs;
  }

  /** Every recorded fact, as `check` and `status` show them. */
  static facts(state: {
    readonly document: { readonly sections: Readonly<Record<string, unknown>> };
  }): CapabilityFacts {
    const section = state.document.sections[CAPABILITIES_SECTION];
    if (section === null || typeof section !== 'object') return {};
    const out: Record<string, CapabilityFact> = {};
    for (const [name, fact] of Object.entries(section as Record<string, unknown>)) {
      const f = fact as Partial<CapabilityFact> | null;
      if (f !== null && typeof f === 'object' && typeof f.offered === 'boolean' && typeof f.learnedAt === 'string') {
        out[name] = {
          offered: f.offered,
          learnedAt: f.learnedAt,
          evidence: typeof f.evidence === 'string' ? f.evidence : '',
        };
      }
    }
    return out;
  }

  /** What is known of `name` (this run's observation first, then state). */
  fact(name: string): CapabilityFact | undefined {
    return this.seen.get(name) ?? Capabilities.facts(this.deps.state)[name];
  }

  /**
   * Whether to use `name` now: unknown or offered, or absent for longer than the re-check interval
   * (then the use is the re-check). Absent within the interval: skip it, or fall back.
   */
  usable(name: string): boolean {
    const fact = this.fact(name);
    if (fact === undefined || fact.offered) return true;
    if (this.seen.has(name)) return false;
    const at = Date.parse(fact.learnedAt);
    return Number.isNaN(at) || this.deps.clock.now() - at >= this.recheckMs;
  }

  /** Record an answer that proves `name` offered (an answer in the expected shape). Free when already known. */
  async offered(name: string, evidence: string): Promise<void> {
    await this.learn(name, true, evidence);
  }

  /** Record an answer that proves `name` absent (see `absenceIn`). */
  async absent(name: string, evidence: string): Promise<void> {
    await this.learn(name, false, evidence);
  }

  private async learn(name: string, offered: boolean, evidence: string): Promise<void> {
    const before = this.fact(name);
    const now = new Date(this.deps.clock.now()).toISOString();
    const fact: CapabilityFact = { offered, learnedAt: now, evidence };
    const key = `${name}|${offered}`;
    if (this.told.has(key)) return;
    this.told.add(key);
    this.seen.set(name, fact);
    // Offered and known offered: nothing to write (a write per use would cost a state write each time).
    if (before?.offered === true && offered) return;
    const { logger } = this.deps;
    const fields = { capability: name, offered, evidence };
    if (before === undefined) {
      if (offered) logger.debug(fields, `${name}: offered by this server; kept in state`);
      else
        logger.info(
          fields,
          `${name}: not offered by this server (${evidence}); skipped or replaced, kept in state and asked again after ${Math.round(this.recheckMs / 3_600_000)} h`,
        );
    } else if (before.offered !== offered) {
      logger.warn(
        { ...fields, was: before.offered, wasLearnedAt: before.learnedAt, wasEvidence: before.evidence },
        `${name}: ${offered ? 'now offered' : 'no longer offered'} by this server (was ${before.offered ? 'offered' : 'absent'} since ${before.learnedAt}: ` +
          `${before.evidence}; now: ${evidence}); ${offered ? 'used again' : 'skipped or replaced from now on'}`,
      );
    } else {
      logger.debug(fields, `${name}: still not offered by this server (re-checked)`);
    }
    await this.deps.state.updateSection<CapabilityFacts>(CAPABILITIES_SECTION, (current) => ({
      ...(current ?? {}),
      [name]: fact,
    }));
  }
}
