import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { RESOURCES } from '../../connectors/index.js';
import { SEARCH_RANGE_MS } from '../../src/analysts/searches.js';
import type { Emulator } from '../../emulator/index.js';
import { DuckDbDestination } from '../../src/load/duckdb/destination.js';
import { jsonLines, runCli } from '../fakes/cli.js';
import { dbPathOf, readTable, statePathOf } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

/** What the emulator's search answers for one project over [from, to): event id → relevance score. */
async function searchDirectly(
  emu: Emulator,
  project: string,
  params: Record<string, string>,
  fromMs: number,
  toMs: number,
): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  let cursor: string | undefined;
  for (;;) {
    const query = new URLSearchParams({
      ...params,
      limit: '100',
      'timestamp[gte]': new Date(fromMs).toISOString(),
      'timestamp[lt]': new Date(toMs).toISOString(),
    });
    if (cursor !== undefined) query.set('cursor', cursor);
    const res = await fetch(`${emu.url}/v1/events/search?${query.toString()}`, {
      headers: { authorization: `Bearer ${emu.apiKey}`, [emu.projectHeader]: project },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      data: { id: string; relevance_score: number }[];
      meta: { cursor: string | null; has_more: boolean };
    };
    for (const r of body.data) out.set(r.id, r.relevance_score);
    if (!body.meta.has_more || body.meta.cursor === null) return out;
    cursor = body.meta.cursor;
  }
}

async function query(d: string, sql: string): Promise<Record<string, unknown>[]> {
  // The published copy, as an analyst opens it: its views read Parquet, which needs more memory than
  // the sync's 32MB working limit (an analyst's DuckDB takes 80% of RAM by default).
  const db = await DuckDbDestination.open(dbPathOf(d), { readOnly: true, memoryLimitBytes: 512_000_000 });
  try {
    return await db.query(sql);
  } finally {
    await db.close();
  }
}

const PROJECTS = ['alpha', 'beta', 'default'];
const SEARCHES: readonly { name: string; args: string; params: Record<string, string> }[] = [
  { name: 'refunds', args: 'refunds=refund', params: { query: 'refund', mode: 'text' } },
  {
    name: 'denied',
    args: 'denied=access denied,mode=text,search_in=assistant_output',
    params: { query: 'access denied', mode: 'text', search_in: 'assistant_output' },
  },
  { name: 'orders', args: 'orders=order #\\d+,mode=regex', params: { query: 'order #\\d+', mode: 'regex' } },
];

