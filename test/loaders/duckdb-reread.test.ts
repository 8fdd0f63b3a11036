import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { events } from '../../connectors/events.js';
import type { StateCommit } from '../../src/core/state-table.js';
import type { ApiRecord, Row } from '../../src/core/types.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { DEFAULT_MEMORY_LIMIT_BYTES } from '../../src/load/duckdb/memory.js';
import { SchemaTracker } from '../../src/normalize/normalize.js';
import { dir } from '../fakes/lifecycle.js';

const at = '2026-11-21T00:00:00.000Z';
const PROJECTS = ['alpha', 'beta', 'gamma'];
/** 30,000 events of ~1 KB in batches of 5,000 (DuckDB's default --batch-rows), as a re-read of all history writes them. */
const EVENTS = 30_000;
const BATCH = 5_000;

/** Event `i` as the API serves it in `version` 1 (first read) or 2 (enriched later: new text, a tool call, other signals). */
function event(i: number, version: 1 | 2): ApiRecord {
  return {
    id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    timestamp: new Date(Date.UTC(2026, 0, 1) + i * 60_000).toISOString(),
    event_name: 'chat',
    user_id: `user_${i % 500}`,
    convo_id: `c${i % 2000}`,
    user_input: `v${version} question ${i} ${'how do I configure the thing '.repeat(15)}`,
    assistant_output: `v${version} answer ${i} ${'you can do it like this '.repeat(8)}`,
    model: 'gpt-4o',
    signals: i % 3 === 0 ? [{ id: `sig_${version}`, name: 'frustration', score: 0.5 }] : [],
    properties: { plan: 'pro', locale: 'en', n: i, version },
    topics: ['billing', 'setup'],
    ...(version === 2
      ? { tool_calls: [{ tool_name: 'search_docs', status: 'OK', duration_ms: 42, started_at: at }] }
      : {}),
  } as ApiRecord;
}

/** A state change written with its batch, as the pipeline's checkpoints are. */
function checkpoint(value: string): StateCommit {
  return { rows: [{ key: 'stream:events:*', value }] };
}

describe('DuckDbDestination re-reading rows it already holds', () => {
  it('rewrites 30,000 existing events at the default memory limit: each row once, the newer values, its bridge rows and state with them', {
    timeout: 180_000,
  }, async () => {
    // DuckDB 1.5 keeps the new values of the rows it updates in memory that a checkpoint does
    // not free: before that was released, this second pass ran out of memory at 32MB ("failed to pin
    // block") after 100 s of writing batches in ever smaller parts.
    const path = join(dir(), 'w.duckdb');
    const t = new SchemaTracker(events);
    const project = (i: number): string => PROJECTS[i % PROJECTS.length] as string;
    const write = async (version: 1 | 2): Promise<DuckDbDestination> => {
      const db = await DuckDbDestination.open(path);
      for (let from = 0; from < EVENTS; from += BATCH) {
        const rows: Row[] = [];
        for (let i = from; i < from + BATCH; i++) rows.push(t.normalize(event(i, version), project(i), at));
        // The same key twice in one batch (a page repeated): the later copy is the one kept.
        if (version === 2) rows.unshift(t.normalize(event(from, 1), project(from), at));
        const result = await db.write({
          table: t.schema,
          rows,
          state: checkpoint(`{"version":${version},"through":${from + BATCH}}`),
        });
        expect(result.rows).toBe(BATCH);
      }
      return db;
    };
    await (await write(1)).close();

    // A later run with no state: every row arrives again, enriched.
    const db = await write(2);
    expect(await db.query("SELECT current_setting('memory_limit') AS m")).toEqual([
      { m: expect.stringMatching(/^3[01](\.\d+)? MiB$/) },
    ]);
    expect(DEFAULT_MEMORY_LIMIT_BYTES).toBe(32_000_000);
    expect(db.updateMemoryReleases).toBeGreaterThan(0);
    await db.close();

    const check = await DuckDbDestination.open(path, { memoryLimitBytes: 512_000_000 });
    expect(
      await check.query(`SELECT COUNT(*) AS n, COUNT(DISTINCT (project_id, id)) AS keys,
          COUNT(*) FILTER (WHERE user_input LIKE 'v2 %' AND assistant_output LIKE 'v2 %' AND tool_calls IS NOT NULL
            AND CAST(json_extract(properties, '$.version') AS INT) = 2) AS newer FROM events`),
    ).toEqual([{ n: BigInt(EVENTS), keys: BigInt(EVENTS), newer: BigInt(EVENTS) }]);
    // Each event in its project, with its own text.
    expect(
      await check.query(`SELECT id FROM events WHERE user_input NOT LIKE 'v2 question ' || CAST(CAST(split_part(id, '-', 5) AS BIGINT) AS VARCHAR) || ' %'
        OR project_id <> ['alpha', 'beta', 'gamma'][CAST(split_part(id, '-', 5) AS BIGINT) % 3 + 1] LIMIT 5`),
    ).toEqual([]);
    // The bridge was rewritten with its events: one row per event with a signal, the newer signal.
    expect(
      await check.query(
        "SELECT COUNT(*) AS n, COUNT(DISTINCT (project_id, event_id)) AS events, COUNT(*) FILTER (WHERE signal_id = 'sig_2') AS newer FROM event_signals",
      ),
    ).toEqual([{ n: BigInt(EVENTS / 3), events: BigInt(EVENTS / 3), newer: BigInt(EVENTS / 3) }]);
    // The state written with the last batch.
    expect(await check.readState()).toEqual([{ key: 'stream:events:*', value: `{"version":2,"through":${EVENTS}}` }]);
    await check.close();
  });
});
