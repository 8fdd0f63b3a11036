import type { SyncConfig } from '../config/index.js';
import type { QuerySyncError } from '../core/errors.js';
import type { RunSummary } from '../sync/engine.js';
import type { StreamResult } from '../sync/frame.js';
import { withoutContext } from './repeats.js';

/** The run summary as one JSON object (`sync --json`, `backfill --json`), and the settings a run records. */

/** One stream of the JSON summary. */
interface StreamJson {
  readonly resource: string;
  readonly scope: string;
  readonly outcome: StreamResult['outcome'];
  readonly rows: number;
  readonly pages: number;
  readonly windows: number;
  readonly requests: number;
  readonly retries: number;
  readonly rateLimited: number;
  readonly waitedSeconds: number;
  readonly backoffSeconds: number;
  readonly seconds: number;
  readonly error?: ErrorJson;
  /** Rows of projects not asked for (dropped), a page cap: docs/list-semantics.md. */
  readonly lists?: StreamResult['lists'];
  /** Skipped, not failed: what this server lacks. */
  readonly lacking?: string;
  /** Per-event traces: events of this scope still owed their traces when the run ended. */
  readonly owed?: number;
}

interface ErrorJson {
  readonly code: string;
  readonly name: string;
  /** Without the "[resource, project]" prefix: the stream says which. */
  readonly message: string;
}

/** `sync --json`: one object a scheduler can read. */
export interface RunJson {
  readonly command: string;
  readonly ok: boolean;
  readonly exitCode: number;
  readonly startedAt?: string;
  readonly seconds?: number;
  readonly totals?: {
    readonly rows: number;
    readonly pages: number;
    readonly requests: number;
    readonly retries: number;
    readonly rateLimited: number;
  };
  readonly streams: readonly StreamJson[];
  /** Distinct errors, each with the streams it failed (a bad key fails them all with one error). */
  readonly errors: readonly (ErrorJson & { readonly streams: readonly string[] })[];
}

export function runJson(command: string, summary: RunSummary, exitCode: number): RunJson {
  const streams = summary.streams.map(
    (s): StreamJson => ({
      resource: s.resource,
      scope: s.scope,
      outcome: s.outcome,
      rows: s.rows,
      pages: s.pages,
      windows: s.windows,
      requests: s.stats.requests,
      retries: s.stats.retries,
      rateLimited: s.stats.rateLimited,
      waitedSeconds: round1(s.stats.waitedMs / 1000),
      backoffSeconds: round1(s.stats.backoffMs / 1000),
      seconds: round1(s.seconds),
      ...(s.lists === undefined ? {} : { lists: s.lists }),
      ...(s.outcome !== 'ok' && s.error !== undefined ? { error: errorJson(s.error) } : {}),
      ...(s.lacking === undefined ? {} : { lacking: s.lacking }),
      ...(s.owed === undefined ? {} : { owed: s.owed }),
    }),
  );
  const errors = new Map<string, ErrorJson & { streams: string[] }>();
  for (const s of streams) {
    if (s.error === undefined) continue;
    const key = `${s.error.name}|${s.error.message}`;
    const e = errors.get(key) ?? { ...s.error, streams: [] };
    e.streams.push(`${s.resource} ${s.scope}`);
    errors.set(key, e);
  }
  const sum = (f: (s: StreamJson) => number): number => streams.reduce((n, s) => n + f(s), 0);
  return {
    command,
    ok: summary.ok,
    exitCode,
    startedAt: summary.startedAt,
    seconds: round1(summary.seconds),
    totals: {
      rows: sum((s) => s.rows),
      pages: sum((s) => s.pages),
      requests: sum((s) => s.requests),
      retries: sum((s) => s.retries),
      rateLimited: sum((s) => s.rateLimited),
      ...(streams.some((s) => s.owed !== undefined) ? { owed: sum((s) => s.owed ?? 0) } : {}),
    },
    streams,
    errors: [...errors.values()],
  };
}

/** A run that failed before any stream ran (a held lock, an unreadable state file). */
export function failedRunJson(command: string, error: unknown, exitCode: number): RunJson {
  const e = errorJson(error instanceof Error ? error : new Error(String(error)));
  return { command, ok: false, exitCode, streams: [], errors: [{ ...e, streams: [] }] };
}

function errorJson(error: Error): ErrorJson {
  return {
    code: (error as Partial<QuerySyncError>).code ?? 'E_UNKNOWN',
    name: error.name,
    message: withoutContext(error.message),
  };
}

const round1 = (n: number): number => Math.round(n * 10) / 10;

/** What a run records of its settings in `_query_sync_runs` (never a secret: no key, no salt). */
export function runSettings(config: SyncConfig): Record<string, unknown> {
  return {
    project: config.project ?? null,
    projectIds: config.projectIds ?? null,
    resources: config.resources.map((r) => r.name),
    lookbackMs: config.lookbackMs,
    // The budget the run was given: the report draws its requests against it.
    maxRpm: config.limits.maxRpm,
    maxRps: config.limits.maxRps,
    excludedColumns: config.privacy.exclude,
    hashedColumns: config.privacy.hash,
  };
}
