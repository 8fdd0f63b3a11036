import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../fakes/cli.js';
import { dbPathOf, statePathOf } from '../fakes/harness.js';
import { dir, emulator } from '../fakes/lifecycle.js';
import { layoutOf } from '../../src/publish/layout.js';

/** DuckDB's block: the least a row group costs the file. */
const BLOCK = 262_144;

/** Every file of the Parquet set with its modification time. */
function parquetFiles(files: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const entry of readdirSync(files, { recursive: true, withFileTypes: true })) {
    if (entry.isFile())
      out.set(join(entry.parentPath, entry.name), statSync(join(entry.parentPath, entry.name)).mtimeMs);
  }
  return out;
}

describe('a run with nothing new costs nothing on disk (the real CLI, a real DuckDB file)', () => {
  it('eight syncs with nothing new leave the working file within a few blocks of its size, and rewrite only the run history in the Parquet set', async () => {
    const emu = await emulator({ seed: 21, eventsPerProject: 150, projects: ['alpha'] });
    const d = dir();
    const layout = layoutOf(dbPathOf(d));
    const args = ['sync', '--project', 'alpha', '--duckdb-path', dbPathOf(d), '--state', statePathOf(d), '--quiet'];
    const sync = async (): Promise<void> => {
      const run = await runCli(emu, args);
      expect(run.code, run.stdout + run.stderr).toBe(0);
    };
    await sync();
    await sync(); // the first run with nothing new: settles what the first one left open
    const size = (): number => statSync(layout.work).size;
    const after = size();
    let before = parquetFiles(layout.files);
    for (let i = 0; i < 8; i++) {
      await sync();
      const now = parquetFiles(layout.files);
      // Only what is new was written: the run history's row (its file and version), the manifest.
      const written = [...now]
        .filter(([file, mtime]) => before.get(file) !== mtime)
        .map(([file]) => file.slice(layout.files.length + 1));
      expect(written.filter((f) => !f.includes('_query_sync_runs') && f !== 'manifest.json')).toEqual([]);
      before = now;
    }
    // Each run appends its row to _query_sync_runs: without compaction a new row group, a block a run
    // (2 MB over eight runs). Compacted, the blocks a run frees are reused by the next: the file
    // moves between two sizes at most a couple of blocks apart.
    expect(size() - after).toBeLessThanOrEqual(3 * BLOCK);
  }, 300_000);
});
