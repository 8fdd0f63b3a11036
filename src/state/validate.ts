/**
 * The state file, checked field by field when it is read: a mark like "yesterday" or a checkpoint
 * of the wrong type must stop the run with a clear state error (exit 4) naming the stream and the
 * field, before anything is read or written, not crash later with "Invalid time value" or start
 * a silent full re-sync.
 *
 * One place: each known field has a check in a table below (`STREAM_FIELDS`, `PENDING_FIELDS`,
 * `LAST_RUN_FIELDS`, the ledger's). A new field is one line in its table. Fields not in a table
 * are kept as they are (a newer query-sync's fields survive an older one's writes).
 *
 * `version` lets a later format migrate: `MIGRATIONS[n]` turns a version-n document into n + 1.
 * A migration runs in memory on read; the file changes only on the run's next write.
 */

/** The state file format this build writes. */
export const STATE_VERSION = 1;

/** Migrations by the version they upgrade from (none yet: version 1 is the first format). */
const MIGRATIONS: Readonly<Record<number, (doc: Record<string, unknown>) => Record<string, unknown>>> = {};

/** What a check found wrong, said as "expected …, got …"; `undefined` when the value is fine. */
type Check = (value: unknown) => string | undefined;

/** A value's own description for a message: short, JSON-like. */
function shown(value: unknown): string {
  if (value === undefined) return 'nothing';
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/;

const instant: Check = (v) =>
  typeof v === 'string' && ISO_INSTANT.test(v) && !Number.isNaN(Date.parse(v))
    ? undefined
    : `expected an ISO-8601 instant such as 2026-01-01T00:00:00.000Z, got ${shown(v)}`;
const count: Check = (v) =>
  typeof v === 'number' && Number.isInteger(v) && v >= 0 ? undefined : `expected a whole number ≥ 0, got ${shown(v)}`;
const seconds: Check = (v) =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0
    ? undefined
    : `expected a number of seconds ≥ 0, got ${shown(v)}`;
const text: Check = (v) => (typeof v === 'string' ? undefined : `expected a string, got ${shown(v)}`);
const cursor: Check = (v) =>
  typeof v === 'string' && v !== '' ? undefined : `expected a non-empty cursor string, got ${shown(v)}`;
const outcome: Check = (v) => (v === 'ok' || v === 'failed' ? undefined : `expected "ok" or "failed", got ${shown(v)}`);

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Fields of an object: each present field passes its check; `required` ones must be present. */
interface Shape {
  readonly fields: Readonly<Record<string, Check>>;
  readonly required?: readonly string[];
  /** A check across fields (e.g. from < to), after each field passed. */
  readonly whole?: (value: Record<string, unknown>) => string | undefined;
}

/** The first problem in `value` against `shape`, as [field path, problem]. */
function problemIn(value: unknown, shape: Shape): [string, string] | undefined {
  if (!isObject(value)) return ['', `expected an object, got ${shown(value)}`];
  for (const name of shape.required ?? [])
    if (value[name] === undefined) return [name, 'expected it to be present, got nothing'];
  for (const [name, check] of Object.entries(shape.fields)) {
    if (value[name] === undefined) continue;
    const problem = check(value[name]);
    if (problem !== undefined) return [name, problem];
  }
  const problem = shape.whole?.(value);
  return problem === undefined ? undefined : ['', problem];
}

/** A check of a nested object against `shape` (its field names join the path). */
function nested(shape: Shape): Check & { readonly shape: Shape } {
  const check = (v: unknown): string | undefined => {
    const p = problemIn(v, shape);
    return p === undefined ? undefined : p[0] === '' ? p[1] : `field "${p[0]}": ${p[1]}`;
  };
  return Object.assign(check, { shape });
}

function list(item: Check): Check {
  return (v) => {
    if (!Array.isArray(v)) return `expected a list, got ${shown(v)}`;
    for (const [i, entry] of v.entries()) {
      const problem = item(entry);
      if (problem !== undefined) return `entry ${i}: ${problem}`;
    }
    return undefined;
  };
}

const ordered = (v: Record<string, unknown>): string | undefined =>
  Date.parse(v.from as string) < Date.parse(v.to as string)
    ? undefined
    : `expected "from" before "to", got [${shown(v.from)}, ${shown(v.to)})`;

const INTERVAL: Shape = { fields: { from: instant, to: instant }, required: ['from', 'to'], whole: ordered };

/** `pending`: the window a sync was reading and the cursor of its next page. */
const PENDING_FIELDS: Shape = {
  fields: { from: instant, to: instant, cursor },
  required: ['from', 'to'],
  whole: ordered,
};

/** `lastRun`, of a sync stream and of a backfill's (its span, windows and skipped too). */
const LAST_RUN_FIELDS: Shape = {
  fields: {
    at: instant,
    from: instant,
    to: instant,
    outcome,
    rows: count,
    pages: count,
    requests: count,
    windows: count,
    skipped: count,
    seconds,
    error: text,
    owed: count,
  },
  required: ['at', 'outcome'],
};

/** One sync stream (`streams["<resource>:<scope>"]`). Add a field here when `StreamState` grows one. */
const STREAM_FIELDS: Shape = {
  fields: {
    mark: instant,
    pending: nested(PENDING_FIELDS),
    // A split walk in progress: its window and the sub-windows not yet stored, each with its cursor.
    split: nested({
      fields: { ...INTERVAL.fields, parts: list(nested(PENDING_FIELDS)) },
      required: ['from', 'to', 'parts'],
      whole: ordered,
    }),
    lastRun: nested(LAST_RUN_FIELDS),
    // The settle pass (late enrichment) and the arrival delay of the last run.
    settled: instant,
    settlePending: nested(PENDING_FIELDS),
    lateness: nested({
      fields: { at: instant, records: count, p50Ms: count, p99Ms: count, maxMs: count },
      required: ['at', 'records', 'p50Ms', 'p99Ms', 'maxMs'],
    }),
  },
};

/** The trace queue (`sections["children:<resource>"]`, persisted name kept): per project, pending and done event ids → event time (ms). */
const TRACE_UNITS: Check = (v) => {
  if (!isObject(v)) return `expected {"<id>": <epoch ms>, ...}, got ${shown(v)}`;
  for (const [id, at] of Object.entries(v)) {
    if (typeof at !== 'number' || !Number.isFinite(at))
      return `"${id}": expected an epoch in milliseconds, got ${shown(at)}`;
  }
  return undefined;
};
const TRACE_PROJECT_FIELDS: Shape = {
  fields: { pending: TRACE_UNITS, done: TRACE_UNITS },
  required: ['pending', 'done'],
};

/** A complete owed listing (`sections["owed-listed:<resource>"]`, per project): two epochs in ms. */
const OWED_MARK: Check = (v) => {
  if (!isObject(v)) return `expected {"listedAtMs": <epoch ms>, "fullAtMs": <epoch ms>}, got ${shown(v)}`;
  for (const field of ['listedAtMs', 'fullAtMs']) {
    const at = v[field];
    if (typeof at !== 'number' || !Number.isFinite(at))
      return `"${field}": expected an epoch in milliseconds, got ${shown(at)}`;
  }
  return undefined;
};

/** What was learned about the server (`sections.server`). */
const SERVER_FIELDS: Shape = {
  fields: {
    perParent: (v) => {
      if (!isObject(v)) return `expected {"<resource>": {...}}, got ${shown(v)}`;
      for (const [name, fact] of Object.entries(v)) {
        const p = problemIn(fact, {
          fields: {
            byParent: (b) => (typeof b === 'boolean' ? undefined : `expected true or false, got ${shown(b)}`),
            learnedAt: instant,
            evidence: text,
          },
          required: ['byParent'],
        });
        if (p !== undefined) return `"${name}"${p[0] === '' ? '' : `, field "${p[0]}"`}: ${p[1]}`;
      }
      return undefined;
    },
  },
};

/** Saved searches (`sections.searches`): per "<search>|<project>", the run start read up to and the definition read with. */
const SEARCH_MARK_FIELDS: Shape = { fields: { mark: instant, definition: text }, required: ['mark', 'definition'] };

/** One stream of the backfill ledger (`sections.backfills.streams["<resource>:<scope>"]`). */
const LEDGER_STREAM_FIELDS: Shape = {
  fields: {
    requested: list(nested(INTERVAL)),
    done: list(
      nested({
        fields: { ...INTERVAL.fields, rows: count, pages: count, at: instant, windows: count },
        required: ['from', 'to', 'at'],
        whole: ordered,
      }),
    ),
    running: list(
      nested({
        fields: { ...INTERVAL.fields, cursor, rows: count, pages: count, since: instant },
        required: ['from', 'to'],
        whole: ordered,
      }),
    ),
    fullRead: nested({ fields: { at: instant, rows: count, pages: count }, required: ['at'] }),
    lastRun: nested(LAST_RUN_FIELDS),
  },
};

/** Name of the state section that holds the backfill ledger (see `ledger.ts`). */
const LEDGER_SECTION = 'backfills';

export interface ValidateOptions {
  /** Resource names a stream key may start with; `undefined` accepts any name. */
  readonly resources?: readonly string[];
}

/** Why a state document is refused: where (stream, field) and what. */
export interface StateProblem {
  readonly where: string;
  readonly problem: string;
}

/**
 * Migrate and check a parsed state file. Returns the document, or the first problem found. Pure:
 * the caller turns a problem into a `StateError` and writes nothing.
 */
export function validateState(
  raw: unknown,
  options: ValidateOptions = {},
): { doc: Record<string, unknown> } | StateProblem {
  if (!isObject(raw))
    return {
      where: 'the file',
      problem: `expected a JSON object {"version": ${STATE_VERSION}, "streams": {...}}, got ${shown(raw)}`,
    };
  let doc = raw;
  const version = doc.version;
  if (typeof version !== 'number' || !Number.isInteger(version) || version < 1) {
    return { where: 'field "version"', problem: `expected a format version (${STATE_VERSION}), got ${shown(version)}` };
  }
  if (version > STATE_VERSION) {
    return {
      where: 'field "version"',
      problem: `the file is format ${version}, written by a newer query-sync; this one reads up to ${STATE_VERSION}: upgrade query-sync`,
    };
  }
  for (let v = version; v < STATE_VERSION; v += 1) {
    const migrate = MIGRATIONS[v];
    if (migrate === undefined) return { where: 'field "version"', problem: `no migration from format ${v}` };
    doc = { ...migrate(doc), version: v + 1 };
  }

  const streams = doc.streams ?? {};
  if (!isObject(streams))
    return {
      where: 'field "streams"',
      problem: `expected an object keyed by "<resource>:<scope>", got ${shown(streams)}`,
    };
  for (const [key, stream] of Object.entries(streams)) {
    const found = streamProblem(key, stream, STREAM_FIELDS, options);
    if (found !== undefined) return found;
  }
  const projects = doc.projects ?? [];
  const projectsProblem = list(text)(projects);
  if (projectsProblem !== undefined) return { where: 'field "projects"', problem: projectsProblem };
  const sections = doc.sections ?? {};
  if (!isObject(sections)) return { where: 'field "sections"', problem: `expected an object, got ${shown(sections)}` };

  const ledger = sections[LEDGER_SECTION];
  if (ledger !== undefined && ledger !== null) {
    if (!isObject(ledger) || ledger.version !== 1 || !isObject(ledger.streams)) {
      return {
        where: `section "${LEDGER_SECTION}"`,
        problem: `expected a backfill ledger {"version": 1, "streams": {...}}, got ${shown(ledger)}`,
      };
    }
    for (const [key, stream] of Object.entries(ledger.streams)) {
      const found = streamProblem(key, stream, LEDGER_STREAM_FIELDS, options, `backfill ledger stream`);
      if (found !== undefined) return found;
    }
  }
  const server = sections.server;
  if (server !== undefined) {
    const p = problemIn(server, SERVER_FIELDS);
    if (p !== undefined) return { where: `section "server"${p[0] === '' ? '' : `, field "${p[0]}"`}`, problem: p[1] };
  }
  for (const [name, section] of Object.entries(sections)) {
    const keyed = KEYED_SECTIONS.find((k) => k.named(name));
    if (keyed === undefined || section === undefined) continue;
    const found = keyedSectionProblem(name, section, keyed);
    if (found !== undefined) return found;
  }
  return { doc: { ...doc, streams, projects, sections } };
}

/** Sections keyed by a search or a project, each entry checked alike. */
interface KeyedSection {
  readonly named: (name: string) => boolean;
  /** What an entry's key names, for the message. */
  readonly entry: string;
  readonly expected: string;
  readonly check: Shape | Check;
}

const KEYED_SECTIONS: readonly KeyedSection[] = [
  {
    named: (n) => n === 'searches',
    entry: 'search',
    expected: '{"<search>|<project>": {"mark": ..., "definition": ...}}',
    check: SEARCH_MARK_FIELDS,
  },
  {
    named: (n) => n === 'aggregates',
    entry: 'project',
    expected: '{"<project>" (daily counts) or "<project>|hour": "<instant>"}',
    check: instant,
  },
  {
    named: (n) => n.startsWith('children:'), // the trace queue's sections (state/books/traces.ts)
    entry: 'project',
    expected: '{"<project>": {"pending": {...}, "done": {...}}}',
    check: TRACE_PROJECT_FIELDS,
  },
  {
    named: (n) => n.startsWith('owed-listed:'),
    entry: 'project',
    expected: '{"<project>": {"listedAtMs": <epoch ms>, "fullAtMs": <epoch ms>}}',
    check: OWED_MARK,
  },
];

/** A value's own problem, as `problemIn` gives a field's: at the top of the path. */
function atTop(problem: string | undefined): [string, string] | undefined {
  return problem === undefined ? undefined : ['', problem];
}

function keyedSectionProblem(name: string, section: unknown, keyed: KeyedSection): StateProblem | undefined {
  if (!isObject(section))
    return { where: `section "${name}"`, problem: `expected ${keyed.expected}, got ${shown(section)}` };
  for (const [key, value] of Object.entries(section)) {
    const check = keyed.check;
    const p = typeof check === 'function' ? atTop(check(value)) : problemIn(value, check);
    if (p !== undefined)
      return {
        where: `section "${name}", ${keyed.entry} "${key}"${p[0] === '' ? '' : `, field "${p[0]}"`}`,
        problem: p[1],
      };
  }
  return undefined;
}

function streamProblem(
  key: string,
  stream: unknown,
  shape: Shape,
  options: ValidateOptions,
  label = 'stream',
): StateProblem | undefined {
  if (options.resources !== undefined) {
    const resource = /^([^:]+):./.exec(key)?.[1];
    if (resource === undefined)
      return { where: `${label} "${key}"`, problem: 'expected a key "<resource>:<scope>", such as "events:*"' };
    if (options.resources.includes(resource)) return streamFieldsProblem(key, stream, shape, label);
    return {
      where: `${label} "${key}"`,
      problem: `unknown resource "${resource}"; expected one of ${options.resources.join(', ')}`,
    };
  }
  return streamFieldsProblem(key, stream, shape, label);
}

function streamFieldsProblem(key: string, stream: unknown, shape: Shape, label: string): StateProblem | undefined {
  const found = problemIn(stream, shape);
  if (found === undefined) return undefined;
  return { where: found[0] === '' ? `${label} "${key}"` : `${label} "${key}", field "${found[0]}"`, problem: found[1] };
}
