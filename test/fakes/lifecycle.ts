import { afterEach } from 'vitest';
import { startEmulator, type Emulator, type EmulatorOptions } from '../../src/emulator/index.js';
import { tempDir } from './tmp.js';

/**
 * Per-test resources released after each test, newest first. Importing this module registers the
 * `afterEach` hook in the importing test file.
 */
const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

export function onCleanup(cleanup: () => unknown): void {
  cleanups.push(cleanup);
}

/** An emulator closed after the test. */
export async function emulator(options: EmulatorOptions): Promise<Emulator> {
  const emu = await startEmulator(options);
  onCleanup(() => emu.close());
  return emu;
}

/** A temp folder removed after the test. */
export function dir(): string {
  const d = tempDir();
  onCleanup(d.cleanup);
  return d.dir;
}
