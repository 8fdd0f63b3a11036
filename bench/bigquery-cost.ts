/**
 * What the BigQuery destination costs on a schedule: for a 90-day history at 1M events a day and a
 * sync every 15 minutes, the bytes each MERGE scans per table (from the partitions it touches) and
 * the daily job counts against BigQuery's quotas, for this design and for the previous one.
 *
 *   npm run bench:bigquery-cost
 *
 * Row sizes are measured, not assumed: the emulator's records, normalized and encoded by the real
 * code (`encodeRow`), give the bytes per row of each table and the spans per event. Key buckets
 * touched are counted with the real `keyBucket` over random keys. The activity model (users and
 * conversations in the table and touched per run) is stated below; change it to yours. Bytes are
 * NDJSON bytes, a proxy for BigQuery's logical bytes (within tens of percent: INT64 and TIMESTAMP
 * are 8 bytes there, digits here). On-demand queries bill at least 10 MB per table referenced.
 *
 * The last section sets the MERGE of users and conversations against the bytes of the rows a run
 * touches, for the merge layout, for the best any in-place MERGE can do under BigQuery's DML billing
 * and partition limits, and for the change-log layout read through a view (built; see
 * docs/bigquery-cost.md). It exits 1 when the change log's bill per run is over 2× the touched bytes.
 */
import { RESOURCES } from '../connectors/index.js';
import { startEmulator } from '../emulator/index.js';
import type { TableSchema } from '../src/core/types.js';
import { KEY_BUCKETS, encodeRow, keyBucket, partitionSpec } from '../src/load/bigquery/rows.js';
import { SYNCED_AT_COLUMN } from '../src/core/table-schema.js';
import { SchemaTracker } from '../src/normalize/normalize.js';

const EVENTS_PER_DAY = 1_000_000;
const DAYS = 90;
const RUNS_PER_DAY = 96; // every 15 minutes
const PROJECTS = 3;
/** Activity model (assumptions, printed). */
const USERS_IN_TABLE = 2_000_000;
const USERS_TOUCHED_PER_RUN = 5_000;
const CONVERSATIONS_PER_DAY = 100_000;
const CONVERSATIONS_TOUCHED_PER_RUN = 8_000;
const SIGNALS_PER_PROJECT = 40;
/** Runs whose events span two days: the first after midnight (its lookback reaches back). */
const TWO_DAY_RUNS = 1;

const MB = 1024 * 1024;
const GB = 1024 * MB;
const BILL_MIN = 10 * MB;

interface Measured {
  readonly bytesPerRow: number;
  readonly rows: number;
  /** Bytes per row of the columns a change log's compaction DELETE references (key, version, `_synced_at`). */
  readonly compactionBytesPerRow: number;
}

const emu = await startEmulator({ seed: 5, eventsPerProject: 3_000 });
const measured = new Map<string, Measured>();
/** BigQuery's logical bytes of an event's `id` and `project_id` (STRING: 2 + UTF-8 bytes), averaged. */
let eventIdBytes = 0;
let projectIdBytes = 0;
try {
  const syncedAt = new Date().toISOString();
  for (const resource of RESOURCES) {
    const records = emu.snapshot(resource.name);
    const tracker = new SchemaTracker(resource);
    const rows = records.map((r) =>
      tracker.normalize(r, typeof r['project_id'] === 'string' ? undefined : 'default', syncedAt),
    );
    const table: TableSchema = tracker.schema;
    const spec = partitionSpec(table);
    const tuple = [...table.key, ...(table.versionColumn === undefined ? [] : [table.versionColumn]), SYNCED_AT_COLUMN];
    let bytes = 0;
    let narrow = 0;
    for (const row of rows) {
      const line = encodeRow(table, row, spec, table.fullRefresh === true ? 'x'.repeat(32) : undefined).line;
      bytes += Buffer.byteLength(line);
      const parsed = JSON.parse(line) as Record<string, unknown>;
      narrow += Buffer.byteLength(JSON.stringify(Object.fromEntries(tuple.map((c) => [c, parsed[c] ?? null]))));
    }
    if (resource.name === 'events' && rows.length > 0) {
      const logical = (v: unknown): number => 2 + Buffer.byteLength(String(v ?? ''), 'utf8');
      eventIdBytes = rows.reduce((n, r) => n + logical(r['id']), 0) / rows.length;
      projectIdBytes = rows.reduce((n, r) => n + logical(r['project_id']), 0) / rows.length;
    }
    measured.set(resource.name, {
      bytesPerRow: rows.length === 0 ? 0 : bytes / rows.length,
      rows: rows.length,
      compactionBytesPerRow: rows.length === 0 ? 0 : narrow / rows.length,
    });
  }
} finally {
  await emu.close();
}

