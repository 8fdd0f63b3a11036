import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { RESOURCE_NAMES } from '../../../../connectors/index.js';
import { resetCommand } from '../../../../src/cli/commands/reset.js';
import { resolveResetConfig } from '../../../../src/config/index.js';
import { systemClock } from '../../../../src/core/clock.js';
import { EXIT_CODES } from '../../../../src/core/exit-codes.js';
import { StateStore } from '../../../../src/state/store.js';
import { tempDir } from '../../../fakes/tmp.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

const MARK = '2026-11-01T00:00:00.000Z';
const lastRun = { at: MARK, outcome: 'ok' as const, rows: 1, pages: 1, requests: 1, seconds: 1 };

async function stateWithMarks(): Promise<string> {
  const d = tempDir();
  cleanups.push(d.cleanup);
  const path = join(d.dir, 'state.json');
  const store = await StateStore.open(path, { clock: systemClock, purpose: 'sync' });
  for (const key of ['users:*', 'users:alpha', 'users:*[alpha,beta]', 'events:*'])
    await store.updateStream(key, () => ({ mark: MARK, lastRun }));
  await store.close();
  return path;
}

describe('reset', () => {
  it('on a terminal it asks; "n" changes nothing, "y" forgets the marks of the named streams only and keeps their last run', async () => {
    const path = await stateWithMarks();
    const before = await StateStore.read(path);
    const lines: string[] = [];
    const questions: string[] = [];
    const config = resolveResetConfig({ state: path, resources: 'users', project: '*' }, {});
    const no = await resetCommand(config, {
      print: (l) => lines.push(l),
      interactive: true,
      ask: (q) => {
        questions.push(q);
        return Promise.resolve('n');
      },
    });
    expect(no).toBe(1);
    expect(questions[0]).toMatch(
      /Forget the marks of 2 streams \(users:\*, users:\*\[alpha,beta\]\) in .*state\.json\? .*\[y\/N\]/,
    );
    expect(lines).toContain('reset cancelled: nothing changed');
    expect(await StateStore.read(path)).toEqual(before);

    const yes = await resetCommand(config, {
      print: (l) => lines.push(l),
      interactive: true,
      ask: () => Promise.resolve('y'),
    });
    expect(yes).toBe(0);
    const after = await StateStore.read(path);
    expect(after.streams['users:*']).toEqual({ lastRun });
    expect(after.streams['users:*[alpha,beta]']).toEqual({ lastRun });
    expect(after.streams['users:alpha']?.mark).toBe(MARK);
    expect(after.streams['events:*']?.mark).toBe(MARK);
  });

  it('waits for no running sync: while one holds the sync lease, reset fails with the state exit code and forgets nothing', async () => {
    const path = await stateWithMarks();
    const before = await StateStore.read(path);
    const running = await StateStore.open(path, { clock: systemClock, purpose: 'sync' });
    cleanups.push(() => void running.close());
    const lines: string[] = [];
    const code = await resetCommand(resolveResetConfig({ state: path, resources: 'users', yes: true }, {}), {
      print: (l) => lines.push(l),
      interactive: false,
    });
    expect({ code, line: lines.at(-1) }).toEqual({
      code: EXIT_CODES.state,
      line: expect.stringMatching(/^reset FAILED: .*(sync|lock|lease)/i) as unknown,
    });
    expect(await StateStore.read(path)).toEqual(before);
  });

  it('refuses to run without --resources, and without --yes off a terminal (exit 2)', async () => {
    const path = await stateWithMarks();
    const lines: string[] = [];
    expect(
      await resetCommand(resolveResetConfig({ state: path, yes: true }, {}), {
        print: (l) => lines.push(l),
        interactive: false,
      }),
    ).toBe(2);
    expect(lines.pop()).toMatch(
      new RegExp(
        `name the streams to forget with --resources .*every resource: --resources ${RESOURCE_NAMES.join(',')}\\)$`,
      ),
    );
    expect(
      await resetCommand(resolveResetConfig({ state: path, resources: 'users' }, {}), {
        print: (l) => lines.push(l),
        interactive: false,
      }),
    ).toBe(2);
    expect(lines.pop()).toMatch(/pass --yes/);
  });
});
