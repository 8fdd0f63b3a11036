/**
 * Emulator speed: how long seeding 3 × 100k events takes and how fast pages are served, so the
 * other benchmarks measure the connector and not the emulator. Targets: seeding about 3 s, a page
 * well under 5 ms, a page deep into a cursor walk as fast as the first (keyset, not offset).
 *
 *   npm run bench:emulator [-- EVENTS_PER_PROJECT]     (default 100000, three projects)
 */
import { request } from 'undici';
import { startEmulator, type Emulator } from '../emulator/index.js';

const eventsPerProject = Number(process.argv[2] ?? 100_000);

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

async function get(emu: Emulator, path: string, project?: string): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = { authorization: `Bearer ${emu.apiKey}` };
  if (project !== undefined) headers['X-Service-Project-Id'] = project;
  const response = await request(emu.url + path, { headers });
  return { status: response.statusCode, text: await response.body.text() };
}

async function timed(emu: Emulator, path: string, project: string | undefined, times: number): Promise<number> {
  const ms: number[] = [];
  for (let i = 0; i < times; i++) {
    const t = performance.now();
    const reply = await get(emu, path, project);
    ms.push(performance.now() - t);
    if (reply.status !== 200) throw new Error(`${path}: HTTP ${reply.status}: ${reply.text.slice(0, 200)}`);
  }
  return median(ms);
}

async function main(): Promise<void> {
  const started = performance.now();
  const emu = await startEmulator({ eventsPerProject });
  console.log(`seed ${eventsPerProject} events × 3 projects: ${(performance.now() - started).toFixed(0)} ms`);
  try {
    const since = new Date(Date.now() - 5 * 86_400_000).toISOString();
    const paths: [string, string | undefined][] = [
      ['/v1/events?limit=100', undefined],
      [`/v1/events?limit=100&timestamp[gte]=${since}`, undefined],
      ['/v1/events?limit=100', '*'],
      ['/v1/traces?limit=100', undefined],
      ['/v1/users?limit=100', undefined],
      ['/v1/conversations?limit=100', '*'],
      ['/v1/events/count', '*'],
    ];
    await timed(emu, '/v1/events?limit=100', undefined, 50); // warm up
    for (const [path, project] of paths) {
      console.log(
        `${(project ?? 'default').padEnd(8)} ${path}: median ${(await timed(emu, path, project, 40)).toFixed(2)} ms`,
      );
    }
    let cursor: string | null = null;
    for (let page = 0; page < 300; page++) {
      const reply = await get(emu, `/v1/events?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
      cursor = (JSON.parse(reply.text) as { meta: { cursor: string | null } }).meta.cursor;
      if (cursor === null) break;
    }
    if (cursor !== null) {
      console.log(
        `page 301 of a cursor walk: median ${(await timed(emu, `/v1/events?limit=100&cursor=${cursor}`, undefined, 20)).toFixed(2)} ms`,
      );
    }
  } finally {
    await emu.close();
  }
}

await main();