const size = (name: string): number => measured.get(name)?.bytesPerRow ?? 0;
const eventsMeasured = measured.get('events')?.rows ?? 1;
const spansPerEvent = (measured.get('traces')?.rows ?? 0) / eventsMeasured;

/** Distinct key buckets k random keys fall in (the real hash). */
function bucketsTouched(k: number): number {
  const seen = new Set<number>();
  const table: TableSchema = { name: 't', key: ['project_id', 'id'], columns: [] };
  for (let i = 0; i < k; i += 1) seen.add(keyBucket(table, { project_id: 'p', id: `k${i}_${Math.random()}` }));
  return seen.size;
}

const eventsPerRun = EVENTS_PER_DAY / RUNS_PER_DAY;
const eventDayBytes = EVENTS_PER_DAY * size('events');
const spanDayBytes = EVENTS_PER_DAY * spansPerEvent * size('traces');
const usersTableBytes = USERS_IN_TABLE * size('users');
const conversationsTableBytes = CONVERSATIONS_PER_DAY * DAYS * size('conversations');
const signalsTableBytes = SIGNALS_PER_PROJECT * PROJECTS * size('signals');
const userBuckets = bucketsTouched(USERS_TOUCHED_PER_RUN);
const convoBuckets = bucketsTouched(CONVERSATIONS_TOUCHED_PER_RUN);

interface Line {
  readonly table: string;
  /** Bytes one MERGE scans, typical run. */
  readonly perMerge: number;
  /** MERGE statements a day. */
  readonly mergesPerDay: number;
  /** Bytes scanned a day (all MERGEs, with the minimum bill). */
  readonly perDay: number;
  readonly loadsPerDay: number;
  /** Other query jobs a day (the unchanged-rows check). */
  readonly queriesPerDay: number;
}

const avgEventMerge = eventDayBytes / 2 + eventsPerRun * size('events'); // today's partition averages half a day
const avgSpanMerge = spanDayBytes / 2 + eventsPerRun * spansPerEvent * size('traces');
const twoDay = (merge: number, day: number): number =>
  (RUNS_PER_DAY - TWO_DAY_RUNS) * Math.max(BILL_MIN, merge) + TWO_DAY_RUNS * Math.max(BILL_MIN, merge + day);

const now: Line[] = [
  {
    table: 'events',
    perMerge: avgEventMerge,
    mergesPerDay: RUNS_PER_DAY,
    perDay: twoDay(avgEventMerge, eventDayBytes),
    loadsPerDay: RUNS_PER_DAY,
    queriesPerDay: 0,
  },
  // One MERGE across projects (coalesced), today's partition.
  {
    table: 'traces',
    perMerge: avgSpanMerge,
    mergesPerDay: RUNS_PER_DAY,
    perDay: twoDay(avgSpanMerge, spanDayBytes),
    loadsPerDay: RUNS_PER_DAY,
    queriesPerDay: 0,
  },
  (() => {
    const perMerge = usersTableBytes * (userBuckets / KEY_BUCKETS) + USERS_TOUCHED_PER_RUN * size('users');
    return {
      table: 'users',
      perMerge,
      mergesPerDay: RUNS_PER_DAY,
      perDay: RUNS_PER_DAY * Math.max(BILL_MIN, perMerge),
      loadsPerDay: RUNS_PER_DAY,
      queriesPerDay: 0,
    };
  })(),
  (() => {
    const perMerge =
      conversationsTableBytes * (convoBuckets / KEY_BUCKETS) + CONVERSATIONS_TOUCHED_PER_RUN * size('conversations');
    return {
      table: 'conversations',
      perMerge,
      mergesPerDay: RUNS_PER_DAY,
      perDay: RUNS_PER_DAY * Math.max(BILL_MIN, perMerge),
      loadsPerDay: RUNS_PER_DAY,
      queriesPerDay: 0,
    };
  })(),
  // Unchanged definitions: one hash check (reads the row_hash column only), no load, no MERGE.
  {
    table: 'signals',
    perMerge: 0,
    mergesPerDay: 0,
    perDay: RUNS_PER_DAY * BILL_MIN,
    loadsPerDay: 0,
    queriesPerDay: RUNS_PER_DAY,
  },
];

