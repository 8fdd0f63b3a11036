import { createHash } from 'node:crypto';
import { closeSync, openSync, readFileSync, renameSync, writeFileSync, writeSync } from 'node:fs';
import type { Logger } from '../core/log.js';
import type { RequestBudget } from '../http/scheduler/budget.js';
import { sectionChange } from '../state/batch.js';
import type { Change, StateDocument, StateStore } from '../state/store.js';

/**
 * What a run spent in the current rate-limit windows, carried to the next run with the same key.
 *
 * The API's limits are per key and sliding (400 a minute per endpoint, 40 a second overall). A run
 * that starts while the previous run's requests are still inside the server's minute window, and
 * does not know of them, sends its own at full rate and draws 429s (two back-to-back `--traces all`
 * runs: 43 × 429). So each writing run keeps, in state, the start times of its requests still inside
 * the minute window, per endpoint, under a hash of the base URL and key (never the key), and the
 * next run seeds its scheduler with them before its first request.
 *
 * A run killed with SIGKILL never ends, so the spend is not only saved at the end: it rides with
 * every commit of the run's state (`StateStore.withEachCommit`: in each batch's transaction), and
 * every request is also appended, as it leaves, to a journal beside the state file
 * (`<state>.spend`): a killed process's writes are the kernel's, so the journal holds what it sent
 * after its last commit (probes, reads whose rows were never stored). The next run counts the
 * committed starts and the journal's later ones (issue 31: six kill -9 restarts drew 9 × 429 where
 * only the end of a run saved its spend; 0 now).
 *
 * Bound: only writing runs (sync, backfill, verify --repair) sharing one state save it; a plain
 * `verify` counts what they saved but, holding no lease, saves nothing of its own. A `plan`, a
 * `check`, or a run with another state file and the same key are not seen (they spend little, or
 * are the user's own setup to keep apart). A sync and a backfill running at once share the journal
 * file; each rewrites it only when it starts (keeping the minute's entries), and the other's later
 * appends then go to the file it replaced: a kill of that other run loses what it sent after its
 * last commit. A dry run keeps nothing.
 */

export const BUDGET_SECTION = 'budget';

interface CarriedSpend {
  /** When the run saved it (ISO). */
  readonly savedAt: string;
  /** Request start times (epoch ms) per endpoint, still inside the minute window at `savedAt`. */
  readonly starts: Readonly<Record<string, readonly number[]>>;
}

type BudgetSection = Readonly<Record<string, CarriedSpend>>;

/** Entries older than this are dropped when a run saves (no window holds them any more). */
const KEEP_MS = 5 * 60_000;

/** Who the limits belong to: the key at one server. A hash, so the state never holds the key. */
export function budgetOwner(baseUrl: string, apiKey: string): string {
  return `sha256:${createHash('sha256').update(`${baseUrl}\n${apiKey}`).digest('hex').slice(0, 16)}`;
}

/**
 * Seed the run's scheduler with what the previous runs spent in the windows still open: the starts
 * committed in state, and the journal's starts after that commit (`journal`: `readJournal`).
 */
export function seedBudget(
  doc: StateDocument,
  budget: RequestBudget,
  owner: string,
  logger: Logger,
  journal: readonly JournalEntry[] = [],
): void {
  const starts = seedsOf(doc, owner, journal);
  const total = Object.values(starts).reduce((n, s) => n + s.length, 0);
  if (total === 0) return;
  budget.seedStarts?.(starts);
  logger.debug(
    { requests: total, endpoints: Object.keys(starts) },
    "budget: counting the previous run's requests still inside the rate-limit windows",
  );
}

/** The committed starts of `owner`, with the journal's starts after their commit. Pure. */
export function seedsOf(
  doc: StateDocument,
  owner: string,
  journal: readonly JournalEntry[],
): Readonly<Record<string, readonly number[]>> {
  const section = (doc.sections[BUDGET_SECTION] ?? {}) as BudgetSection;
  const carried = section[owner];
  const committedAt = carried === undefined ? Number.NEGATIVE_INFINITY : Date.parse(carried.savedAt);
  const out: Record<string, number[]> = {};
  for (const [endpoint, starts] of Object.entries(carried?.starts ?? {})) out[endpoint] = [...starts];
  // A start up to the commit is in the committed list (the list is read when the commit is made).
  for (const e of journal) {
    if (e.owner !== owner || e.atMs <= committedAt) continue;
    const list = out[e.endpoint] ?? [];
    list.push(e.atMs);
    out[e.endpoint] = list;
  }
  return out;
}

/** The budget section with what this run spent in the windows still open now (other owners' stale entries dropped). */
function withSpend(
  budget: RequestBudget,
  owner: string,
  nowMs: number,
): (section: BudgetSection | undefined) => BudgetSection {
  const starts = budget.recentStarts?.() ?? {};
  return (section = {}) => {
    const next: Record<string, CarriedSpend> = {};
    for (const [key, spend] of Object.entries(section))
      if (key !== owner && nowMs - Date.parse(spend.savedAt) < KEEP_MS) next[key] = spend;
    if (Object.keys(starts).length > 0) next[owner] = { savedAt: new Date(nowMs).toISOString(), starts };
    return next;
  };
}

/** The state change that records what this run spent so far: ridden with each commit (`StateStore.withEachCommit`). */
export function spendChange(budget: RequestBudget, owner: string, nowMs: number): Change {
  return sectionChange(BUDGET_SECTION, withSpend(budget, owner, nowMs));
}

/** Save what this run spent in the windows still open, at its end. */
export function saveBudget(state: StateStore, budget: RequestBudget, owner: string, nowMs: number): Promise<void> {
  return state.updateSection(BUDGET_SECTION, withSpend(budget, owner, nowMs));
}

/** One request as the journal keeps it. */
export interface JournalEntry {
  readonly owner: string;
  readonly endpoint: string;
  readonly atMs: number;
}

/** The journal of a state file: every request a writing run sent, appended as it leaves. */
export function journalPath(statePath: string): string {
  return `${statePath}.spend`;
}

/** The journal's entries still inside a window at `nowMs` (none when there is no journal; a torn last line is skipped). */
export function readJournal(path: string, nowMs: number): JournalEntry[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return [];
  }
  const out: JournalEntry[] = [];
  for (const line of text.split('\n')) {
    const [owner, endpoint, at] = line.split('\t');
    const atMs = Number(at);
    if (owner === undefined || endpoint === undefined || !Number.isFinite(atMs)) continue;
    if (nowMs - atMs < KEEP_MS) out.push({ owner, endpoint, atMs });
  }
  return out;
}

/**
 * The run's journal: rewritten with the entries still worth keeping (`kept`), then appended to, one
 * line per request as it leaves (a synchronous write: a kill -9 cannot lose a line the kernel has).
 */
export class SpendJournal {
  private fd: number | undefined;

  constructor(
    path: string,
    private readonly owner: string,
    kept: readonly JournalEntry[],
  ) {
    const tmp = `${path}.${process.pid}.tmp`;
    writeFileSync(tmp, kept.map((e) => `${e.owner}\t${e.endpoint}\t${e.atMs}\n`).join(''));
    renameSync(tmp, path);
    this.fd = openSync(path, 'a');
  }

  record(endpoint: string, atMs: number): void {
    if (this.fd === undefined) return;
    try {
      writeSync(this.fd, `${this.owner}\t${endpoint}\t${atMs}\n`);
    } catch {
      // A full disk loses only the carry, never a request.
    }
  }

  close(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}