describe('for analysts: saved searches, aggregates, the signals bridge, views and dbt sources (the real CLI, the real-service emulator, a DuckDB file)', () => {
  it('search_results equal the emulator search, event_counts the events table per day, event_signals the unnested arrays; the view and sources.yml cover every table', async () => {
    const emu = await emulator({ flavor: 'real', seed: 13, eventsPerProject: 200, enrichAfterMs: 0 });
    const d = dir();
    const sources = join(d, 'dbt', 'sources.yml');
    const args = [
      'sync',
      '--project',
      '*',
      '--resources',
      'events,conversations,signals',
      '--aggregates',
      '--dbt-sources',
      sources,
      '--json',
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
      ...SEARCHES.flatMap((s) => ['--search', s.args]),
    ];
    const first = await runCli(emu, args);
    expect(first.code, first.stderr).toBe(0);
    const firstRun = JSON.parse(first.stdout) as {
      runId: string;
      startedAt: string;
      streams: { resource: string; scope: string; outcome: string }[];
    };
    expect(
      firstRun.streams
        .filter((s) => s.resource === 'search_results')
        .map((s) => s.scope)
        .sort(),
    ).toEqual(SEARCHES.flatMap((s) => PROJECTS.map((p) => `${s.name}@${p}`)).sort());

    emu.addEvents('alpha', 30);
    // A lookback past the 14-day range: the second run re-reads every match (as a replay would).
    const second = await runCli(emu, [...args, '--lookback', '20d']);
    expect(second.code, second.stderr).toBe(0);
    const secondRun = JSON.parse(second.stdout) as { runId: string; startedAt: string };
    const runStart = Date.parse(secondRun.startedAt);

    // 1. Saved searches: per search and project, exactly the events the search endpoint returns over
    //    its 14-day range (the second run's), with its scores; older matches of the first run stay.
    const results = await readTable(d, 'search_results');
    for (const s of SEARCHES) {
      for (const project of PROJECTS) {
        const expected = await searchDirectly(emu, project, s.params, runStart - SEARCH_RANGE_MS, runStart);
        const firstWindow = await searchDirectly(
          emu,
          project,
          s.params,
          Date.parse(firstRun.startedAt) - SEARCH_RANGE_MS,
          Date.parse(firstRun.startedAt),
        );
        const got = results.filter((r) => r.search_name === s.name && r.project_id === project);
        expect(new Set(got.map((r) => r.event_id)), `${s.name} ${project}`).toEqual(
          new Set([...expected.keys(), ...firstWindow.keys()]),
        );
        for (const [id, score] of expected) expect(got.find((r) => r.event_id === id)?.relevance_score).toBe(score);
        expect(expected.size, `${s.name} ${project} matches something`).toBeGreaterThan(0);
      }
    }
    // Keyed: one row per (project, search, event); when first matched survives the re-read.
    expect(
      new Set(results.map((r) => `${String(r.project_id)}|${String(r.search_name)}|${String(r.event_id)}`)).size,
    ).toBe(results.length);
    const seenTwice = results.filter(
      (r) => r.first_matched_at === firstRun.startedAt && r.last_matched_at === secondRun.startedAt,
    );
    expect(seenTwice.length).toBe(
      results.length - results.filter((r) => r.first_matched_at === secondRun.startedAt).length,
    );
    expect(seenTwice.length).toBeGreaterThan(10);
    expect(new Set(results.map((r) => r._run_id))).toEqual(new Set([secondRun.runId]));
    const newOnes = results.filter((r) => r.first_matched_at === secondRun.startedAt);
    expect(newOnes.every((r) => r.project_id === 'alpha')).toBe(true);

    // 2. event_counts per day equal the events table's own counts per day (every project, every day).
    const counts = await query(
      d,
      `SELECT project_id, CAST(bucket_start AS VARCHAR) AS day, event_count FROM event_counts WHERE interval = 'day' AND event_count > 0 ORDER BY 1, 2`,
    );
    const own = await query(
      d,
      `SELECT project_id, CAST(date_trunc('day', timestamp) AS VARCHAR) AS day, COUNT(*) AS event_count FROM events GROUP BY 1, 2 ORDER BY 1, 2`,
    );
    expect(counts.length).toBeGreaterThan(20);
    expect(counts).toEqual(own);
    // Facets: today's snapshot per project and field, counts as the events table has them over the window.
    const facets = await query(
      d,
      `SELECT project_id, value, event_count, window_from FROM event_facets WHERE field = 'event_name' AND as_of = TIMESTAMPTZ '${secondRun.startedAt}' ORDER BY 1, 2`,
    );
    const from = String(facets[0]?.window_from);
    const byName = await query(
      d,
      `SELECT project_id, event_name AS value, COUNT(*) AS event_count FROM events WHERE timestamp >= TIMESTAMPTZ '${from}' AND timestamp < TIMESTAMPTZ '${secondRun.startedAt}' GROUP BY 1, 2 ORDER BY 1, 2`,
    );
    expect(facets.map((f) => [f.project_id, f.value, f.event_count])).toEqual(
      byName.map((f) => [f.project_id, f.value, f.event_count]),
    );

    // 3. The bridge: exactly the unnested signals arrays of the events table, and of the API.
    const bridge = await query(
      d,
      `SELECT project_id, event_id, ordinal, signal_id, signal_name, score FROM event_signals ORDER BY 1, 2, 3`,
    );
    const unnested = await query(
      d,
      `SELECT e.project_id, e.id AS event_id, CAST(j.key AS BIGINT) AS ordinal, j.value->>'$.id' AS signal_id, j.value->>'$.name' AS signal_name, CAST(j.value->'$.score' AS DOUBLE) AS score
         FROM events e, json_each(e.signals) j ORDER BY 1, 2, 3`,
    );
    expect(bridge.length).toBeGreaterThan(50);
    expect(bridge).toEqual(unnested);
    const api = emu
      .snapshot('events')
      .flatMap((e) =>
        ((e.signals ?? []) as { id: string }[]).map((s, i) => `${String(e.project_id)}|${String(e.id)}|${i}|${s.id}`),
      );
    expect(
      new Set(
        bridge.map((b) => `${String(b.project_id)}|${String(b.event_id)}|${String(b.ordinal)}|${String(b.signal_id)}`),
      ),
    ).toEqual(new Set(api));

    // The view: every event that names a conversation, numbered within it.
    const view = await query(
      d,
      `SELECT COUNT(*) AS n, COUNT(DISTINCT (project_id, convo_id)) AS convos, MAX(turn) AS most, COUNT(convo_started_at) AS joined FROM conversation_events`,
    );
    const withConvo = await query(
      d,
      `SELECT COUNT(*) AS n, COUNT(DISTINCT (project_id, convo_id)) AS convos FROM events WHERE convo_id IS NOT NULL`,
    );
    expect(view[0]).toMatchObject({ n: withConvo[0]?.n, convos: withConvo[0]?.convos });
    expect(Number(view[0]?.joined)).toBeGreaterThan(0);

    // 4. sources.yml (written by sync --dbt-sources) lists every table and column, each described.
    const doc = parseYaml(readFileSync(sources, 'utf8')) as {
      sources: {
        name: string;
        tables: { name: string; description: string; columns: { name: string; description: string }[] }[];
      }[];
    };
    const tables = await query(
      d,
      `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'main' ORDER BY table_name, ordinal_position`,
    );
    const listed = doc.sources[0]?.tables ?? [];
    // Every table but query-sync's own state (not for analysts: marks and checkpoints as JSON) and the
    // published copy's record of itself (_query_sync_published: as-of, run id).
    const expectedTables = [...new Set(tables.map((t) => String(t.table_name)))]
      .filter((t) => t !== '_query_sync_state' && t !== '_query_sync_published')
      .sort();
    expect(listed.map((t) => t.name).sort()).toEqual(expectedTables);
    expect(expectedTables).toEqual([
      '_query_sync_runs',
      '_query_sync_schema_changes',
      'conversation_events',
      'conversations',
      'event_counts',
      'event_facets',
      'event_signals',
      'events',
      'search_results',
      'signals',
    ]);
    for (const t of listed) {
      expect(
        t.columns.map((c) => c.name),
        t.name,
      ).toEqual(tables.filter((c) => c.table_name === t.name).map((c) => c.column_name));
      expect(t.description.length).toBeGreaterThan(10);
      for (const c of t.columns) expect(c.description, `${t.name}.${c.name}`).toMatch(/\w/);
    }
    // A resource's table is described by its connector (one file to add a resource: docs/development.md).
    for (const r of RESOURCES.filter((r) => expectedTables.includes(r.name)))
      expect(listed.find((t) => t.name === r.name)?.description, r.name).toBe(r.description);
    // The command writes the same file from the warehouse alone.
    const out = join(d, 'again.yml');
    const cmd = await runCli(emu, ['dbt-sources', '--duckdb-path', dbPathOf(d), '--out', out]);
    expect(cmd.code, cmd.stderr).toBe(0);
    expect(cmd.stdout).toMatch(/dbt sources: 10 tables written to/);
    expect(readFileSync(out, 'utf8')).toBe(readFileSync(sources, 'utf8'));
    // The new tables are recorded as schema changes of the run that created them.
    const changes = await readTable(d, '_query_sync_schema_changes');
    expect([...new Set(changes.filter((c) => c.change === 'new table').map((c) => c.table_name))].sort()).toEqual([
      'conversations',
      'event_counts',
      'event_facets',
      'event_signals',
      'events',
      'search_results',
      'signals',
    ]);
    expect(jsonLines(second.stderr).filter((l) => Number(l.level) >= 50)).toEqual([]);

    // 5. The example SQL of docs/analysts.md runs on this warehouse; the completeness check finds nothing.
    const readme = readFileSync(join(process.cwd(), 'docs', 'analysts.md'), 'utf8');
    const blocks = [...readme.matchAll(/<!-- analyst-sql -->\n```sql\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');
    expect(blocks.length).toBeGreaterThanOrEqual(5);
    for (const sql of blocks) {
      const rows = await query(d, sql.replace(/;\s*$/, ''));
      if (sql.includes('differ')) expect(rows, sql).toEqual([]);
      else expect(rows.length, sql).toBeGreaterThan(0);
    }
  });

  it('--aggregates-interval hour: event_counts per hour equal the events table per hour, beside the daily rows, each interval refreshed on its own', async () => {
    const emu = await emulator({ seed: 14, eventsPerProject: 150, projects: ['alpha'] });
    const d = dir();
    const args = [
      'sync',
      '--project',
      'alpha',
      '--resources',
      'events',
      '--aggregates',
      '--quiet',
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
    ];
    expect((await runCli(emu, args)).code).toBe(0);
    // A progress line is written at each interval's tick, and an aggregate shows once it has started:
    // answered at once, the second run's few requests could all be over between two ticks (it failed
    // so, once in ten CI runs). Each answer now outlasts several 50 ms ticks.
    emu.configure({ latencyMs: 300 });
    const hourly = await runCli(emu, [
      ...args.filter((a) => a !== '--quiet'),
      '--aggregates-interval',
      'hour',
      '--progress-interval',
      '50ms',
    ]);
    expect(hourly.code, hourly.stderr).toBe(0);
    // The aggregates are in the progress display too, from the start of the run, with their planned requests.
    const progress = jsonLines(hourly.stderr).filter((l) => l.msg === 'progress');
    for (const [table, requests] of [
      ['event_counts', 1],
      ['event_facets', 3],
    ] as const) {
      const lines = progress.filter((l) => l.resource === table);
      expect(lines.length, table).toBeGreaterThan(0);
      for (const line of lines) expect(line, table).toMatchObject({ plannedPages: requests });
    }
    const byHour = await query(
      d,
      `SELECT CAST(bucket_start AS VARCHAR) AS hour, event_count FROM event_counts WHERE interval = 'hour' AND event_count > 0 ORDER BY 1`,
    );
    const own = await query(
      d,
      `SELECT CAST(date_trunc('hour', timestamp) AS VARCHAR) AS hour, COUNT(*) AS event_count FROM events GROUP BY 1 ORDER BY 1`,
    );
    expect(byHour.length).toBeGreaterThan(50);
    expect(byHour).toEqual(own);
    // History older than the refresh horizon is there: the hourly counts started from all history.
    const first = await query(
      d,
      `SELECT CAST(epoch_ms(MIN(bucket_start)) AS DOUBLE) AS ms FROM event_counts WHERE interval = 'hour'`,
    );
    expect(first[0]?.ms).toBeLessThan(Date.now() - 8 * 86_400_000);
    // The daily rows of the first run stay, and still add up to the events table.
    const days = await query(d, `SELECT SUM(event_count) AS n FROM event_counts WHERE interval = 'day'`);
    expect(days[0]?.n).toBe(BigInt(emu.snapshot('events').length));
    // Each interval keeps its own refresh: the hourly one counted all history, not only the recent horizon.
    const state = JSON.parse(readFileSync(statePathOf(d), 'utf8')) as {
      sections: { aggregates: Record<string, string> };
    };
    expect(Object.keys(state.sections.aggregates).sort()).toEqual(['alpha', 'alpha|hour']);

    const bad = await runCli(emu, [...args, '--aggregates-interval', 'minute']);
    expect(bad.code).toBe(2);
    expect(bad.stderr + bad.stdout).toMatch(/aggregates-interval/);
  });

  it('--search is checked when read: name, mode, search_in, threshold; the config file takes a list', async () => {
    const emu = await emulator({ flavor: 'real', seed: 13, eventsPerProject: 5 });
    const d = dir();
    const bad = await runCli(emu, [
      'sync',
      '--search',
      'x=y,mode=fuzzy',
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stdout + bad.stderr).toMatch(/search "x": mode must be one of text, semantic, regex, got "fuzzy"/);
    const noName = await runCli(emu, [
      'sync',
      '--search',
      'just words',
      '--duckdb-path',
      dbPathOf(d),
      '--state',
      statePathOf(d),
    ]);
    expect(noName.code).toBe(2);
    expect(noName.stdout + noName.stderr).toMatch(/expected name=query/);
  });
});
