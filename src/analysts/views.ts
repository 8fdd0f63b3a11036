import { DELETED_AT_COLUMN } from '../core/deletions.js';
import type { Logger } from '../core/log.js';
import type { Destination, ViewDialect } from '../load/destination.js';

/** Events in conversation order, with their conversation's columns (a view: nothing stored twice). */
export const CONVERSATION_EVENTS_VIEW = 'conversation_events';

/** Conversation columns the view carries, renamed `convo_<name>` so they never clash with an event's. */
const CONVERSATION_COLUMNS = ['started_at', 'last_message_at', 'message_count'] as const;

/**
 * The query of `conversation_events`: every event that names a conversation (`convo_id`), its
 * position in it (`turn`, 1-based, by `timestamp` then `id`), and its conversation's start, last
 * message and message count when the conversations table has them; events marked deleted at the
 * source (`_deleted_at`) left out. `null` when the events table has no `convo_id` yet.
 */
function conversationEventsQuery(
  eventColumns: readonly string[] | undefined,
  conversationColumns: readonly string[] | undefined,
): ((sql: ViewDialect) => string) | undefined {
  if (eventColumns === undefined || !eventColumns.includes('convo_id') || !eventColumns.includes('timestamp'))
    return undefined;
  const convo = CONVERSATION_COLUMNS.filter((c) => conversationColumns?.includes(c) === true);
  return ({ table, column: q }) => {
    const eventsSelect = eventColumns.map((c) => `e.${q(c)}`).join(', ');
    const turn = `ROW_NUMBER() OVER (PARTITION BY e.${q('project_id')}, e.${q('convo_id')} ORDER BY e.${q('timestamp')}, e.${q('id')}) AS ${q('turn')}`;
    const joined = convo.map((c) => `c.${q(c)} AS ${q(`convo_${c}`)}`);
    const from =
      conversationColumns === undefined
        ? `FROM ${table('events')} AS e`
        : `FROM ${table('events')} AS e LEFT JOIN ${table('conversations')} AS c ON c.${q('project_id')} = e.${q('project_id')} AND c.${q('id')} = e.${q('convo_id')}`;
    // Events reconcile marked deleted at the source are kept in `events` (with `_deleted_at`), not in
    // the conversation: its turns are those the API still holds.
    const live = eventColumns.includes(DELETED_AT_COLUMN) ? ` AND e.${q(DELETED_AT_COLUMN)} IS NULL` : '';
    return `SELECT ${[eventsSelect, turn, ...joined].join(', ')} ${from} WHERE e.${q('convo_id')} IS NOT NULL${live}`;
  };
}

/**
 * Create or replace the views over the tables as they are now (a view names columns, so it is
 * redefined after every run that may have added one). Best effort: a view that cannot be made is a
 * warning, never a failed run (the data and the marks are stored).
 */
export async function defineViews(destination: Destination, logger: Logger): Promise<string[]> {
  const views = destination.can.views;
  if (views === undefined) return [];
  const made: string[] = [];
  try {
    const events = (await destination.describe('events'))?.map((c) => c.name);
    const conversations = (await destination.describe('conversations'))?.map((c) => c.name);
    const query = conversationEventsQuery(events, conversations);
    if (query !== undefined) {
      await views.defineView(CONVERSATION_EVENTS_VIEW, query);
      made.push(CONVERSATION_EVENTS_VIEW);
    }
  } catch (error) {
    logger.warn(
      { err: (error as Error).message },
      `could not define the view ${CONVERSATION_EVENTS_VIEW}; the tables are stored`,
    );
  }
  return made;
}
