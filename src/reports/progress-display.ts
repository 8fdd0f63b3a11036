import { Writable } from 'node:stream';
import { styleText } from 'node:util';
import { createLogUpdate } from 'log-update';
import type { Logger } from '../core/log.js';
import { withoutContext } from './repeats.js';
import type { Activity, ProgressSnapshot, ProgressTracker, ResourceProgress } from './progress.js';

/**
 * Shows a run's progress: a live display redrawn in place on a TTY, or a progress log line per
 * resource every few seconds otherwise. Both write to stderr (stdout keeps the summary).
 */
export interface ProgressDisplay {
  start(): void;
  /** Stop updating; the TTY display draws its last state and leaves it on screen. */
  stop(): void;
}

/** Redraws of the live display per second: smooth enough, cheap. */
const TTY_REFRESH_MS = 250;

/** Below this width the lines drop their labels ("rows", "pages") to fit. */
const WIDE_COLUMNS = 100;

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export interface RenderOptions {
  /** Terminal width: every line is cut to fit it, so nothing wraps. @default 80 */
  readonly columns?: number;
  /** Colour the state of each line (a TTY that did not ask for NO_COLOR). @default false */
  readonly color?: boolean;
  /** Spinner frame, advanced by each redraw. @default 0 */
  readonly frame?: number;
}

/**
 * The live display, drawn with log-update: it erases exactly the lines it drew (counting those a
 * narrow terminal wraps) and never draws more lines than the terminal has. Our lines are cut to the
 * width anyway, so they do not wrap. Log lines written meanwhile must go through `logStream`, so
 * they appear above the live lines instead of being overwritten by the next redraw.
 */
export class TtyProgressDisplay implements ProgressDisplay {
  readonly logStream: Writable;
  private readonly tracker: ProgressTracker;
  private readonly out: NodeJS.WritableStream & { columns?: number };
  private readonly update: ReturnType<typeof createLogUpdate>;
  private readonly color: boolean;
  private timer: ReturnType<typeof setInterval> | undefined;
  private frame = 0;

  constructor(
    tracker: ProgressTracker,
    out: NodeJS.WritableStream & { columns?: number; isTTY?: boolean } = process.stderr,
  ) {
    this.tracker = tracker;
    this.out = out;
    // showCursor: the cursor is hidden while drawing and shown again by `done()` (and on exit).
    this.update = createLogUpdate(out, { showCursor: out.isTTY !== true });
    this.color = out.isTTY === true && process.env.NO_COLOR === undefined;
    this.logStream = new Writable({
      write: (chunk: Buffer | string, _encoding, callback): void => {
        if (this.timer === undefined) {
          this.out.write(chunk);
        } else {
          this.update.clear();
          this.out.write(chunk);
          this.draw();
        }
        callback();
      },
    });
  }

  start(): void {
    if (this.timer !== undefined) return;
    this.draw();
    this.timer = setInterval(() => this.draw(), TTY_REFRESH_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer === undefined) return;
    clearInterval(this.timer);
    this.timer = undefined;
    this.draw();
    this.update.done();
  }

  private draw(): void {
    this.frame += 1;
    this.update(
      renderProgress(this.tracker.snapshot(), {
        columns: this.out.columns ?? 80,
        color: this.color,
        frame: this.frame,
      }).join('\n'),
    );
  }
}