const before: Line[] = [
  {
    table: 'events',
    perMerge: avgEventMerge,
    mergesPerDay: RUNS_PER_DAY,
    perDay: twoDay(avgEventMerge, eventDayBytes),
    loadsPerDay: RUNS_PER_DAY,
    queriesPerDay: 0,
  },
  // One MERGE per project, each scanning the day's partition (all projects' spans).
  {
    table: 'traces',
    perMerge: avgSpanMerge,
    mergesPerDay: RUNS_PER_DAY * PROJECTS,
    perDay: PROJECTS * twoDay(avgSpanMerge, spanDayBytes),
    loadsPerDay: RUNS_PER_DAY * PROJECTS,
    queriesPerDay: 0,
  },
  {
    table: 'users',
    perMerge: usersTableBytes,
    mergesPerDay: RUNS_PER_DAY,
    perDay: RUNS_PER_DAY * Math.max(BILL_MIN, usersTableBytes),
    loadsPerDay: RUNS_PER_DAY,
    queriesPerDay: 0,
  },
  {
    table: 'conversations',
    perMerge: conversationsTableBytes,
    mergesPerDay: RUNS_PER_DAY,
    perDay: RUNS_PER_DAY * Math.max(BILL_MIN, conversationsTableBytes),
    loadsPerDay: RUNS_PER_DAY,
    queriesPerDay: 0,
  },
  {
    table: 'signals',
    perMerge: signalsTableBytes,
    mergesPerDay: RUNS_PER_DAY * PROJECTS,
    perDay: RUNS_PER_DAY * PROJECTS * BILL_MIN,
    loadsPerDay: RUNS_PER_DAY * PROJECTS,
    queriesPerDay: 0,
  },
];

const fmt = (bytes: number): string =>
  bytes >= GB ? `${(bytes / GB).toFixed(2)} GB` : `${(bytes / MB).toFixed(1)} MB`;
const out = (line: string): void => void process.stdout.write(`${line}\n`);

