import type { QuerySyncError } from '../core/errors.js';
import { EXIT_CODES } from '../core/exit-codes.js';
import { redact, type Logger } from '../core/log.js';
import type { Clock, ResourceDefinition } from '../core/types.js';
import type { RateLimits, RequestBudget } from '../http/scheduler/budget.js';
import { userAgent } from '../http/conventions.js';
import type { StreamResult } from '../sync/frame.js';
import type { ReconcileReport } from '../reconcile/step.js';
import type { SchemaChange } from '../analysts/run-history.js';
import { buildStatus } from '../reports/status.js';
import { publishedStatus } from '../publish/status.js';
import type { StateDocument } from '../state/document.js';
import type { ReconcileFigures, RunFigures, RunStatus, StreamFigures } from './figures.js';
import { metricsText } from './metrics.js';
import { notifications, type NotifyKind } from './notify.js';
import { pingBody, pingUrl } from './ping.js';
import { lastSuccessPushed, push, type PushgatewayTarget } from './pushgateway.js';
import { MonitorHttp, originOf, type Sent } from './send.js';
import { lastSuccessInFile, writeMetricsFile } from './textfile.js';

/**
 * A run's monitoring (docs/monitoring.md): its metrics (a textfile for node_exporter, the
 * Pushgateway) at every `--publish-every` and at its end, healthchecks.io-style pings at its start
 * and end, and webhook notifications at its end. The run object (`run/run.ts`)
 * makes one per run and hands it the run's facts; nothing here can fail the run or hold it past
 * the monitoring timeout: every failure is one warning per mechanism.
 *
 * Where the last success comes from when a run fails: the run itself moves it only when it
 * succeeds; a failed run publishes the value it finds in the previous metrics file, else in the
 * Pushgateway's group (read back once, when first needed: a run that succeeds at its first
 * publication never asks). Both are where that value was published, and
 * both can be read when the warehouse cannot (a held lock, BigQuery unreachable: the failures a
 * failed run is most often about), at no query's cost.
 */

/** What `--metrics-file`, `--pushgateway`, `--ping-url`, `--notify-url` asked for (`config/monitor.ts`). */
export interface MonitorSettings {
  readonly name: string;
  readonly metricsFile?: string;
  readonly pushgateway?: PushgatewayTarget;
  readonly ping?: { readonly url: string; readonly exitCode: boolean };
  readonly notify?: { readonly url: string; readonly on: readonly NotifyKind[] };
  readonly maxLagMs?: number;
  readonly timeoutMs: number;
}

export interface MonitorContext {
  readonly command: string;
  /** The run's id (`run/run.ts` `Run.runId`): the pings' `rid`, as in `_query_sync_runs.run_id`. */
  readonly runId: string;
  /** Undefined: nothing asked for (the monitor does nothing and loads nothing). */
  readonly settings: MonitorSettings | undefined;
  /** Metrics are published this often while the run goes on (`--publish-every`; 0: only at the end). */
  readonly everyMs: number;
  /** DuckDB's read copy (`--duckdb-path`), whose as-of the metrics carry. */
  readonly publishedPath?: string;
  readonly resources: readonly ResourceDefinition[];
  readonly limits: RateLimits;
  /** Taken out of every text sent (error messages can echo the key). */
  readonly secrets: readonly string[];
  readonly clock: Clock;
  readonly logger: Logger;
}

type PageHook = (
  resource: string,
  scope: string,
  page: { readonly records: number; readonly rowsStored: number },
) => void;

/** The hooks a run's walks call, as the monitor watches them (sync's `RunHooks`, backfill's `BackfillHooks`). */
interface WatchedHooks {
  readonly onPage?: PageHook;
  // A method: backfill's hook takes its own result type, a StreamResult with more.
  onStreamDone?(result: StreamResult): void;
}

