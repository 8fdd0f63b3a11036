import { onTestFinished } from 'vitest';
import { startEmulator, type Emulator, type EmulatorOptions } from '../../emulator/index.js';
import { tempDir } from './tmp.js';

/**
 * Per-test resources released when the test finishes (passed or failed), newest first.
 *
 * Not a module-level `afterEach`: the fast group shares worker processes between files
 * (`isolate: false`), so this module is evaluated once per worker and a hook registered at import
 * would belong to the first file only; the later files' emulators and folders were never released.
 * `onTestFinished` belongs to the test that is running when the first cleanup is registered.
 */
const cleanups: Array<() => unknown> = [];

export function onCleanup(cleanup: () => unknown): void {
  if (cleanups.length === 0) {
    onTestFinished(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    });
  }
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
