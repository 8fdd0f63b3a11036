import nock from 'nock';
import { afterAll } from 'vitest';

/**
 * Set-up of every file in project `fast-nock` (vitest.config.ts). Those files share worker
 * processes, and nock's interceptors and net-connect rules are global to a process: after each
 * file, drop every interceptor it left (the BigQuery double's persist until `nock.cleanAll()`) and
 * allow connections again, so the next file in the worker starts as in a fresh one.
 */
afterAll(() => {
  nock.abortPendingRequests();
  nock.cleanAll();
  nock.enableNetConnect();
});
