import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { json, startServer } from '../fakes/bad-server.js';
import { runCli } from '../fakes/cli.js';
import { dir, onCleanup } from '../fakes/lifecycle.js';
import { startReceiver } from '../fakes/monitoring.js';

// A key with characters that URL-encoding and JSON escaping change, so every echoed form is tried.
const KEY = 'qs_org_s3cret/KEY+42==tail';
const PREFIX = KEY.slice(0, 6); // what a trim at the wrong moment would leave

describe('the API key never reaches logs, state, status or the warehouse, whatever the server echoes', () => {
  it('a server echoing the key in error bodies (plain, URL-encoded, JSON-escaped, past the trim point) and headers', async () => {
    const server = await startServer({
      '/v1/events': (_req, _url, res) => {
        // The key sits across the 200-character trim point of error messages: a trim before
        // redaction would leave its first characters behind.
        const text = JSON.stringify({
          error: { code: 'bad_request', message: `${'x'.repeat(140)} your key ${KEY} is not allowed here` },
        });
        res.writeHead(400, {
          'content-type': 'application/json',
          'x-echo-key': KEY,
          'www-authenticate': `Bearer ${KEY}`,
        });
        res.end(text);
      },
      '/v1/users': (req, _url, res) => {
        res.writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': String(req.headers.authorization) });
        res.end(`unknown key ${encodeURIComponent(KEY)} (raw: ${KEY}; json: ${JSON.stringify(KEY)})`);
      },
      '/v1/signals': (_req, _url, res) =>
        json(res, 200, { data: [{ id: 's1', name: 'ok' }], meta: { cursor: null, has_more: false } }),
    });
    onCleanup(server.close);
    const d = dir();
    const common = ['--state', join(d, 'state.json'), '--duckdb-path', join(d, 'w.duckdb')];
    // Every monitoring output on too (docs/monitoring.md): the metrics file, the pings' bodies, the
    // notifications (whose failure texts quote the errors the server echoed the key into).
    const receiver = await startReceiver('ok');
    const metricsFile = join(d, 'query-sync.prom');
    // The 400 that echoes the key, in a run of its own: a 401 stops a run's every stream at once
    // (no request leaves after it), so in one run with users the events stream would end on the 401.
    const first = await runCli({ url: server.url, apiKey: KEY }, [
      'sync',
      '--resources',
      'events,signals',
      '--log-format',
      'json',
      ...common,
    ]);
    expect(first.code).not.toBe(0);
    expect(first.stdout).toMatch(/events .*FAILED: .*HTTP 400.*your key \[redac/);
    const sync = await runCli({ url: server.url, apiKey: KEY }, [
      'sync',
      '--resources',
      'users,signals',
      '--log-format',
      'json',
      '--metrics-file',
      metricsFile,
      '--ping-url',
      `${receiver.url}/ping`,
      '--notify-url',
      `${receiver.url}/hook`,
      '--notify-on',
      'failure,difference,schema-change',
      ...common,
    ]);
    expect(sync.code).not.toBe(0);
    const notified = receiver.received.filter((r) => r.url.startsWith('/hook')).map((r) => r.body);
    expect(notified.join('\n')).toMatch(/FAILED: users default: E_AUTH: .*unknown key \[redacted\]/);
    expect(receiver.received.filter((r) => r.url.startsWith('/ping/fail'))).toHaveLength(1);
    // The failures were reported, with the echoes in place of the key.
    expect(sync.stdout).toMatch(/users .*FAILED: .*401.*\[redacted\]/);

    const state = readFileSync(join(d, 'state.json'), 'utf8');
    expect(state).toMatch(/\[redacted\]/);
    // `status` read without the key in its environment: the state itself must be clean.
    const statusText = await runCli({ url: server.url, apiKey: '' }, ['status', ...common]);
    const statusJson = await runCli({ url: server.url, apiKey: '' }, ['status', '--json', ...common]);
    expect(statusText.stdout).toMatch(/failed .*\[redacted\]/);
    expect(JSON.parse(statusJson.stdout)).toBeTypeOf('object');
    // The freshness check and the HTML report (it shows each run's errors): read without the key too.
    const check = await runCli({ url: server.url, apiKey: '' }, ['status', '--check', ...common]);
    expect(check.code).toBe(7);
    const report = await runCli({ url: server.url, apiKey: '' }, [
      'report',
      '--html',
      join(d, 'report.html'),
      '--duckdb-path',
      join(d, 'w.duckdb'),
    ]);
    expect(report.code, report.stdout + report.stderr).toBe(0);
    const page = readFileSync(join(d, 'report.html'), 'utf8');
    expect(page).toMatch(/<b class="badge fail">failed<\/b>.*HTTP 400/);
    // The sync's working file, the published copy and its Parquet set (docs/analysts.md): none holds the key.
    const parquet = readdirSync(join(d, 'w.duckdb.files'), { recursive: true })
      .map(String)
      .filter((f) => f.endsWith('.parquet') || f.endsWith('.json'));
    const warehouse = [
      join(d, 'w.work.duckdb'),
      join(d, 'w.duckdb'),
      ...parquet.map((f) => join(d, 'w.duckdb.files', f)),
    ]
      .map((f) => readFileSync(f).toString('latin1'))
      .join('\n');

    for (const [where, text] of Object.entries({
      'sync stdout': first.stdout + sync.stdout,
      'sync stderr (logs)': first.stderr + sync.stderr,
      'state.json': state,
      'status text': statusText.stdout + statusText.stderr,
      'status --json': statusJson.stdout + statusJson.stderr,
      'status --check': check.stdout + check.stderr,
      'report --html': page + report.stdout + report.stderr,
      'warehouse file': warehouse,
      'metrics file': readFileSync(metricsFile, 'utf8'),
      'pings and notifications': receiver.received.map((r) => `${r.url}\n${r.body}`).join('\n'),
    })) {
      for (const form of [PREFIX, encodeURIComponent(KEY).slice(13, 25)]) {
        expect(text.includes(form), `${where} holds "${form}"`).toBe(false);
      }
    }
  });
});