out(
  `measured row sizes (NDJSON bytes): ${[...measured].map(([t, m]) => `${t} ${Math.round(m.bytesPerRow)} B`).join(', ')}; spans per event ${spansPerEvent.toFixed(2)}`,
);
out(
  `model: ${EVENTS_PER_DAY.toLocaleString('en')} events/day for ${DAYS} days, ${RUNS_PER_DAY} runs/day (15 min), ${PROJECTS} projects; ` +
    `users ${USERS_IN_TABLE.toLocaleString('en')} in the table, ${USERS_TOUCHED_PER_RUN.toLocaleString('en')} touched a run (${userBuckets} of ${KEY_BUCKETS} key buckets); ` +
    `conversations ${(CONVERSATIONS_PER_DAY * DAYS).toLocaleString('en')} in the table, ${CONVERSATIONS_TOUCHED_PER_RUN.toLocaleString('en')} touched a run (${convoBuckets} buckets); ` +
    `${SIGNALS_PER_PROJECT} signals per project, unchanged`,
);
out(
  `table sizes: events ${fmt(eventDayBytes * DAYS)} (${fmt(eventDayBytes)}/day), traces ${fmt(spanDayBytes * DAYS)}, users ${fmt(usersTableBytes)}, conversations ${fmt(conversationsTableBytes)}, signals ${fmt(signalsTableBytes)}`,
);
out('');
out(
  'table          | bytes per MERGE: before → now | MERGEs/day: before → now | scanned/day (≥10 MB billed per job): before → now | load jobs/day: before → now',
);
let totalBefore = 0;
let totalNow = 0;
for (const n of now) {
  const b = before.find((x) => x.table === n.table) as Line;
  totalBefore += b.perDay;
  totalNow += n.perDay;
  out(
    `${n.table.padEnd(14)} | ${fmt(b.perMerge).padStart(10)} → ${fmt(n.perMerge).padStart(10)} | ${String(b.mergesPerDay).padStart(4)} → ${String(n.mergesPerDay).padStart(3)} | ` +
      `${fmt(b.perDay).padStart(10)} → ${fmt(n.perDay).padStart(10)} | ${String(b.loadsPerDay).padStart(4)} → ${String(n.loadsPerDay).padStart(3)}`,
  );
}
out(
  `total scanned/day: before ${fmt(totalBefore)}, now ${fmt(totalNow)}; per 30 days: before ${fmt(totalBefore * 30)}, now ${fmt(totalNow * 30)}`,
);
const loads = now.reduce((n, l) => n + l.loadsPerDay, 0);
const dml = now.reduce((n, l) => n + l.mergesPerDay, 0);
const queries = now.reduce((n, l) => n + l.queriesPerDay, 0);
out('');
out('daily jobs against BigQuery quotas (https://cloud.google.com/bigquery/quotas):');
out(
  `  load jobs: ${loads}/day for the project (quota 100,000 per project per day); each goes into a fresh staging table, so the 1,500 per-table limit is used once per stage`,
);
out(
  `  MERGE (mutating DML): ${dml}/day, at most one per table at a time from one process (limit: 2 running + 20 queued per table; DML does not count toward table-modification quotas)`,
);
out(`  other query jobs: ${queries}/day (unchanged-rows checks); counts for status/verify on demand`);
out(
  `  partition modifications by load/query jobs on targets: 0 (only MERGE writes targets; quota 30,000 per partitioned table per day)`,
);
out('');
out('key-bucket pruning vs keys touched per run (users table as above):');
for (const k of [100, 500, 1_000, 5_000, 20_000]) {
  const b = bucketsTouched(k);
  out(
    `  ${String(k).padStart(6)} keys → ${String(b).padStart(4)} of ${KEY_BUCKETS} buckets → ${fmt(usersTableBytes * (b / KEY_BUCKETS) + k * size('users'))} per MERGE (unpartitioned: ${fmt(usersTableBytes)})`,
  );
}

// ---- users and conversations: bytes per MERGE against the bytes the batch touches -----------------

/**
 * BigQuery bills a MERGE that updates rows of a partitioned table for every column of every
 * partition it updates (t'), plus what it reads (q'); of an unpartitioned table, the whole table
 * (https://cloud.google.com/bigquery/docs/reference/standard-sql/dml-syntax#on-demand_query_size_calculation).
 * Clustering prunes what a query reads, at the granularity of storage blocks, not rows
 * (https://cloud.google.com/bigquery/docs/clustered-tables: blocks sized to the table; tables or
 * partitions under 64 MB gain little), so it lowers q', never t'. A table holds at most 10,000
 * partitions and one job may modify at most 4,000 (https://cloud.google.com/bigquery/quotas#partitioned_tables).
 */
const MAX_PARTITIONS_PER_TABLE = 10_000;
const MAX_PARTITIONS_PER_JOB = 4_000;
/** Expected distinct partitions k random keys fall in, of p equal ones. */
const partitionsHit = (k: number, p: number): number => p * (1 - (1 - 1 / p) ** k);

interface Keyed {
  readonly table: string;
  readonly tableBytes: number;
  readonly rows: number;
  readonly touched: number;
  readonly rowBytes: number;
  /** Share of a row's bytes in the columns the compaction DELETE references. */
  readonly narrowShare: number;
}
const narrowShare = (name: string): number =>
  (measured.get(name)?.compactionBytesPerRow ?? 0) / Math.max(1, size(name));
const keyed: Keyed[] = [
  {
    table: 'users',
    tableBytes: usersTableBytes,
    rows: USERS_IN_TABLE,
    touched: USERS_TOUCHED_PER_RUN,
    rowBytes: size('users'),
    narrowShare: narrowShare('users'),
  },
  {
    table: 'conversations',
    tableBytes: conversationsTableBytes,
    rows: CONVERSATIONS_PER_DAY * DAYS,
    touched: CONVERSATIONS_TOUCHED_PER_RUN,
    rowBytes: size('conversations'),
    narrowShare: narrowShare('conversations'),
  },
];
const failures: string[] = [];
const ratio = (bytes: number, touched: number): string =>
  `${(bytes / touched).toFixed(bytes / touched >= 10 ? 0 : 1)}×`;