export interface RunMonitor {
  /** The run's hooks, with rows and pages counted as they are stored and each stream's result kept. */
  observe<H extends WatchedHooks>(hooks: H): H & Required<WatchedHooks>;
  /** The run's state and budget, once open: marks, backlog and per-endpoint figures come from them. */
  attach(sources: { readonly state: { readonly document: StateDocument }; readonly budget: RequestBudget }): void;
  reconciled(report: ReconcileReport): void;
  schemaChanged(changes: readonly SchemaChange[]): void;
  /** The run failed outside its streams (before them, or in the envelope). */
  failed(error: unknown): void;
  /** The run is over: publish its end. Never throws; bounded by the monitoring timeout. */
  finish(outcome: { readonly code: number; readonly output: readonly string[] }): Promise<void>;
}

const NOTHING: RunMonitor = {
  observe: (hooks) => ({ onPage: () => undefined, onStreamDone: () => undefined, ...hooks }),
  attach: () => undefined,
  reconciled: () => undefined,
  schemaChanged: () => undefined,
  failed: () => undefined,
  finish: () => Promise.resolve(),
};

/** Start a run's monitoring: the start ping goes out (not waited for), the periodic publication starts. */
export function startRunMonitor(context: MonitorContext): RunMonitor {
  return context.settings === undefined ? NOTHING : new ActiveMonitor(context, context.settings);
}

interface Tally {
  rows: number;
  pages: number;
}

