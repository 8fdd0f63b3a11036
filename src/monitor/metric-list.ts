import { RUN_STATUSES, type RunFigures, type StreamFigures } from './figures.js';

/**
 * Every metric a run publishes (`--metrics-file`, `--pushgateway`), one entry each: its name, type,
 * help and labels, and how its samples come from the run's figures. docs/monitoring.md's list is
 * made from this table (`npm run docs:metrics`) and checked against it by a test.
 *
 * Prometheus' conventions (https://prometheus.io/docs/practices/naming/): the unit in the name, in
 * base units (seconds, bytes); `_total` on counters; `_timestamp_seconds` for instants. Labels are
 * only `resource`, `project`, `endpoint` and `status` (and build_info's `version`), each bounded by the configuration (no run id,
 * no error text). A counter counts this run (a run is a process: it starts at zero, as a restarted
 * exporter does, so `increase()` and `rate()` see each run whole).
 */

/** `version` is build_info's alone (one value per binary). */
type Label = 'resource' | 'project' | 'endpoint' | 'status' | 'version';

interface Sample {
  readonly labels: Readonly<Partial<Record<Label, string>>>;
  readonly value: number;
}

export interface MetricSpec {
  readonly name: string;
  readonly type: 'counter' | 'gauge';
  readonly help: string;
  readonly labels: readonly Label[];
  /**
   * The samples of a run. An empty list leaves the metric out of what is published: a Pushgateway
   * then keeps the value it holds (how `query_sync_last_success_timestamp_seconds` survives a
   * failed run), and a textfile has no line for it.
   */
  readonly samples: (f: RunFigures) => readonly Sample[];
}

const seconds = (ms: number): number => ms / 1000;
const perStream =
  (pick: (s: StreamFigures) => number) =>
  (f: RunFigures): Sample[] =>
    f.streams.map((s) => ({ labels: { resource: s.resource, project: s.project }, value: pick(s) }));
const one = (value: number | undefined): Sample[] => (value === undefined ? [] : [{ labels: {}, value }]);

