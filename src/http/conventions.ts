import { readFileSync } from 'node:fs';

/**
 * The vendor SDK's HTTP conventions (node_modules/@raindrop-ai/query), followed so a server or a
 * user that works with the SDK works with query-sync: its default server and its bearer handling
 * (its retry headers are read in `retry-after.ts`). Each function cites the SDK file it follows.
 */

/** The SDK's one server (`src/lib/config.ts`, `ServerList[0]`, "Production"). */
export const DEFAULT_BASE_URL = 'https://query.raindrop.ai';

/**
 * `base` without trailing slashes and without a trailing `/v1`: every request path starts with
 * `/v1` (the SDK's paths do, on a server URL without it), so a base pasted as
 * `https://query.raindrop.ai/v1/` would otherwise ask `/v1/v1/events`.
 */
export function normalizeBaseUrl(base: string): string {
  return base.trim().replace(/\/+$/, '').replace(/\/v1$/i, '').replace(/\/+$/, '');
}

/**
 * The key without a `Bearer ` prefix (any case), as the SDK accepts it (`src/lib/security.ts`,
 * `applyBearer` adds the prefix only when it is not there): a key copied from a curl line keeps
 * working, and redaction looks for the key itself.
 */
export function bareApiKey(key: string): string {
  return key
    .trim()
    .replace(/^bearer\s+/i, '')
    .trim();
}

/** `query-sync/<version>`, the version read once from this package's package.json. */
export function userAgent(): string {
  return `query-sync/${packageVersion()}`;
}

let version: string | undefined;

/** query-sync's own version, from its package.json (not the one nearest the working folder). */
export function packageVersion(): string {
  version ??= findPackageVersion();
  return version;
}

function findPackageVersion(): string {
  // src/http/ and dist/src/http/ both reach the package root by walking up until a package.json
  // names query-sync (the compiled tree has no package.json of its own).
  for (let dir = new URL('.', import.meta.url); ; dir = new URL('..', dir)) {
    try {
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as {
        name?: unknown;
        version?: unknown;
      };
      if (pkg.name === 'query-sync' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // No package.json here: one level up.
    }
    if (dir.pathname === '/') return '0.0.0';
  }
}