/** The live lines: the planning spinner, or one line per resource and a total line. */
export function renderProgress(snap: ProgressSnapshot, options: RenderOptions = {}): string[] {
  const columns = Math.max(20, options.columns ?? 80);
  // One column spare: some terminals wrap a line that fills the last column.
  const fitWidth = (line: string): string => cut(line, columns - 1);
  const spin = SPINNER[(options.frame ?? 0) % SPINNER.length] ?? '*';
  if (snap.phase === 'planning') {
    return [
      fitWidth(
        `${spin} planning the run: ${snap.requests} count request${snap.requests === 1 ? '' : 's'} · ${seconds(snap.elapsedSeconds)}`,
      ),
    ];
  }
  const wide = columns >= WIDE_COLUMNS;
  const nameWidth = Math.max(6, ...snap.resources.map((r) => r.resource.length));
  // A windows column for all lines or none, so the columns stay aligned.
  const windows = snap.resources.some((r) => r.windowsTotal > 1);
  const lines = snap.resources.flatMap((r) =>
    renderResource(r, { wide, nameWidth, spin, windows }).map((text) => {
      const line = fitWidth(text);
      return options.color === true ? paint(r, line) : line;
    }),
  );
  const eta =
    snap.etaSeconds === undefined ? 'ETA ?' : `ETA ${snap.etaIsLowerBound ? '≥ ' : ''}${seconds(snap.etaSeconds)}`;
  const ended = snap.resources.length > 0 && snap.resources.every((r) => r.done);
  const total = [`elapsed ${seconds(snap.elapsedSeconds)}`, ...(ended ? [] : [eta]), `${num(snap.requests)} requests`];
  if (snap.rateLimited > 0) total.push(`${num(snap.rateLimited)} × 429`);
  lines.push(fitWidth(total.join(' · ')));
  if (!ended && snap.resources.some((r) => r.resumed && !r.done)) {
    lines.push(fitWidth('≤: a resumed window; rows stored before the interruption are not counted again'));
  }
  return lines;
}

/** One line; on a narrow terminal a failure's message goes on a line of its own, so it can be read. */
function renderResource(
  r: ResourceProgress,
  { wide, nameWidth, spin, windows }: { wide: boolean; nameWidth: number; spin: string; windows: boolean },
): string[] {
  const failed = r.failed.length > 0;
  const mark = failed ? '✗' : r.done ? '✓' : spin;
  // While running, rows read of the plan's count; once ended, the rows stored (a plan is an estimate).
  const rows = r.done ? r.rows : r.rowsRead;
  const planned = r.plannedRows === undefined || r.done ? '' : `/${r.resumed ? '≤' : ''}${num(r.plannedRows)}`;
  const pages =
    r.plannedPages === undefined || r.done
      ? num(r.pages)
      : `${num(r.pages)}/${r.resumed ? '≤' : ''}${num(r.plannedPages)}`;
  const parts = [`${mark} ${r.resource.padEnd(nameWidth)}`];
  if (wide) {
    parts.push(`rows ${num(rows)}${planned}`.padEnd(22), `pages ${pages}`.padEnd(16));
    if (windows) parts.push(`windows ${r.windowsDone}/${r.windowsTotal}`.padEnd(15));
    if (!r.done) parts.push(`${num(Math.round(r.rowsPerSecond))} rows/s`.padEnd(13));
  } else {
    // Narrow: pages without their plan (the rows carry it).
    parts.push(`${num(rows)}${planned} rows`.padStart(19), `${num(r.pages)} pg`.padStart(8));
    if (windows) parts.push(`${r.windowsDone}/${r.windowsTotal} win`.padStart(8));
    // Narrow: a waiting or backing-off state takes the rate's place.
    if (!r.done && r.activity === undefined && r.failed.length === 0)
      parts.push(`${num(Math.round(r.rowsPerSecond))}/s`.padStart(7));
  }
  const state = stateText(r, wide);
  if (wide || r.failed.length === 0) return [[...parts, state].join(' ')];
  const [head = state, ...message] = state.split(': ');
  return [[...parts, head].join(' '), `  └ ${message.join(': ')}`];
}

function stateText(r: ResourceProgress, wide: boolean): string {
  if (r.failed.length > 0) {
    const first = r.failed[0];
    const streams = r.failed.length === 1 ? '' : ` (${r.failed.length} streams)`;
    const running = r.done ? '' : wide ? ', others running' : ', running';
    return `FAILED${streams}${running}: ${withoutContext(first?.message ?? '')}`;
  }
  if (r.done) return r.resumed ? 'done (resumed)' : 'done';
  if (r.activity !== undefined) return activityText(r.activity, wide);
  return r.etaSeconds === undefined ? 'ETA ?' : `ETA ${seconds(r.etaSeconds)}`;
}

