'use strict';
// What the bundle (scripts/bundle.mjs) gets for `import { Agent, request } from 'undici'`: the two
// parts of undici query-sync uses (src/http/client.ts, src/http/attempt.ts), without the 72 other
// files undici's index loads at every start (fetch, WebSocket, caches, mocks, proxies, SQLite): 65 ms
// of CPU per start (see bundle.mjs).
//
// `request` is undici's own (lib/api/api-request.js, what `Dispatcher.prototype.request` is), called
// on the dispatcher every call passes, with the origin and path split as undici's index does. A call
// without a dispatcher fails: the global dispatcher is part of what is left out.
// The paths are undici's files (it has no `exports` map); the bundle fails to build if one moves.
const Agent = require('undici/lib/dispatcher/agent');
const requestOn = require('undici/lib/api/api-request');
const { InvalidArgumentError } = require('undici/lib/core/errors');

function request(url, opts) {
  if (opts == null || opts.dispatcher == null)
    throw new InvalidArgumentError('query-sync passes a dispatcher to every request');
  const at = new URL(url);
  return requestOn.call(opts.dispatcher, {
    ...opts,
    origin: at.origin,
    path: at.search ? `${at.pathname}${at.search}` : at.pathname,
    method: opts.method || 'GET',
  });
}

module.exports = { Agent, request };
