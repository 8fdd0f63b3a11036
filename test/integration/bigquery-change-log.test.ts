import { describe, expect, it } from 'vitest';
import { conversations } from '../../connectors/conversations.js';
import { users } from '../../connectors/users.js';
import { bigqueryTarget } from '../fixtures/bigquery/pipeline-target.js';
import { expectTableMatches, syncOnce } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';

/**
 * Two syncs of users and conversations into BigQuery (the strict double), the second after new
 * events moved many of them: the views `users` and `conversations` hold exactly the API's records,
 * one row per key, while the logs hold every copy loaded.
 */
describe('users and conversations through the change log (BigQuery)', () => {
  it('two syncs with overlapping users and conversations: the views show exactly one latest row per key', async () => {
    const emu = await emulator({ seed: 41, eventsPerProject: 200, limits: false });
    const d = dir();
    const run = {
      baseUrl: emu.url,
      apiKey: emu.apiKey,
      dir: d,
      resources: [users, conversations],
      destination: bigqueryTarget.destination(d),
    };
    const first = await syncOnce(run);
    expect(first.ok, JSON.stringify(first.streams.map((s) => s.error?.message))).toBe(true);
    emu.addEvents('default', 60);
    const second = await syncOnce(run);
    expect(second.ok, JSON.stringify(second.streams.map((s) => s.error?.message))).toBe(true);

    for (const table of ['users', 'conversations']) {
      const view = await bigqueryTarget.readTable(d, table);
      expectTableMatches(view, emu.snapshot(table, 'default'), 'id', table);
      const log = await bigqueryTarget.readTable(d, `${table}_changes`);
      // The second sync re-read rows the first had: the log holds more copies than the view rows.
      expect(log.length, table).toBeGreaterThan(view.length);
    }
  }, 60_000);
});
