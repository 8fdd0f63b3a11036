import { createHash } from 'node:crypto';
import type { Logger } from '../core/log.js';
import type { RequestBudget } from '../http/budget.js';
import type { StateDocument, StateStore } from '../state/store.js';

/**
 * What a run spent in the current rate-limit windows, carried to the next run with the same key.
 *
 * The API's limits are per key and sliding (400 a minute per endpoint, 40 a second overall). A run
 * that starts while the previous run's requests are still inside the server's minute window, and
 * does not know of them, sends its own at full rate and draws 429s (two back-to-back `--traces all`
 * runs: 43 × 429). So each writing run keeps, in state, the start times of its requests still inside
 * the minute window when it ends, per endpoint, under a hash of the base URL and key (never the
 * key), and the next run seeds its scheduler with them before its first request.
 *
 * Bound: only writing runs (sync, backfill, verify --repair) sharing one state save it; a plain
 * `verify` counts what they saved but, holding no lease, saves nothing of its own. A `plan`, a
 * `check`, or a run with another state file and the same key are not seen (they spend little, or
 * are the user's own setup to keep apart). A run killed with SIGKILL saves nothing; the adaptive
 * rate handles that.
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

/** The starts a previous run with the same owner left in state (empty when none). */
function carriedStarts(doc: StateDocument, owner: string): Readonly<Record<string, readonly number[]>> {
  const section = (doc.sections[BUDGET_SECTION] ?? {}) as BudgetSection;
  return section[owner]?.starts ?? {};
}

/** Seed the run's scheduler with what the previous run spent in the windows still open. */
export function seedBudget(doc: StateDocument, budget: RequestBudget, owner: string, logger: Logger): void {
  const starts = carriedStarts(doc, owner);
  const total = Object.values(starts).reduce((n, s) => n + s.length, 0);
  if (total === 0) return;
  budget.seedStarts?.(starts);
  logger.debug(
    { requests: total, endpoints: Object.keys(starts) },
    "budget: counting the previous run's requests still inside the rate-limit windows",
  );
}

/** Save what this run spent in the windows still open (and drop other owners' stale entries). */
export async function saveBudget(
  state: StateStore,
  budget: RequestBudget,
  owner: string,
  nowMs: number,
): Promise<void> {
  const starts = budget.recentStarts?.() ?? {};
  await state.updateSection<BudgetSection>(BUDGET_SECTION, (section = {}) => {
    const next: Record<string, CarriedSpend> = {};
    for (const [key, spend] of Object.entries(section))
      if (key !== owner && nowMs - Date.parse(spend.savedAt) < KEEP_MS) next[key] = spend;
    if (Object.keys(starts).length > 0) next[owner] = { savedAt: new Date(nowMs).toISOString(), starts };
    return next;
  });
}
