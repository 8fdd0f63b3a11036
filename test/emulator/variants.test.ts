import { describe, expect, it } from 'vitest';
import { emulator } from '../fakes/lifecycle.js';
import { get, type ErrorBody } from './helpers.js';

/** The servers the emulator plays besides its flavors (docs/server-differences.md). */
describe('emulator variants: servers that differ as the spec or the SDK allow', () => {
  it('lacks: each optional route answers 404 in the SDK error shape; the rest answer as before', async () => {
    const emu = await emulator({
      seed: 3,
      eventsPerProject: 20,
      lacks: ['signal-groups', 'timeseries', 'facets', 'search'],
    });
    for (const path of [
      '/v1/signal-groups',
      '/v1/signal-groups/g1',
      '/v1/events/timeseries?interval=day',
      '/v1/events/facets?field=event_name',
      '/v1/events/search?query=x',
    ]) {
      const reply = await get(emu, path, { project: 'default' });
      expect(reply.status, path).toBe(404);
      expect((reply.json as ErrorBody).error.code).toBe('not_found');
    }
    expect((await get(emu, '/v1/events/count', { project: 'default' })).status).toBe(200);
    expect((await get(emu, '/v1/signals', { project: 'default' })).status).toBe(200);
  });

  it('timeseriesIntervals: another interval is refused with 400 naming it and what is allowed; timeseriesShape rows: another shape', async () => {
    const emu = await emulator({
      seed: 3,
      eventsPerProject: 20,
      timeseriesIntervals: ['hour', 'day'],
      timeseriesShape: 'rows',
    });
    const refused = await get(emu, '/v1/events/timeseries?interval=month', { project: 'default' });
    expect(refused.status).toBe(400);
    expect((refused.json as ErrorBody).error.details).toEqual({ field: 'interval', allowed_fields: ['hour', 'day'] });
    const rows = await get(emu, '/v1/events/timeseries?interval=day', { project: 'default' });
    expect(rows.status).toBe(200);
    const data = (rows.json as { data: { bucket: string; events: number }[] }).data;
    expect(data.reduce((n, b) => n + b.events, 0)).toBe(20);
    expect(Object.keys(data[0] ?? {})).toEqual(['bucket', 'events']);
  });
});