function activityText(a: Activity, wide: boolean): string {
  if (a.kind === 'backoff') return `backing off ${Math.ceil(a.seconds)}s${wide ? ` (${a.reason})` : ''}`;
  const s = Math.floor(a.seconds);
  if (wide) return `waiting for rate budget ${s}s${a.pausedAfter429 ? ' (paused after a 429)' : ''}`;
  return a.pausedAfter429 ? `429: waiting ${s}s` : `waiting for budget ${s}s`;
}

/** The line's state in colour: red failed, green done, yellow waiting or backing off. */
function paint(r: ResourceProgress, line: string): string {
  if (r.failed.length > 0) return styleText('red', line);
  if (r.done) return styleText('green', line);
  if (r.activity !== undefined) return styleText('yellow', line);
  return line;
}

function cut(line: string, width: number): string {
  const chars = [...line.trimEnd()];
  return chars.length <= width ? chars.join('') : `${chars.slice(0, width - 1).join('')}…`;
}

const num = (n: number): string => n.toLocaleString('en-US');

/** `9s`, `1m09s`, `2h05m`: whole seconds, no jitter of tenths in a live line. */
function seconds(s: number): string {
  const t = Math.max(0, Math.round(s));
  if (t < 60) return `${t}s`;
  if (t < 3600) return `${Math.floor(t / 60)}m${String(t % 60).padStart(2, '0')}s`;
  return `${Math.floor(t / 3600)}h${String(Math.floor((t % 3600) / 60)).padStart(2, '0')}m`;
}

/** Not on a TTY: one `progress` log line per resource still running, every `intervalMs`. */
export class LogProgressDisplay implements ProgressDisplay {
  private readonly tracker: ProgressTracker;
  private readonly logger: Logger;
  private readonly intervalMs: number;
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly reportedDone = new Set<string>();
  private announcedPlanning = false;

  constructor(tracker: ProgressTracker, logger: Logger, intervalMs: number) {
    this.tracker = tracker;
    this.logger = logger;
    this.intervalMs = intervalMs;
  }

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.report(), this.intervalMs);
    this.timer.unref();
    const snap = this.tracker.snapshot();
    if (snap.phase === 'planning' && !this.announcedPlanning) {
      this.announcedPlanning = true;
      this.logger.info('planning the run (count requests for the ETA)');
    }
  }

  stop(): void {
    if (this.timer === undefined) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private report(): void {
    const snap = this.tracker.snapshot();
    if (snap.phase === 'planning') {
      this.logger.info({ countRequests: snap.requests, elapsedSeconds: Math.round(snap.elapsedSeconds) }, 'planning');
      return;
    }
    for (const r of snap.resources) {
      // Planned but not started yet: nothing to report.
      if (r.windowsTotal === 0 && r.pages === 0 && r.failed.length === 0) continue;
      if (r.done && this.reportedDone.has(r.resource)) continue;
      if (r.done) this.reportedDone.add(r.resource);
      this.logger.info(
        {
          resource: r.resource,
          rows: r.rows,
          rowsRead: r.rowsRead,
          plannedRows: r.plannedRows,
          ...(r.resumed ? { resumed: true } : {}),
          pages: r.pages,
          plannedPages: r.plannedPages,
          windowsDone: r.windowsDone,
          windowsTotal: r.windowsTotal,
          rowsPerSecond: Math.round(r.rowsPerSecond),
          etaSeconds: r.etaSeconds === undefined ? undefined : Math.round(r.etaSeconds),
          elapsedSeconds: Math.round(snap.elapsedSeconds),
          state: r.failed.length > 0 ? 'failed' : r.done ? 'done' : (r.activity?.kind ?? 'running'),
          ...(r.activity === undefined ? {} : { stateSeconds: Math.round(r.activity.seconds) }),
          ...(r.failed.length > 0 ? { failedStreams: r.failed.map((f) => f.scope) } : {}),
        },
        'progress',
      );
    }
  }
}

/** No progress (`--quiet`). */
export const NO_PROGRESS: ProgressDisplay = Object.freeze({ start: () => undefined, stop: () => undefined });
