import { Writable } from 'node:stream';
import { formatDuration } from '../core/duration.js';
import type { Logger } from '../core/log.js';
import type { ProgressTracker, ResourceProgress } from '../pipeline/progress.js';

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

/**
 * The live display. Log lines written meanwhile must go through `logStream`, so they appear above
 * the live lines instead of being overwritten by the next redraw.
 */
export class TtyProgressDisplay implements ProgressDisplay {
  readonly logStream: Writable;
  private readonly tracker: ProgressTracker;
  private readonly out: NodeJS.WritableStream;
  private timer: ReturnType<typeof setInterval> | undefined;
  private drawn = 0;

  constructor(tracker: ProgressTracker, out: NodeJS.WritableStream = process.stderr) {
    this.tracker = tracker;
    this.out = out;
    this.logStream = new Writable({
      write: (chunk: Buffer | string, _encoding, callback): void => {
        this.clear();
        this.out.write(chunk);
        if (this.timer !== undefined) this.draw();
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
    this.drawn = 0;
  }

  private clear(): void {
    if (this.drawn === 0) return;
    this.out.write(`\x1b[${this.drawn}F\x1b[J`);
    this.drawn = 0;
  }

  private draw(): void {
    const lines = renderProgress(this.tracker);
    this.clear();
    this.out.write(`${lines.join('\n')}\n`);
    this.drawn = lines.length;
  }
}

/** The live lines: one per resource, then the total. */
export function renderProgress(tracker: ProgressTracker): string[] {
  const snap = tracker.snapshot();
  const lines = snap.resources.map((r) => renderResource(r));
  const eta = snap.etaSeconds === undefined ? 'ETA ?' : `ETA ${snap.etaIsLowerBound ? '≥ ' : ''}${formatDuration(snap.etaSeconds * 1000)}`;
  lines.push(`elapsed ${formatDuration(snap.elapsedSeconds * 1000)}  ${eta}`);
  return lines;
}

function renderResource(r: ResourceProgress): string {
  const rows = r.plannedRows === undefined ? `${r.rows}` : `${r.rows}/${r.plannedRows}`;
  const pages = r.plannedPages === undefined ? `${r.pages}` : `${r.pages}/${r.plannedPages}`;
  const eta = r.done ? 'done' : r.etaSeconds === undefined ? 'ETA ?' : `ETA ${formatDuration(r.etaSeconds * 1000)}`;
  return [
    r.resource.padEnd(13),
    `rows ${rows}`.padEnd(20),
    `pages ${pages}`.padEnd(16),
    `windows ${r.windowsDone}/${r.windowsTotal}`.padEnd(15),
    `${Math.round(r.rowsPerSecond)} rows/s`.padEnd(14),
    eta,
  ].join(' ');
}

/** Not on a TTY: one `progress` log line per resource still running, every `intervalMs`. */
export class LogProgressDisplay implements ProgressDisplay {
  private readonly tracker: ProgressTracker;
  private readonly logger: Logger;
  private readonly intervalMs: number;
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly reportedDone = new Set<string>();

  constructor(tracker: ProgressTracker, logger: Logger, intervalMs: number) {
    this.tracker = tracker;
    this.logger = logger;
    this.intervalMs = intervalMs;
  }

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.report(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer === undefined) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private report(): void {
    const snap = this.tracker.snapshot();
    for (const r of snap.resources) {
      if (r.done && this.reportedDone.has(r.resource)) continue;
      if (r.done) this.reportedDone.add(r.resource);
      this.logger.info(
        {
          resource: r.resource,
          rows: r.rows,
          plannedRows: r.plannedRows,
          pages: r.pages,
          plannedPages: r.plannedPages,
          windowsDone: r.windowsDone,
          windowsTotal: r.windowsTotal,
          rowsPerSecond: Math.round(r.rowsPerSecond),
          etaSeconds: r.etaSeconds === undefined ? undefined : Math.round(r.etaSeconds),
          elapsedSeconds: Math.round(snap.elapsedSeconds),
        },
        'progress',
      );
    }
  }
}

/** No progress (`--quiet`). */
export const NO_PROGRESS: ProgressDisplay = Object.freeze({ start: () => undefined, stop: () => undefined });
