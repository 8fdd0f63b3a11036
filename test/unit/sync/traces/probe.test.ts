import { describe, expect, it } from 'vitest';
import { AuthError, FatalApiError, RetriableError } from '../../../../src/core/errors.js';
import { probeVerdict } from '../../../../src/sync/traces/probe.js';

/** The traces probe's verdict on each kind of answer (src/sync/traces/probe.ts). */
describe('probeVerdict', () => {
  it('a refused project scope (403, as a first `*` run probing with no header gets) reads per event for this run only', () => {
    expect(probeVerdict('/v1/traces', 'event_id', { error: new AuthError('project refused', 403) })).toEqual({
      byParent: true,
      keep: false,
      evidence: 'GET /v1/traces without event_id was refused (HTTP 403)',
    });
  });

  it('400 naming event_id in details.field is kept; a 5xx says nothing', () => {
    expect(
      probeVerdict('/v1/traces', 'event_id', { error: new FatalApiError('missing', 400, { field: 'event_id' }) }),
    ).toMatchObject({ byParent: true, keep: true });
    expect(
      probeVerdict('/v1/traces', 'event_id', { error: new RetriableError('down', { status: 503 }) }),
    ).toBeUndefined();
  });
});
