import type { ResourceDefinition } from '../src/core/types.js';
import { conversations } from './conversations.js';
import { events } from './events.js';
import { signalGroups } from './signal-groups.js';
import { signals } from './signals.js';
import { traces } from './traces.js';
import { users } from './users.js';

/** Every resource query-sync knows, in the order a sync reports them. */
export const RESOURCES: readonly ResourceDefinition[] = [events, traces, signals, signalGroups, users, conversations];

export const RESOURCE_NAMES: readonly string[] = RESOURCES.map((r) => r.name);
