/**
 * The vendor's SDK pointed at an emulator, made strict. The SDK validates every response with its
 * zod schemas, but leniently: a value of the wrong type is coerced (a boolean where a string is
 * declared becomes its JSON text, a missing required field its zero value) and only counted as
 * "unrecognized". `strictCall` fails on any such value, and on any field the SDK's schema does not
 * declare (except the few the spec documents beyond the SDK), so "passes the SDK's validation"
 * means exactly the SDK's shapes.
 */

import { RaindropQuery } from '@raindrop-ai/query';
import { HTTPClient } from '@raindrop-ai/query/lib/http.js';
import { startCountingUnrecognized } from '@raindrop-ai/query/types/unrecognized.js';

/** What a strict call saw besides the SDK's own result. */
interface RawExchange {
  readonly url: string;
  readonly status: number;
  readonly body: string;
}

export interface StrictClient {
  readonly sdk: RaindropQuery;
  /** Every exchange, oldest first. */
  readonly exchanges: RawExchange[];
}

export function sdkClient(
  serverURL: string,
  apiKey: string,
  fetcher?: (req: Request) => Promise<Response>,
): StrictClient {
  const exchanges: RawExchange[] = [];
  const httpClient = new HTTPClient({
    fetcher: async (input) => {
      const request = input instanceof Request ? input : new Request(input);
      const response = fetcher ? await fetcher(request) : await fetch(request);
      const body = await response.text();
      exchanges.push({ url: request.url, status: response.status, body });
      return new Response(body, {
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
      });
    },
  });
  return { sdk: new RaindropQuery({ apiKey, serverURL, httpClient }), exchanges };
}

/** A zod-mini schema seen through its definition (`_zod.def`), enough to list declared keys. */
interface SchemaDef {
  readonly type: string;
  readonly shape?: Readonly<Record<string, Schema>>;
  readonly in?: Schema;
  readonly innerType?: Schema;
  readonly element?: Schema;
  readonly options?: readonly Schema[];
  readonly valueType?: Schema;
  readonly getter?: () => Schema;
}
interface Schema {
  readonly _zod: { readonly def: SchemaDef };
}

/**
 * Paths (`$.data[3].foo`) of fields in `value` that `schema` does not declare, except names in
 * `allowed`. Schemas the SDK builds with its own union helper (an opaque transform) are not entered.
 */
function undeclaredFields(schema: unknown, value: unknown, allowed: ReadonlySet<string>, path = '$'): string[] {
  const def = (schema as Schema | undefined)?._zod?.def;
  if (def === undefined || value === null || value === undefined) return [];
  switch (def.type) {
    case 'pipe':
      return undeclaredFields(def.in, value, allowed, path);
    case 'lazy':
      return def.getter ? undeclaredFields(def.getter(), value, allowed, path) : [];
    case 'optional':
    case 'nullable':
    case 'default':
    case 'prefault':
      return undeclaredFields(def.innerType, value, allowed, path);
    case 'array':
      return Array.isArray(value)
        ? value.flatMap((item, i) => undeclaredFields(def.element, item, allowed, `${path}[${i}]`))
        : [];
    case 'record':
      return typeof value === 'object'
        ? Object.entries(value as object).flatMap(([k, v]) =>
            undeclaredFields(def.valueType, v, allowed, `${path}.${k}`),
          )
        : [];
    case 'union': {
      // The option that explains the value best.
      const candidates = (def.options ?? []).map((option) => undeclaredFields(option, value, allowed, path));
      return (
        candidates.reduce<string[] | undefined>(
          (best, c) => (best === undefined || c.length < best.length ? c : best),
          undefined,
        ) ?? []
      );
    }
    case 'object': {
      if (typeof value !== 'object' || Array.isArray(value)) return [];
      const shape = def.shape ?? {};
      return Object.entries(value as Record<string, unknown>).flatMap(([key, item]) =>
        key in shape
          ? undeclaredFields(shape[key], item, allowed, `${path}.${key}`)
          : allowed.has(key)
            ? []
            : [`${path}.${key}`],
      );
    }
    default:
      return [];
  }
}

/**
 * Runs one SDK call and returns its result, failing (throwing) when the SDK rejected the response,
 * coerced any value in it, or when the body holds a field `responseSchema` does not declare and
 * `allowed` does not name. `label` names the operation and scope in every failure.
 */
export async function strictCall<T>(
  client: StrictClient,
  label: string,
  responseSchema: unknown,
  allowed: ReadonlySet<string>,
  call: (sdk: RaindropQuery) => Promise<T>,
): Promise<T> {
  const before = client.exchanges.length;
  const counter = startCountingUnrecognized();
  let coerced = 0;
  let result: T;
  try {
    result = await call(client.sdk);
  } finally {
    coerced = counter.end();
  }
  const exchange = client.exchanges[client.exchanges.length - 1];
  if (exchange === undefined || client.exchanges.length !== before + 1) {
    throw new Error(`${label}: expected exactly one HTTP exchange, saw ${client.exchanges.length - before}`);
  }
  if (coerced > 0) {
    throw new Error(
      `${label}: the SDK accepted ${coerced} value(s) only by coercing them (wrong type or missing required field) in ${exchange.body.slice(0, 400)}`,
    );
  }
  const extra = undeclaredFields(responseSchema, JSON.parse(exchange.body), allowed);
  if (extra.length > 0)
    throw new Error(`${label}: fields the SDK's schema does not declare: ${extra.slice(0, 10).join(', ')}`);
  return result;
}
