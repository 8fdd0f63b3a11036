import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  BUDGET_SECTION,
  journalPath,
  readJournal,
  seedsOf,
  SpendJournal,
  type JournalEntry,
} from '../../../src/run/budget-carry.js';
import type { StateDocument } from '../../../src/state/store.js';
import { dir } from '../../fakes/lifecycle.js';

const doc = (savedAt: string, starts: Record<string, number[]>): StateDocument => ({
  version: 1,
  streams: {},
  projects: [],
  sections: { [BUDGET_SECTION]: { me: { savedAt, starts } } },
});

describe('the rate-limit spend a killed run leaves', () => {
  it('counts the committed starts and the journal after that commit, each once', () => {
    const committedAt = Date.parse('2026-01-01T00:00:10.000Z');
    const state = doc(new Date(committedAt).toISOString(), { '/v1/traces': [committedAt - 2000, committedAt - 1000] });
    const journal: JournalEntry[] = [
      // In the commit already (the journal has every request, the state those up to its commit).
      { owner: 'me', endpoint: '/v1/traces', atMs: committedAt - 2000 },
      { owner: 'me', endpoint: '/v1/traces', atMs: committedAt - 1000 },
      // Sent after the last commit, before the kill: known only to the journal.
      { owner: 'me', endpoint: '/v1/traces', atMs: committedAt + 5 },
      { owner: 'me', endpoint: '/v1/events', atMs: committedAt + 7 },
      // Another key's.
      { owner: 'other', endpoint: '/v1/traces', atMs: committedAt + 9 },
    ];
    expect(seedsOf(state, 'me', journal)).toEqual({
      '/v1/traces': [committedAt - 2000, committedAt - 1000, committedAt + 5],
      '/v1/events': [committedAt + 7],
    });
    // No commit yet (killed before its first batch): the journal is all there is.
    expect(seedsOf({ ...state, sections: {} }, 'other', journal)).toEqual({ '/v1/traces': [committedAt + 9] });
  });

  it('the journal: rewritten with what is kept, then one line per request, read back within the window', () => {
    const path = journalPath(join(dir(), 'state.json'));
    const now = Date.now();
    const kept: JournalEntry[] = [{ owner: 'me', endpoint: '/v1/events', atMs: now - 1000 }];
    const journal = new SpendJournal(path, 'me', kept);
    journal.record('/v1/traces', now);
    journal.close();
    expect(readJournal(path, now)).toEqual([...kept, { owner: 'me', endpoint: '/v1/traces', atMs: now }]);
    // Ten minutes on, nothing is inside any window.
    expect(readJournal(path, now + 10 * 60_000)).toEqual([]);
    expect(readJournal(`${path}.missing`, now)).toEqual([]);
  });
});
