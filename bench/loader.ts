/**
 * `npm run bench:loader`: the CPU a first sync's normalizing and DuckDB writes cost, apart from the
 * HTTP client, the emulator and the machine's load (issue 34 item 2). Normalizes
 * BENCH_ROWS new events shaped like the emulator's (text, JSON, arrays; a third with a signal),
 * then writes them in batches of BENCH_BATCH with a state row each into a fresh DuckDB file at the
 * default memory limit, and prints the CPU seconds of each part (`process.cpuUsage`: all threads,
 * DuckDB's too). Run it under the CLI's own V8 flag to compare builds:
 *
 *   node scripts/build.mjs && node --optimize-for-size dist/bench/loader.js
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { events } from '../connectors/events.js';
import type { ApiRecord, Row } from '../src/core/types.js';
import { DuckDbDestination } from '../src/load/duckdb/destination.js';
import { SchemaTracker } from '../src/normalize/normalize.js';

const ROWS = Number(process.env.BENCH_ROWS ?? 40_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 400);
const at = '2026-11-29T00:00:00.000Z';

function record(i: number): ApiRecord {
  const time = new Date(Date.UTC(2026, 10, 1) + i * 1000).toISOString();
  return {
    id: `evt-${i}`,
    event_name: i % 2 === 0 ? 'message' : 'agent_step',
    user_id: `user_${i % 500}`,
    convo_id: `conv_${Math.floor(i / 7)}`,
    timestamp: time,
    received_at: time,
    user_input: `Translate to French: "the quick brown fox" ${i} 请帮我翻译这段话`,
    assistant_output: `Oh no! 🐈‍⬛🍵 Blot it with a towel first. Cheers. ${'lorem ipsum '.repeat(20)}`,
    model: 'gpt-4o',
    topics: ['translation', 'refunds', 'poetry'],
    tool_calls: [
      { tool_name: 'search_docs', status: 'OK', duration_ms: 227, started_at: time, span_id: 'f5425d2e2b1321cc' },
    ],
    signals: i % 3 === 0 ? [{ signal_id: `sig_${i % 40}`, score: 0.5 }] : [],
    feature_flags: { new_ui: 'true', ranking_v2: 'false', variant: 'control' },
    properties: { plan: 'free', region: 'eu-west-1', app: { version: '1.9.0', build: 1187 }, latency_ms: 2552.91 },
  };
}

const cpu = (since: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
};

const tracker = new SchemaTracker(events, undefined, 'bench');
const records = Array.from({ length: ROWS }, (_, i) => record(i));
let started = process.cpuUsage();
const rows: Row[] = records.map((r) => tracker.normalize(r, 'default', at));
const normalizeCpu = cpu(started);

const dir = mkdtempSync(join(tmpdir(), 'loader-bench-'));
const db = await DuckDbDestination.open(join(dir, 'w.duckdb'));
try {
  const wall = performance.now();
  started = process.cpuUsage();
  for (let from = 0; from < ROWS; from += BATCH) {
    const value = JSON.stringify({ through: from, windows: Array.from({ length: 20 }, (_, k) => ({ k, from: at })) });
    await db.write({
      table: tracker.schema,
      rows: rows.slice(from, from + BATCH),
      state: { rows: [{ key: 'stream:events:default', value }] },
    });
  }
  const writeCpu = cpu(started);
  const seconds = (performance.now() - wall) / 1000;
  const stored = await db.count('events');
  const bridged = await db.count('event_signals');
  process.stdout.write(
    `loader: ${ROWS} events normalized in ${normalizeCpu.toFixed(2)} CPU-s; written in batches of ${BATCH} in ` +
      `${writeCpu.toFixed(2)} CPU-s (${seconds.toFixed(1)} s wall); ${stored} rows, ${bridged} bridge rows\n`,
  );
  if (stored !== ROWS) process.exitCode = 1;
} finally {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
}