out('');
out("users and conversations: one run's MERGE against the bytes of the rows it touches (target: within 2×)");
for (const t of keyed) {
  const touchedBytes = t.touched * t.rowBytes;
  const stage = touchedBytes;
  const nowBytes = t.tableBytes * (partitionsHit(t.touched, KEY_BUCKETS) / KEY_BUCKETS) + stage;
  const hitAtMax = partitionsHit(t.touched, MAX_PARTITIONS_PER_TABLE);
  const floorBytes = t.tableBytes * (hitAtMax / MAX_PARTITIONS_PER_TABLE) + stage;
  // Rows per partition needed for the touched partitions to hold at most 2× the touched bytes.
  const rowsPerPartitionFor2x = 2;
  const partitionsFor2x = Math.ceil(t.rows / rowsPerPartitionFor2x);
  out(`  ${t.table}: ${t.touched.toLocaleString('en')} rows touched = ${fmt(touchedBytes)} (of ${fmt(t.tableBytes)})`);
  out(
    `    merge layout, ${KEY_BUCKETS.toLocaleString('en')} key-bucket partitions:   ${fmt(nowBytes).padStart(10)} per MERGE = ${ratio(nowBytes, touchedBytes)}`,
  );
  out(
    `    best in-place MERGE, ${MAX_PARTITIONS_PER_TABLE.toLocaleString('en')} partitions (table max): ${fmt(floorBytes).padStart(10)} per MERGE = ${ratio(floorBytes, touchedBytes)}` +
      `${hitAtMax > MAX_PARTITIONS_PER_JOB ? ` — and refused: ${Math.round(hitAtMax).toLocaleString('en')} partitions modified > ${MAX_PARTITIONS_PER_JOB.toLocaleString('en')} per job` : ''}`,
  );
  out(
    `    clustering on the key, unpartitioned:           ${fmt(t.tableBytes + stage).padStart(10)} per MERGE = ${ratio(t.tableBytes + stage, touchedBytes)} (t is the whole table)`,
  );
  out(
    `    within 2× in place needs ≤ ${rowsPerPartitionFor2x} rows a partition: ${partitionsFor2x.toLocaleString('en')} partitions, ${Math.round(partitionsFor2x / MAX_PARTITIONS_PER_TABLE)}× BigQuery's limit`,
  );
  // The change-log layout (built: src/load/bigquery/log.ts): a run appends the batch to
  // <table>_changes with a load job (free: no query, nothing billed); <table> is a view of the latest
  // row per key. The compaction, once per --bq-compact-every, is a DELETE of the superseded rows
  // (safe while another process appends; a CREATE OR REPLACE TABLE was not). BigQuery's DML rule for
  // a partitioned table bills it q' + t': q' the columns it references (key, version, _synced_at),
  // read twice (the log and the subquery), t' every column of the partitions it deletes from: taken
  // as the whole log (latest rows plus the appends since the last compaction), since a day partition
  // of thousands of rows almost surely holds one that a later copy superseded.
  const logDayBytes = RUNS_PER_DAY * touchedBytes;
  const perRun = 0;
  const ctasBill = (days: number): number => Math.max(BILL_MIN, t.tableBytes + days * logDayBytes);
  const deleteBill = (days: number): number => {
    const log = t.tableBytes + days * logDayBytes;
    return Math.max(BILL_MIN, 2 * t.narrowShare * log + log);
  };
  const compaction = deleteBill(1);
  const logPerDay = RUNS_PER_DAY * perRun + compaction;
  const nowPerDay = RUNS_PER_DAY * Math.max(BILL_MIN, nowBytes);
  out(
    `    change log + view (--bq-upsert auto, new tables): ${fmt(perRun).padStart(6)} billed per run (a load job) = ${ratio(perRun, touchedBytes)} the touched bytes; ` +
      `one compaction a day ${fmt(compaction)} (${fmt(compaction / RUNS_PER_DAY)} a run amortized = ${ratio(compaction / RUNS_PER_DAY, touchedBytes)}); ` +
      `${fmt(logPerDay)}/day vs ${fmt(nowPerDay)}/day with the MERGE; a reader of the view scans up to ${fmt(logDayBytes)} more (the day's log)`,
  );
  out(
    `      compaction statement: DELETE of superseded rows ${fmt(compaction)} (references ${(t.narrowShare * 100).toFixed(0)} % of each row, twice, plus every column of the log) ` +
      `vs the earlier CREATE OR REPLACE TABLE ${fmt(ctasBill(1))} (one scan, but it lost rows appended while it ran)`,
  );
  // --bq-compact-every trades the compaction's share of each run against what a reader scans.
  for (const days of [1, 3, 7]) {
    const each = deleteBill(days);
    out(
      `      --bq-compact-every ${days * 24}h: compaction ${fmt(each)} (CTAS was ${fmt(ctasBill(days))}), ${fmt(each / (days * RUNS_PER_DAY))} a run amortized = ${ratio(each / (days * RUNS_PER_DAY), touchedBytes)}; ` +
        `a reader scans up to ${fmt(days * logDayBytes)} more`,
    );
  }
  if (perRun > 2 * touchedBytes)
    failures.push(`${t.table}: ${fmt(perRun)} billed per run > 2× the touched ${fmt(touchedBytes)}`);
}
// Traces read one event at a time: each run lists the events that owe their spans (the trace
// book, src/load/bigquery/trace-book.ts): the events' project_id, id, timestamp (TIMESTAMP: 8 B) and
// the book's row per event read (resource 'traces', project_id, parent_id, three 8-byte columns),
// over the days from --start on (all of them without it).
{
  const eventBytes = projectIdBytes + eventIdBytes + 8;
  const bookBytes = 2 + 'traces'.length + projectIdBytes + eventIdBytes + 3 * 8;
  const perEvent = eventBytes + bookBytes;
  const listing = (days: number): number => Math.max(BILL_MIN, EVENTS_PER_DAY * days * perEvent);
  // One listing per project and run (filtered on project_id, the first clustering column: its share), and per
  // events batch stored a listing of its day (a run's events fit one batch of 50,000 rows).
  const perRun = (days: number): number =>
    PROJECTS * Math.max(BILL_MIN, listing(days) / PROJECTS) + PROJECTS * Math.max(BILL_MIN, listing(1) / PROJECTS);
  out('');
  out(
    `traces per event, the owed listing (trace book): ${perEvent.toFixed(0)} B per event in range (events ${eventBytes.toFixed(0)} B + book ${bookBytes.toFixed(0)} B)`,
  );
  for (const [label, days] of [
    [`no --start (${DAYS} days)`, DAYS],
    ['--start 7 days ago', 7],
    ['--start 2 days ago', 2],
  ] as const)
    out(
      `  ${label.padEnd(22)} ${fmt(listing(days)).padStart(9)} a listing, ${fmt(perRun(days)).padStart(9)} a run, ${fmt(RUNS_PER_DAY * perRun(days)).padStart(9)}/day`,
    );
  // After a complete listing (`listedThrough`): per project an INFORMATION_SCHEMA.PARTITIONS query
  // (metadata, billed the minimum) and the listing of the days changed since (none, or the day new
  // events went to, which is also the settle horizon's), plus a full listing once a week.
  const metadata = PROJECTS * BILL_MIN;
  const quiet = metadata;
  // The day's listing, and as above the listing of the events batch stored.
  const oneDay = metadata + 2 * PROJECTS * Math.max(BILL_MIN, listing(1) / PROJECTS);
  const weekly = (PROJECTS * Math.max(BILL_MIN, listing(DAYS) / PROJECTS)) / 7;
  out(
    `  changed days only      ${fmt(quiet).padStart(9)} a run when nothing changed (metadata alone), ${fmt(oneDay).padStart(9)} a run with one day's new events, ` +
      `${fmt(RUNS_PER_DAY * oneDay + weekly).padStart(9)}/day with the weekly full listing`,
  );
}
if (failures.length > 0) {
  out(`FAIL: ${failures.join('; ')}`);
  process.exitCode = 1;
}