export const METRICS: readonly MetricSpec[] = [
  {
    name: 'query_sync_build_info',
    type: 'gauge',
    help: 'Always 1; the version of query-sync that ran, as a label.',
    labels: ['version'],
    samples: (f) => [{ labels: { version: f.version }, value: 1 }],
  },
  {
    name: 'query_sync_last_run_start_timestamp_seconds',
    type: 'gauge',
    help: 'When the last run started (Unix time).',
    labels: [],
    samples: (f) => one(seconds(f.startedMs)),
  },
  {
    name: 'query_sync_last_run_end_timestamp_seconds',
    type: 'gauge',
    help: 'When the last run ended (Unix time); absent from what a running run publishes.',
    labels: [],
    samples: (f) => one(f.endedMs === undefined ? undefined : seconds(f.endedMs)),
  },
  {
    name: 'query_sync_last_run_duration_seconds',
    type: 'gauge',
    help: 'How long the last run took (while it runs: so far).',
    labels: [],
    samples: (f) => one(seconds((f.endedMs ?? f.nowMs) - f.startedMs)),
  },
  {
    name: 'query_sync_last_run_outcome',
    type: 'gauge',
    help: 'How the last run ended: 1 for its status (ok, failed, difference: a reconcile difference left, stopped, running), 0 for the others.',
    labels: ['status'],
    samples: (f) => RUN_STATUSES.map((status) => ({ labels: { status }, value: status === f.status ? 1 : 0 })),
  },
  {
    name: 'query_sync_last_run_exit_code',
    type: 'gauge',
    help: 'The exit code of the last run (docs/exit-codes.md); absent while it runs.',
    labels: [],
    samples: (f) => one(f.exitCode),
  },
  {
    name: 'query_sync_last_success_timestamp_seconds',
    type: 'gauge',
    help: 'When the last run that succeeded (exit 0) ended (Unix time); a failed run keeps the value.',
    labels: [],
    samples: (f) => one(f.lastSuccessMs === undefined ? undefined : seconds(f.lastSuccessMs)),
  },
  {
    name: 'query_sync_rows_total',
    type: 'counter',
    help: 'Rows written by the run, per resource and project.',
    labels: ['resource', 'project'],
    samples: perStream((s) => s.rows),
  },
  {
    name: 'query_sync_pages_total',
    type: 'counter',
    help: 'Pages read by the run, per resource and project.',
    labels: ['resource', 'project'],
    samples: perStream((s) => s.pages),
  },
  {
    name: 'query_sync_requests_total',
    type: 'counter',
    help: 'API requests sent by the run (retries included), per resource and project.',
    labels: ['resource', 'project'],
    samples: perStream((s) => s.requests),
  },
  {
    name: 'query_sync_retries_total',
    type: 'counter',
    help: 'Requests sent again after a failure or a 429, per resource and project.',
    labels: ['resource', 'project'],
    samples: perStream((s) => s.retries),
  },
  {
    name: 'query_sync_rate_limited_total',
    type: 'counter',
    help: 'HTTP 429 answers the run received, per resource and project.',
    labels: ['resource', 'project'],
    samples: perStream((s) => s.rateLimited),
  },
  {
    name: 'query_sync_budget_wait_seconds_total',
    type: 'counter',
    help: "Time the run's requests waited for the request budget (the rate limits), per resource and project.",
    labels: ['resource', 'project'],
    samples: perStream((s) => seconds(s.budgetWaitMs)),
  },
  {
    name: 'query_sync_backoff_seconds_total',
    type: 'counter',
    help: 'Time the run slept backing off after failures, per resource and project.',
    labels: ['resource', 'project'],
    samples: perStream((s) => seconds(s.backoffMs)),
  },
  {
    name: 'query_sync_stream_ok',
    type: 'gauge',
    help: 'Whether the stream ended ok in the run (1) or failed (0), per resource and project.',
    labels: ['resource', 'project'],
    samples: perStream((s) => (s.ok ? 1 : 0)),
  },
  {
    name: 'query_sync_endpoint_requests_total',
    type: 'counter',
    help: 'API requests sent by the run, per endpoint (a path template).',
    labels: ['endpoint'],
    samples: (f) => f.endpoints.map((e) => ({ labels: { endpoint: e.endpoint }, value: e.requests })),
  },
  {
    name: 'query_sync_endpoint_rate_limited_total',
    type: 'counter',
    help: 'HTTP 429 answers the run received, per endpoint.',
    labels: ['endpoint'],
    samples: (f) => f.endpoints.map((e) => ({ labels: { endpoint: e.endpoint }, value: e.rateLimited })),
  },
  {
    name: 'query_sync_endpoint_budget_wait_seconds_total',
    type: 'counter',
    help: 'Time requests waited for the request budget, per endpoint.',
    labels: ['endpoint'],
    samples: (f) => f.endpoints.map((e) => ({ labels: { endpoint: e.endpoint }, value: seconds(e.budgetWaitMs) })),
  },
  {
    name: 'query_sync_endpoint_allowed_requests_per_second',
    type: 'gauge',
    help: "The request rate the run's scheduler allowed at its end, per endpoint (the configured limit, lowered after 429s).",
    labels: ['endpoint'],
    samples: (f) => f.endpoints.map((e) => ({ labels: { endpoint: e.endpoint }, value: e.allowedPerMinute / 60 })),
  },
  {
    name: 'query_sync_stream_mark_timestamp_seconds',
    type: 'gauge',
    help: "The stream's high-water mark (Unix time): every record before it is stored. Per resource and project.",
    labels: ['resource', 'project'],
    samples: (f) =>
      f.marks.map((m) => ({ labels: { resource: m.resource, project: m.project }, value: seconds(m.markMs) })),
  },
  {
    name: 'query_sync_stream_lag_seconds',
    type: 'gauge',
    help: "How far the stream's mark is behind the time the metrics were made (now − mark). Per resource and project.",
    labels: ['resource', 'project'],
    samples: (f) =>
      f.marks.map((m) => ({
        labels: { resource: m.resource, project: m.project },
        value: Math.max(0, seconds(f.nowMs - m.markMs)),
      })),
  },
  {
    name: 'query_sync_published_as_of_timestamp_seconds',
    type: 'gauge',
    help: 'DuckDB: the as-of time of the published read copy readers open (Unix time).',
    labels: [],
    samples: (f) => one(f.publishedAsOfMs === undefined ? undefined : seconds(f.publishedAsOfMs)),
  },
  {
    name: 'query_sync_backlog_events',
    type: 'gauge',
    help: 'Events whose children (traces) are still to read one request each, per child resource.',
    labels: ['resource'],
    samples: (f) => f.backlogs.map((b) => ({ labels: { resource: b.resource }, value: b.events })),
  },
  {
    name: 'query_sync_backlog_drain_eta_seconds',
    type: 'gauge',
    help: "Least time to read the backlog at the endpoint's limit (--max-rpm), per child resource.",
    labels: ['resource'],
    samples: (f) => f.backlogs.map((b) => ({ labels: { resource: b.resource }, value: b.etaSeconds })),
  },
  {
    name: 'query_sync_backlog_daily_deficit_events',
    type: 'gauge',
    help: "Events a day beyond what the endpoint's limit can read (the backlog grows by this each day; 0: it keeps up), per child resource.",
    labels: ['resource'],
    samples: (f) => f.backlogs.map((b) => ({ labels: { resource: b.resource }, value: b.dailyDeficit })),
  },
  {
    name: 'query_sync_reconcile_windows_checked_total',
    type: 'counter',
    help: "Ranges the run's reconcile compared with the API's counts, per resource and project.",
    labels: ['resource', 'project'],
    samples: (f) =>
      f.reconcile.map((r) => ({ labels: { resource: r.resource, project: r.project }, value: r.checked })),
  },
  {
    name: 'query_sync_reconcile_windows_differing_total',
    type: 'counter',
    help: "Windows where the warehouse's count differed from the API's, per resource and project.",
    labels: ['resource', 'project'],
    samples: (f) =>
      f.reconcile.map((r) => ({ labels: { resource: r.resource, project: r.project }, value: r.differing })),
  },
  {
    name: 'query_sync_reconcile_windows_repaired_total',
    type: 'counter',
    help: 'Differing windows read again until they agreed, per resource and project.',
    labels: ['resource', 'project'],
    samples: (f) =>
      f.reconcile.map((r) => ({ labels: { resource: r.resource, project: r.project }, value: r.repaired })),
  },
  {
    name: 'query_sync_reconcile_windows_still_differing',
    type: 'gauge',
    help: 'Windows that still differ from the API after the run (exit 5), per resource and project.',
    labels: ['resource', 'project'],
    samples: (f) =>
      f.reconcile.map((r) => ({ labels: { resource: r.resource, project: r.project }, value: r.stillDiffering })),
  },
  {
    name: 'query_sync_schema_changes_total',
    type: 'counter',
    help: 'Columns the run added (new tables, new columns, variant columns), per table.',
    labels: ['resource'],
    samples: (f) => {
      const by = new Map<string, number>();
      for (const c of f.schemaChanges) by.set(c.table, (by.get(c.table) ?? 0) + 1);
      return [...by].map(([resource, value]) => ({ labels: { resource }, value }));
    },
  },
];