class ActiveMonitor implements RunMonitor {
  private readonly http: MonitorHttp;
  private readonly startedMs: number;
  private readonly version = userAgent().replace(/^query-sync\//, '');
  private readonly live = new Map<string, Tally>();
  private readonly done = new Map<string, StreamResult[]>();
  private state: { readonly document: StateDocument } | undefined;
  private budget: RequestBudget | undefined;
  private report: ReconcileReport | undefined;
  private changes: readonly SchemaChange[] = [];
  private runError: { code: string; message: string } | undefined;
  /** The last success published before this run (the file, the Pushgateway), read when first needed. */
  private previous: Promise<number | undefined> | undefined;
  private readonly started: Promise<Sent | undefined>;
  private readonly timer: NodeJS.Timeout | undefined;
  private publishing: Promise<void> | undefined;
  private readonly warned = new Set<string>();

  constructor(
    private readonly context: MonitorContext,
    private readonly settings: MonitorSettings,
  ) {
    this.startedMs = context.clock.now();
    this.http = new MonitorHttp(settings.timeoutMs);
    const ping = settings.ping;
    this.started =
      ping === undefined
        ? Promise.resolve(undefined)
        : this.http.send({ method: 'POST', url: pingUrl(ping.url, { start: true }, ping.exitCode, context.runId) });
    const publishes = settings.metricsFile !== undefined || settings.pushgateway !== undefined;
    this.timer =
      publishes && context.everyMs > 0
        ? setInterval(() => {
            this.publishing ??= this.publishMetrics(undefined).finally(() => {
              this.publishing = undefined;
            });
          }, context.everyMs)
        : undefined;
    this.timer?.unref();
  }

  observe<H extends WatchedHooks>(hooks: H): H & Required<WatchedHooks> {
    const onPage: PageHook = (resource, scope, page) => {
      const t = this.tally(`${resource} ${scope}`);
      t.rows += page.rowsStored;
      t.pages += 1;
      hooks.onPage?.(resource, scope, page);
    };
    const onStreamDone = (result: StreamResult): void => {
      if (result.outcome !== 'scope-rejected') {
        const key = `${result.resource} ${result.scope}`;
        this.done.set(key, [...(this.done.get(key) ?? []), result]);
        this.live.delete(key);
      }
      hooks.onStreamDone?.(result);
    };
    return { ...hooks, onPage, onStreamDone };
  }

  attach(sources: { readonly state: { readonly document: StateDocument }; readonly budget: RequestBudget }): void {
    this.state = sources.state;
    this.budget = sources.budget;
  }

  reconciled(report: ReconcileReport): void {
    this.report = report;
  }

  schemaChanged(changes: readonly SchemaChange[]): void {
    this.changes = changes;
  }

  failed(error: unknown): void {
    const e = error instanceof Error ? error : new Error(String(error));
    this.runError = { code: (e as Partial<QuerySyncError>).code ?? 'E_UNKNOWN', message: this.clean(e.message) };
  }

  async finish(outcome: { readonly code: number; readonly output: readonly string[] }): Promise<void> {
    const began = Date.now();
    if (this.timer !== undefined) clearInterval(this.timer);
    const deadline = began + this.settings.timeoutMs;
    const left = (): number => Math.max(0, deadline - Date.now());
    // A publication at --publish-every still under way ends first (it is bounded the same way).
    await this.within(this.publishing, left());
    const endedMs = this.context.clock.now();
    const figures = this.figures(endedMs, outcome.code);
    const timings: Record<string, number> = {};
    const timed = async (what: string, job: () => Promise<void>): Promise<void> => {
      const t0 = Date.now();
      await job();
      timings[what] = Date.now() - t0;
    };
    // Side by side, each within what is left of the one timeout: a dead endpoint holds up no other.
    await Promise.all([
      timed('metricsMs', async () => this.publishFigures(await this.withLastSuccess(figures, left()), left())),
      timed('pingMs', () => this.pingEnd(outcome, left)),
      timed('notifyMs', () => this.notifyAll(figures, left())),
    ]);
    await this.http.close();
    this.context.logger.info(
      { ...timings, totalMs: Date.now() - began },
      `monitoring: the run's end published in ${Date.now() - began} ms (${this.mechanisms()})`,
    );
  }

  private mechanisms(): string {
    const s = this.settings;
    return [
      s.metricsFile === undefined ? undefined : 'metrics file',
      s.pushgateway === undefined ? undefined : `Pushgateway ${originOf(s.pushgateway.url)}`,
      s.ping === undefined ? undefined : `ping ${originOf(s.ping.url)}`,
      s.notify === undefined ? undefined : `notifications ${originOf(s.notify.url)}`,
    ]
      .filter((x) => x !== undefined)
      .join(', ');
  }

  private tally(key: string): Tally {
    let t = this.live.get(key);
    if (t === undefined) {
      t = { rows: 0, pages: 0 };
      this.live.set(key, t);
    }
    return t;
  }

  private async readPreviousSuccess(): Promise<number | undefined> {
    const { metricsFile, pushgateway } = this.settings;
    const [file, pushed] = await Promise.all([
      metricsFile === undefined ? undefined : lastSuccessInFile(metricsFile),
      pushgateway === undefined ? undefined : lastSuccessPushed(this.http, pushgateway),
    ]);
    const known = [file, pushed].filter((x): x is number => x !== undefined);
    return known.length === 0 ? undefined : Math.max(...known);
  }

  /** Wait for `job` at most `ms` (it is bounded by itself too: this only keeps the end's total bound). */
  private async within<T>(job: Promise<T> | undefined, ms: number): Promise<T | undefined> {
    if (job === undefined) return undefined;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), ms);
    });
    try {
      return await Promise.race([job, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A publication while the run goes on (`--publish-every`). */
  private async publishMetrics(budgetMs: number | undefined): Promise<void> {
    const figures = this.figures(undefined, undefined);
    await this.publishFigures(await this.withLastSuccess(figures, budgetMs ?? this.settings.timeoutMs), budgetMs);
  }

  /**
   * The figures with the last success: this run's end when it succeeded, else the one published
   * before it (waited for at most `budgetMs`; unknown, the metric is left out).
   */
  private async withLastSuccess(figures: RunFigures, budgetMs: number): Promise<RunFigures> {
    if (figures.status === 'ok') return { ...figures, lastSuccessMs: figures.endedMs ?? figures.nowMs };
    this.previous ??= this.readPreviousSuccess();
    const lastSuccessMs = await this.within(this.previous, budgetMs);
    return lastSuccessMs === undefined ? figures : { ...figures, lastSuccessMs };
  }

  private async publishFigures(figures: RunFigures, budgetMs: number | undefined): Promise<void> {
    const { metricsFile, pushgateway } = this.settings;
    if (metricsFile === undefined && pushgateway === undefined) return;
    let text: string;
    try {
      text = await metricsText(figures);
    } catch (error) {
      this.warn('metrics', `could not make the run's metrics: ${(error as Error).message}`);
      return;
    }
    await Promise.all([
      metricsFile === undefined
        ? undefined
        : writeMetricsFile(metricsFile, text).catch((error: unknown) =>
            this.warn('metrics-file', `could not write the metrics file ${metricsFile}: ${(error as Error).message}`),
          ),
      pushgateway === undefined
        ? undefined
        : push(this.http, pushgateway, text, budgetMs).then((sent) => {
            if (!sent.ok)
              this.warn('pushgateway', `could not push the run's metrics to the Pushgateway: ${sent.problem ?? ''}`);
          }),
    ]);
  }

  private async pingEnd(outcome: { readonly code: number; readonly output: readonly string[] }, left: () => number) {
    const ping = this.settings.ping;
    if (ping === undefined) return;
    // The start ping first (it went out as the run started), so the service sees them in order.
    const start = await this.within(this.started, left());
    if (start !== undefined && !start.ok) this.warn('ping', `the start ping failed: ${start.problem ?? ''}`);
    const sent = await this.http.send({
      method: 'POST',
      url: pingUrl(ping.url, { exitCode: outcome.code }, ping.exitCode, this.context.runId),
      body: this.clean(pingBody(outcome.output)),
      contentType: 'text/plain; charset=utf-8',
      budgetMs: left(),
    });
    if (!sent.ok) this.warn('ping', `the end ping failed: ${sent.problem ?? ''}`);
  }

  private async notifyAll(figures: RunFigures, budgetMs: number): Promise<void> {
    const notify = this.settings.notify;
    if (notify === undefined) return;
    const list = notifications(figures, {
      command: this.context.command,
      name: this.settings.name,
      on: notify.on,
      ...(this.settings.maxLagMs === undefined ? {} : { maxLagMs: this.settings.maxLagMs }),
    });
    const sent = await Promise.all(
      list.map((n) =>
        this.http.send({
          method: 'POST',
          url: notify.url,
          body: JSON.stringify({ text: this.clean(n.text) }),
          contentType: 'application/json',
          budgetMs,
        }),
      ),
    );
    const failed = sent.filter((s) => !s.ok);
    if (failed.length > 0)
      this.warn(
        'notify',
        `${failed.length} of ${sent.length} notification(s) not delivered: ${failed[0]?.problem ?? ''}`,
      );
  }

  /** One warning per mechanism and run; the ones after it at debug. */
  private warn(mechanism: string, message: string): void {
    if (this.warned.has(mechanism)) this.context.logger.debug(message);
    else {
      this.warned.add(mechanism);
      this.context.logger.warn(`monitoring: ${message} (the run goes on; further failures of it at debug)`);
    }
  }

  private clean(text: string): string {
    return redact(text, this.context.secrets);
  }

  /** The run's figures now (without the last success: `withLastSuccess`); `code` given: its end. */
  private figures(endedMs: number | undefined, code: number | undefined): RunFigures {
    const nowMs = endedMs ?? this.context.clock.now();
    const status: RunStatus = code === undefined ? 'running' : statusOf(code);
    const doc = this.state?.document;
    const status_ =
      doc === undefined
        ? undefined
        : buildStatus(
            '',
            doc,
            this.context.resources,
            { destination: '', location: '', available: false, tables: {} },
            this.context.limits,
            nowMs,
          );
    const asOf =
      this.context.publishedPath === undefined ? null : publishedStatus(this.context.publishedPath, nowMs).asOf;
    const streamErrors: Record<string, { code: string; message: string }> = {};
    for (const [key, results] of this.done) {
      const failed = results.find((r) => r.outcome === 'failed');
      if (failed !== undefined)
        streamErrors[key] = {
          code: (failed.error as Partial<QuerySyncError> | undefined)?.code ?? 'E_UNKNOWN',
          message: this.clean(failed.error?.message ?? 'failed'),
        };
    }
    return {
      command: this.context.command,
      version: this.version,
      nowMs,
      startedMs: this.startedMs,
      ...(endedMs === undefined ? {} : { endedMs }),
      status,
      ...(code === undefined ? {} : { exitCode: code }),
      streams: this.streamFigures(code !== undefined),
      endpoints: Object.entries(this.budget?.stats().endpoints ?? {}).map(([endpoint, e]) => ({
        endpoint,
        requests: e.requests,
        rateLimited: e.rateLimited,
        budgetWaitMs: e.waitedMs,
        allowedPerMinute: e.currentRpm,
      })),
      marks: (status_?.resources ?? []).flatMap((r) =>
        r.scopes.flatMap((s) =>
          s.sync?.highWaterMark === undefined
            ? []
            : [{ resource: r.resource, project: s.project, markMs: Date.parse(s.sync.highWaterMark) }],
        ),
      ),
      backlogs: (status_?.resources ?? []).flatMap((r) =>
        r.backlog === undefined
          ? []
          : [
              {
                resource: r.resource,
                events: r.backlog.total,
                etaSeconds: r.backlog.etaSeconds,
                dailyDeficit: r.backlog.load?.deficitPerDay ?? 0,
              },
            ],
      ),
      reconcile: reconcileFigures(this.report),
      schemaChanges: this.changes,
      ...(asOf === null ? {} : { publishedAsOfMs: Date.parse(asOf) }),
      ...(this.runError === undefined ? {} : { runError: this.runError }),
      streamErrors,
    };
  }

  /**
   * Each stream's counters: its results (a stream that ran twice, such as a sync's walk and its
   * repair, adds up), and while the run goes on the rows and pages of those still walking. At the
   * end, the live counts are kept only where no stream reported (a run that failed mid-walk).
   */
  private streamFigures(ended: boolean): StreamFigures[] {
    const out = new Map<string, StreamFigures>();
    for (const [key, results] of this.done) {
      const [first] = results;
      if (first === undefined) continue;
      const sum = (f: (r: StreamResult) => number): number => results.reduce((n, r) => n + f(r), 0);
      out.set(key, {
        resource: first.resource,
        project: first.scope,
        ok: results.every((r) => r.outcome === 'ok'),
        rows: sum((r) => r.rows),
        pages: sum((r) => r.pages),
        requests: sum((r) => r.stats.requests),
        retries: sum((r) => r.stats.retries),
        rateLimited: sum((r) => r.stats.rateLimited),
        budgetWaitMs: sum((r) => r.stats.waitedMs),
        backoffMs: sum((r) => r.stats.backoffMs),
      });
    }
    if (!ended || out.size === 0) {
      for (const [key, t] of this.live) {
        if (out.has(key)) continue;
        const [resource = key, project = ''] = key.split(' ');
        out.set(key, {
          resource,
          project,
          ok: true,
          rows: t.rows,
          pages: t.pages,
          requests: 0,
          retries: 0,
          rateLimited: 0,
          budgetWaitMs: 0,
          backoffMs: 0,
        });
      }
    }
    return [...out.values()];
  }
}

/** The `status` of a run's exit code (`core/exit-codes.ts`). */
function statusOf(code: number): RunStatus {
  if (code === EXIT_CODES.ok) return 'ok';
  if (code === EXIT_CODES.mismatch) return 'difference';
  if (code === EXIT_CODES.maxRunTime || code === EXIT_CODES.SIGINT || code === EXIT_CODES.SIGTERM) return 'stopped';
  return 'failed';
}

function reconcileFigures(report: ReconcileReport | undefined): ReconcileFigures[] {
  if (report === undefined) return [];
  const by = new Map<string, { -readonly [K in keyof ReconcileFigures]: ReconcileFigures[K] }>();
  const entry = (resource: string, project: string) => {
    const key = `${resource} ${project}`;
    let e = by.get(key);
    if (e === undefined) {
      e = { resource, project, checked: 0, differing: 0, repaired: 0, stillDiffering: 0, windows: [] };
      by.set(key, e);
    }
    return e;
  };
  for (const c of report.checked) entry(c.resource, c.project).checked += 1;
  for (const w of report.windows) {
    const e = entry(w.resource, w.project);
    e.differing += 1;
    if (w.outcome === 'repaired') e.repaired += 1;
    else {
      e.stillDiffering += 1;
      e.windows = [...e.windows, { from: w.from, to: w.to }];
    }
  }
  return [...by.values()];
}
